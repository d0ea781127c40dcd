package persistence

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is returned by Get when the key is absent.
var ErrNotFound = errors.New("persistence: not found")

// Options configures Open. The zero value is ready for production use.
type Options struct {
	// FS is the filesystem holding the database; nil means the real disk.
	// Tests pass vfs.NewMem() or vfs.NewCrashableMem().
	FS vfs.FS
	// Logger receives Pebble's own messages (info at debug, errors at warn);
	// nil discards them.
	Logger *slog.Logger
}

// Store is the node's durable storage: one Pebble database. It is safe for
// concurrent use.
type Store struct {
	db    *pebble.DB
	wal   *walSyncFS // nil unless the WAL syncs through withWALSync
	stats stats
	check atomic.Pointer[func(key []byte)] // SetReadCheck
	dir   string
	fs    vfs.FS
}

// SetReadCheck has every Get, Has and Scan call check first with the key
// it reads (a scan: its lower bound); nil: no check. A node of a cluster
// sets one that finds reads of partitions it holds no replica of
// (replica.Replica.CheckRead). It must not block.
func (s *Store) SetReadCheck(check func(key []byte)) {
	if check == nil {
		s.check.Store(nil)
		return
	}
	s.check.Store(&check)
}

// checkRead runs the read check, if any.
func (s *Store) checkRead(key []byte) {
	if c := s.check.Load(); c != nil {
		(*c)(key)
	}
}

// Open opens (creating if needed) the database in dir.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	// Owner only: it holds every message, file and hash of a secret.
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("persistence: create %s: %w", dir, err)
	}

	pl := pebbleLogger{l: logger.With("component", "pebble")}
	s := &Store{stats: newStats(), dir: dir, fs: fs}
	po := &pebble.Options{
		// For the real disk, set below: the WAL syncs wrapped, then
		// Pebble's disk-health checks around them.
		FS:     opts.FS,
		Logger: pl,
		// A new store has no old readers to stay compatible with.
		FormatMajorVersion: pebble.FormatNewest,
		// Two cores: one compaction normally, a second only when L0 backs up,
		// so compactions never starve the actors of CPU.
		CompactionConcurrencyRange: func() (int, int) { return 1, 2 },
		// Pebble keeps up to two memtables (one filling, one flushing) and
		// more while a flush is slow. 16 MiB keeps that under the node's
		// memory budget (docs/files.md "Files: memory": peak RSS under 200 MB
		// while 16 clients upload 5 MB files); message throughput measured
		// the same as with 64 MiB (6 A/B pairs, bench/README.md).
		MemTableSize:  16 << 20,
		EventListener: s.stats.listener(pl.l),
	}
	// Pebble's fastest profile (MinLZ on amd64, Snappy on arm64) instead of
	// its default, Snappy everywhere: flushes and compactions compress every
	// byte the actors write, and Snappy's encoder alone was 4% of a webhook
	// post's CPU (bench/README.md).
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionFastest })
	var wal *walSyncFS
	if opts.FS == nil {
		if wal = withWALSync(vfs.Default); wal != nil {
			po.FS = wal
			s.fs = wal          // FS: the raft log's segments (*.log) sync the same way
			po.WithFSDefaults() // the disk-health checks a nil FS gets
		}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", dir, err)
	}
	s.db, s.wal = db, wal
	return s, nil
}

// Close releases the database. Committed batches are already durable, so
// Close adds no durability. No method may be called afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("persistence: close: %w", err)
	}
	return nil
}

// Get returns a copy of the value stored at key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.checkRead(key)
	return get(s.db, key)
}

// Has reports whether a value is stored at key. Unlike Get it copies
// nothing: a hot path that only needs to know pays no allocation.
func (s *Store) Has(key []byte) (bool, error) {
	s.checkRead(key)
	_, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("persistence: get: %w", err)
	}
	if err := closer.Close(); err != nil {
		return false, fmt.Errorf("persistence: get: %w", err)
	}
	return true, nil
}

// reader is what Get needs; both *pebble.DB and *pebble.Snapshot provide it.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(r reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: get: %w", err)
	}
	// Pebble's slice is only valid until closer.Close.
	out := append(make([]byte, 0, len(v)), v...)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("persistence: get: %w", err)
	}
	return out, nil
}

// Scan visits the keys in [lower, upper) in ascending order, or descending
// when reverse is set, until fn returns false. A nil bound is open. k and v
// are only valid during fn: copy them to keep them.
func (s *Store) Scan(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	s.checkRead(lower)
	it, err := s.db.NewIter(iterBounds(lower, upper))
	if err != nil {
		return fmt.Errorf("persistence: scan: %w", err)
	}
	return scan(it, reverse, fn)
}

// iterBounds are the options of an iterator over [lower, upper). An empty
// lower bound is open, as nil is: Pebble's invariants builds (the race
// detector's) read the first byte of a non-nil empty bound when a pooled
// iterator copied it into a buffer of its own, and panic.
func iterBounds(lower, upper []byte) *pebble.IterOptions {
	if len(lower) == 0 {
		lower = nil
	}
	return &pebble.IterOptions{LowerBound: lower, UpperBound: upper}
}

// scan drives it to the end (or until fn says stop) and closes it.
func scan(it *pebble.Iterator, reverse bool, fn func(k, v []byte) bool) error {
	valid, step := it.First, it.Next
	if reverse {
		valid, step = it.Last, it.Prev
	}
	var ferr error
	for ok := valid(); ok; ok = step() {
		v, err := it.ValueAndErr()
		if err != nil {
			ferr = err
			break
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	if err := errors.Join(ferr, it.Close()); err != nil {
		return fmt.Errorf("persistence: scan: %w", err)
	}
	return nil
}

// pebbleLogger routes Pebble's log lines to slog so the server never prints
// Pebble's chatter on stdout.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Warn(fmt.Sprintf(format, args...))
}

// Fatalf is only called on corruption or broken invariants, after which
// Pebble must not continue; panicking (instead of Pebble's default os.Exit)
// still stops it but leaves the decision and a stack trace to the process.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic("persistence: pebble fatal: " + msg)
}

// Snapshot is a read-only view of the store at one moment: later commits
// are not seen by it. Its reads skip the read check (SetReadCheck): its
// taker decides which partitions it reads.
type Snapshot struct{ snap *pebble.Snapshot }

// NewSnapshot takes a snapshot of everything committed so far. It must be
// closed: until then Pebble keeps every version it sees.
func (s *Store) NewSnapshot() *Snapshot { return &Snapshot{snap: s.db.NewSnapshot()} }

// Scan is Store.Scan on the snapshot.
func (sn *Snapshot) Scan(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	it, err := sn.snap.NewIter(iterBounds(lower, upper))
	if err != nil {
		return fmt.Errorf("persistence: scan: %w", err)
	}
	return scan(it, reverse, fn)
}

// Close releases the snapshot.
func (sn *Snapshot) Close() error {
	if err := sn.snap.Close(); err != nil {
		return fmt.Errorf("persistence: close snapshot: %w", err)
	}
	return nil
}
