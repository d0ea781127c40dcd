package multirafttest

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncCountingFS counts the syncs of Pebble's WAL files and of the raft
// log's segments (both *.log): the fsyncs a commit waits for. With
// SyncDelay, each takes that long, as on a disk, so that a crash can find
// syncs in flight. Between Block and Unblock, every sync waits.
type SyncCountingFS struct {
	vfs.FS
	SyncDelay time.Duration
	// Except, when set, leaves out the files whose path holds it: neither
	// counted nor delayed nor blocked (the raft log's directory, to count
	// Pebble's WAL alone).
	Except  string
	syncs   atomic.Uint64
	waiting atomic.Int64
	gate    atomic.Pointer[chan struct{}]
}

// WALSyncs returns the WAL syncs so far.
func (fs *SyncCountingFS) WALSyncs() uint64 { return fs.syncs.Load() }

// Block makes every sync from now on wait for Unblock: a disk that does
// not answer.
func (fs *SyncCountingFS) Block() {
	gate := make(chan struct{})
	fs.gate.Store(&gate)
}

// Waiting returns how many syncs wait for Unblock or Release.
func (fs *SyncCountingFS) Waiting() int64 { return fs.waiting.Load() }

// Release lets the waiting syncs go and holds every later one.
func (fs *SyncCountingFS) Release() {
	gate := make(chan struct{})
	if old := fs.gate.Swap(&gate); old != nil {
		close(*old)
	}
}

// Unblock lets the waiting syncs and every later one go.
func (fs *SyncCountingFS) Unblock() {
	if gate := fs.gate.Swap(nil); gate != nil {
		close(*gate)
	}
}

func (fs *SyncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *SyncCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs *SyncCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *SyncCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") || fs.Except != "" && strings.Contains(name, fs.Except) {
		return f, err
	}
	return &countingFile{File: f, fs: fs}, nil
}

type countingFile struct {
	vfs.File
	fs *SyncCountingFS
}

func (f *countingFile) synced() {
	if gate := f.fs.gate.Load(); gate != nil {
		f.fs.waiting.Add(1)
		<-*gate
		f.fs.waiting.Add(-1)
	}
	f.fs.syncs.Add(1)
	if f.fs.SyncDelay > 0 {
		time.Sleep(f.fs.SyncDelay) // the disk's latency, before the data is synced
	}
}

func (f *countingFile) Sync() error     { f.synced(); return f.File.Sync() }
func (f *countingFile) SyncData() error { f.synced(); return f.File.SyncData() }
func (f *countingFile) SyncTo(length int64) (bool, error) {
	f.synced()
	return f.File.SyncTo(length)
}
