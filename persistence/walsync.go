package persistence

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walSyncFS hands out Pebble's WAL files (NNNNNN.log) with a SyncData that
// calls fdatasync without releasing the goroutine's P (walsync_linux.go says
// why). Every other file is the inner filesystem's own.
type walSyncFS struct {
	vfs.FS
	syncs atomic.Uint64 // WAL syncs issued through rawSyncData
}

func (fs *walSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *walSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs *walSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *walSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &walFile{File: f, fd: f.Fd(), fs: fs}, nil
}

// walFile is a WAL file whose data syncs go through rawSyncData. Sync (a
// full fsync, at rotation and close) stays the inner file's.
type walFile struct {
	vfs.File
	fd uintptr
	fs *walSyncFS
}

func (f *walFile) SyncData() error {
	f.fs.syncs.Add(1)
	return rawSyncData(f.fd)
}
