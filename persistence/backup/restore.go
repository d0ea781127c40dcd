package backup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kitd/kitd/persistence"
)

// ErrNotEmpty refuses a restore into a directory that holds anything.
var ErrNotEmpty = errors.New("backup: the data directory is not empty: restore only into a new or empty one")

// restoreBatch bounds the records one batch of a restore holds.
const restoreBatch = 4 << 20

// Restore makes the data directory dir from the backup read from r. dir
// must be missing or empty, or a symbolic link to an empty directory. The backup is restored into a directory beside
// dir, which replaces dir only once the whole file was read and its
// trailer matched: a file cut short or altered leaves dir as it was, and
// nothing beside it. check, if not nil, may refuse the backup by its
// header before anything is written.
func Restore(r io.Reader, dir string, check func(Header) error) (Summary, error) {
	dir = filepath.Clean(dir)
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		// A link to a data directory on a volume of its own: the restore
		// goes where it leads, built beside it on that volume, and the
		// link stays. Replacing the link would leave the volume empty.
		target, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return Summary{}, fmt.Errorf("backup: %s is a link that leads nowhere: %w", dir, err)
		}
		dir = target
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return Summary{}, fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	existed := err == nil
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restoring-")
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	s, err := restoreInto(r, tmp, check)
	if err == nil {
		// The key files' names, as their contents, must be on disk before
		// the directory takes its name: a crash after the rename would
		// leave a store without its keys.
		err = syncDir(tmp)
	}
	if err == nil && existed {
		// The empty directory goes first (os.Rename replaces no
		// directory). One that cannot go is a mount point, most likely:
		// the restore cannot cross into it whole.
		if err = os.Remove(dir); err != nil {
			err = fmt.Errorf("backup: %s cannot be replaced (a mount point?): restore into a new directory beneath it and serve that: %w", dir, err)
		}
	}
	if err == nil {
		if err = os.Rename(tmp, dir); err != nil && existed {
			_ = os.Mkdir(dir, 0o755) // as it was
		}
	}
	if err != nil {
		return s, errors.Join(err, os.RemoveAll(tmp))
	}
	if err := syncDir(parent); err != nil {
		return s, fmt.Errorf("backup: restored into %s, but its name may not be on disk yet: %w", dir, err)
	}
	return s, nil
}

// restoreInto writes the backup's records and files into dir, a new
// directory.
func restoreInto(r io.Reader, dir string, check func(Header) error) (s Summary, err error) {
	store, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		return s, err
	}
	defer func() {
		if cerr := store.Close(); err == nil {
			err = cerr
		}
	}()
	b, size := store.NewBatchSize(restoreBatch), 0
	s, err = Read(r, Visitor{
		Header: check,
		File: func(name string, data []byte) error {
			return writeFile(filepath.Join(dir, name), data)
		},
		Record: func(k, v []byte) error {
			b.Set(k, v)
			if size += len(k) + len(v); size < restoreBatch {
				return nil
			}
			// Unsynced: the directory is not in use until the sync below
			// and the rename.
			err := b.Write()
			b, size = store.NewBatchSize(restoreBatch), 0
			return err
		},
	})
	if err != nil {
		b.Close()
		return s, err
	}
	if err := b.Write(); err != nil {
		return s, err
	}
	return s, store.Sync()
}

// writeFile writes a file of the data directory, readable by its owner
// alone (the secret key), and syncs it.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// syncDir makes the names of dir's entries (a rename within it, a file
// created in it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
