package persistence

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// Batch is an atomic group of writes. It is single-use: Commit closes it. A
// Batch is not safe for concurrent use, but many batches may commit at once.
// An abandoned (never committed) batch is simply garbage collected.
type Batch struct {
	db    *pebble.DB
	b     *pebble.Batch
	err   error // first error from building the batch, reported by Commit
	stats *stats
}

// NewBatch starts an atomic group of writes.
func (s *Store) NewBatch() *Batch {
	return &Batch{db: s.db, b: pebbleBatch(s.db), stats: &s.stats}
}

// pebbleBatch is kept out of line so that NewBatch, and the callers that
// wrap it, stay cheap enough to inline: a Batch that does not leave its
// caller's frame then costs no allocation.
//
//go:noinline
func pebbleBatch(db *pebble.DB) *pebble.Batch { return db.NewBatch() }

// NewBatchSize starts a batch with room for about size bytes of keys and
// values, so that a large batch (file chunks) is not regrown and copied
// while it is built.
func (s *Store) NewBatchSize(size int) *Batch {
	return &Batch{db: s.db, b: s.db.NewBatchWithSize(size), stats: &s.stats}
}

// Set adds key = value. Both slices are copied.
func (b *Batch) Set(key, value []byte) {
	b.keep(b.live().Set(key, value, nil))
}

// Delete removes key.
func (b *Batch) Delete(key []byte) {
	b.keep(b.live().Delete(key, nil))
}

// DeleteRange removes every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	b.keep(b.live().DeleteRange(start, end, nil))
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool {
	return b.live().Empty()
}

// Commit makes every write of the batch durable (fsync of the WAL) before
// returning nil. Concurrent commits from many goroutines share one WAL sync
// through Pebble's commit pipeline, so this is group commit. An empty batch
// commits nothing and returns nil. The batch cannot be used afterwards.
func (b *Batch) Commit() error { return b.commit(pebble.Sync, "commit") }

// commit commits the batch with opts and closes it; what names the
// operation in errors.
func (b *Batch) commit(opts *pebble.WriteOptions, what string) error {
	pb := b.live()
	b.b = nil
	defer pb.Close()
	if b.err != nil {
		return fmt.Errorf("persistence: %s: %w", what, b.err)
	}
	if pb.Empty() {
		return nil
	}
	if err := pb.Commit(opts); err != nil {
		return fmt.Errorf("persistence: %s: %w", what, err)
	}
	b.stats.committed(pb)
	return nil
}

// Durable waits until a batch applied by Apply is on disk.
type Durable struct {
	b     *pebble.Batch
	stats *stats
}

// Wait blocks until the batch's WAL sync is done and reports its error. It
// must be called exactly once.
func (d Durable) Wait() error {
	if d.b == nil {
		return nil
	}
	defer d.b.Close()
	if err := d.b.SyncWait(); err != nil {
		return fmt.Errorf("persistence: sync: %w", err)
	}
	d.stats.committed(d.b)
	return nil
}

// Apply makes the batch visible and queues its WAL sync without waiting for
// it; the caller must not acknowledge the write before Durable.Wait returns
// nil. It lets one writer (an actor) go on with its next request while the
// fsync of this one is in flight, so that successive writes of one actor
// share fsyncs too. Readers may see the writes before they are durable, as
// they may with Commit: Pebble publishes a batch before its sync completes.
func (b *Batch) Apply() (Durable, error) {
	pb := b.live()
	b.b = nil
	if b.err != nil {
		pb.Close()
		return Durable{}, fmt.Errorf("persistence: apply: %w", b.err)
	}
	if pb.Empty() {
		pb.Close()
		return Durable{}, nil
	}
	if err := b.db.ApplyNoSyncWait(pb, pebble.Sync); err != nil {
		pb.Close()
		return Durable{}, fmt.Errorf("persistence: apply: %w", err)
	}
	return Durable{b: pb, stats: b.stats}, nil
}

// live returns the underlying batch, refusing reuse after Commit: writes to a
// committed batch would otherwise be lost silently.
func (b *Batch) live() *pebble.Batch {
	if b.b == nil {
		panic("persistence: batch used after Commit")
	}
	return b.b
}

func (b *Batch) keep(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// Write makes the batch visible and appends it to the WAL without asking
// for a sync: it becomes durable with the next synced write of anyone
// (syncs complete in WAL order). For derived writes that a crash may undo
// as long as what they derive from survives (the sequencing of events:
// its outbox entries stay until the write is durable).
func (b *Batch) Write() error { return b.commit(pebble.NoSync, "write") }

// Sync waits until every write applied so far is durable (a WAL sync).
func (s *Store) Sync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("persistence: sync: %w", err)
	}
	return nil
}

// Repr is the batch's writes in Pebble's batch encoding: what a replicated
// write carries (Ops reads it back). It is valid until the batch is
// committed or closed.
func (b *Batch) Repr() []byte { return b.live().Repr() }

// Close discards a batch that will not be committed.
func (b *Batch) Close() {
	if b.b != nil {
		b.b.Close()
		b.b = nil
	}
}

// OpKind is the kind of one write of a batch.
type OpKind uint8

// The writes a Batch holds.
const (
	OpSet OpKind = iota + 1
	OpDelete
	OpDeleteRange
)

// Op is one write of a batch: Set Key = Value, Delete Key, or delete every
// key in [Key, Value) for OpDeleteRange.
type Op struct {
	Kind       OpKind
	Key, Value []byte
}

// ErrBadRepr reports an encoded batch that does not decode, or that holds
// a write no Batch makes.
var ErrBadRepr = errors.New("persistence: malformed batch encoding")

// Ops calls fn with each write of repr (a Repr), in order, until fn returns
// an error. The slices of an Op point into repr.
func Ops(repr []byte, fn func(Op) error) error {
	if _, ok := batchrepr.ReadHeader(repr); !ok {
		return ErrBadRepr
	}
	r := batchrepr.Read(repr)
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadRepr, err)
		}
		if !ok {
			return nil
		}
		op := Op{Key: key, Value: value}
		switch kind {
		case pebble.InternalKeyKindSet:
			op.Kind = OpSet
		case pebble.InternalKeyKindDelete:
			op.Kind = OpDelete
		case pebble.InternalKeyKindRangeDelete:
			op.Kind = OpDeleteRange
		default:
			return fmt.Errorf("%w: write of kind %v", ErrBadRepr, kind)
		}
		if err := fn(op); err != nil {
			return err
		}
	}
}

// Add adds one write to the batch (its slices are copied).
func (b *Batch) Add(op Op) {
	switch op.Kind {
	case OpSet:
		b.Set(op.Key, op.Value)
	case OpDelete:
		b.Delete(op.Key)
	case OpDeleteRange:
		b.DeleteRange(op.Key, op.Value)
	default:
		b.keep(fmt.Errorf("%w: op kind %d", ErrBadRepr, op.Kind))
	}
}

// AddRepr adds every write of repr (a Repr of another batch) to b.
func (b *Batch) AddRepr(repr []byte) error {
	return Ops(repr, func(op Op) error { b.Add(op); return nil })
}
