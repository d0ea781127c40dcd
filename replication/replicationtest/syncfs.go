package replicationtest

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncCountingFS counts the syncs of Pebble's WAL files (*.log): the
// fsyncs a commit waits for.
type SyncCountingFS struct {
	vfs.FS
	syncs atomic.Uint64
}

// WALSyncs returns the WAL syncs so far.
func (fs *SyncCountingFS) WALSyncs() uint64 { return fs.syncs.Load() }

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
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &countingFile{File: f, n: &fs.syncs}, nil
}

type countingFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f *countingFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f *countingFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f *countingFile) SyncTo(length int64) (bool, error) {
	f.n.Add(1)
	return f.File.SyncTo(length)
}
