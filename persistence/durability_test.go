package persistence

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// crash opens a store on a crashable in-memory FS, runs write, then returns
// the FS as a power cut would leave it: exactly the synced data.
func crash(t *testing.T, write func(s *Store)) vfs.FS {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	write(s)
	// Clone before Close: Close may flush memtables, which a crash would not.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return crashed
}

func reopen(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// commitNoSync commits like Commit but without the WAL sync, to show the
// crash simulation does catch a missing sync.
func commitNoSync(t *testing.T, b *Batch) {
	t.Helper()
	if err := b.b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	b.b.Close()
	b.b = nil
}

func TestCommitSurvivesCrash(t *testing.T) {
	fs := crash(t, func(s *Store) {
		b := s.NewBatch()
		b.Set([]byte("k"), []byte("v"))
		b.Set([]byte("k2"), []byte("v2"))
		commit(t, b)
	})
	s := reopen(t, fs)
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after crash Get(k) = %q, %v", v, err)
	}
	if v, err := s.Get([]byte("k2")); err != nil || string(v) != "v2" {
		t.Fatalf("after crash Get(k2) = %q, %v", v, err)
	}
}

func TestUnsyncedWriteLostInCrash(t *testing.T) {
	fs := crash(t, func(s *Store) {
		b := s.NewBatch()
		b.Set([]byte("synced"), []byte("1"))
		commit(t, b)
		b = s.NewBatch()
		b.Set([]byte("unsynced"), []byte("1"))
		commitNoSync(t, b)
		// Visible before the crash...
		if _, err := s.Get([]byte("unsynced")); err != nil {
			t.Fatal(err)
		}
	})
	s := reopen(t, fs)
	if _, err := s.Get([]byte("synced")); err != nil {
		t.Fatalf("synced write lost: %v", err)
	}
	// ...gone after it: so TestCommitSurvivesCrash would fail if Commit
	// did not sync.
	if _, err := s.Get([]byte("unsynced")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unsynced write survived the crash (err %v): the simulation proves nothing", err)
	}
}

// TestConcurrentCommits has 64 goroutines, each standing for an actor,
// commit concurrently on the real disk; every write must land.
func TestConcurrentCommits(t *testing.T) {
	const actors, perActor = 64, 20
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var wg sync.WaitGroup
	errs := make(chan error, actors*perActor)
	for a := range actors {
		wg.Go(func() {
			for seq := uint64(1); seq <= perActor; seq++ {
				b := s.NewBatch()
				b.Set(fmt.Appendf(nil, "r/%02d/%02d", a, seq), fmt.Appendf(nil, "%d-%d", a, seq))
				if err := b.Commit(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	n := 0
	if err := s.Scan([]byte("r/"), PrefixEnd([]byte("r/")), false, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != actors*perActor {
		t.Fatalf("found %d records, want %d", n, actors*perActor)
	}
}
