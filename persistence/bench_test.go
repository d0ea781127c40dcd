package persistence

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncCountingFS counts syncs of WAL files, to show how many commits share
// one fsync.
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs syncCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return syncCountingFile{f, fs.syncs}, nil
}

func (fs syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs syncCountingFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	return fs.wrap(name, f, err)
}

type syncCountingFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f syncCountingFile) Sync() error     { f.syncs.Add(1); return f.File.Sync() }
func (f syncCountingFile) SyncData() error { f.syncs.Add(1); return f.File.SyncData() }
func (f syncCountingFile) SyncTo(n int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(n)
}

// benchCommit commits b.N single-event batches on the real disk and reports
// WAL syncs per commit: below 1 means commits shared syncs.
func benchCommit(b *testing.B, parallel bool) {
	var syncs atomic.Int64
	s, err := Open(b.TempDir(), Options{FS: syncCountingFS{vfs.Default, &syncs}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Uint64
	event := make([]byte, 256)
	one := func() {
		seq := next.Add(1)
		batch := s.NewBatch()
		batch.Set(AppendUint64([]byte("bench/"), seq), event)
		if err := batch.Commit(); err != nil {
			b.Error(err)
		}
	}

	b.ResetTimer()
	syncs.Store(0)
	if parallel {
		// ~64 committers whatever GOMAXPROCS is, like 64 busy actors.
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	} else {
		for range b.N {
			one()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "syncs/op")
}

func BenchmarkCommitSerial(b *testing.B)   { benchCommit(b, false) }
func BenchmarkCommitParallel(b *testing.B) { benchCommit(b, true) }
