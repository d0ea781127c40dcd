package persistence

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch is an atomic group of writes. It is single-use: Commit closes it. A
// Batch is not safe for concurrent use, but many batches may commit at once.
// An abandoned (never committed) batch is simply garbage collected.
type Batch struct {
	b   *pebble.Batch
	err error // first error from building the batch, reported by Commit
}

// NewBatch starts an atomic group of writes.
func (s *Store) NewBatch() *Batch {
	return &Batch{b: s.db.NewBatch()}
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
func (b *Batch) Commit() error {
	pb := b.live()
	b.b = nil
	defer pb.Close()
	if b.err != nil {
		return fmt.Errorf("persistence: commit: %w", b.err)
	}
	if pb.Empty() {
		return nil
	}
	if err := pb.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("persistence: commit: %w", err)
	}
	return nil
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
