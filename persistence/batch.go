package persistence

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
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
	return &Batch{db: s.db, b: s.db.NewBatch(), stats: &s.stats}
}

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
