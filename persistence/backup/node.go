package backup

import (
	"io"

	"github.com/kitd/kitd/persistence"
)

// File is a file of the data directory that travels with its records.
type File struct {
	Name string
	Data []byte
}

// Node writes to out a backup of a node alone: files, then every record of
// one snapshot of store, so everything committed before the call and
// nothing of a commit that overlaps it only in part. Records skip says
// must not travel (the raft state of --replicate) are left out.
func Node(out io.Writer, store *persistence.Store, h Header, files []File, skip func(k []byte) bool) error {
	snap := store.NewSnapshot()
	defer snap.Close()
	h.Source = SourceNode
	w, err := NewWriter(out, h)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := w.File(f.Name, f.Data); err != nil {
			return err
		}
	}
	var werr error
	err = snap.Scan(nil, nil, false, func(k, v []byte) bool {
		if skip != nil && skip(k) {
			return true
		}
		werr = w.Record(k, v)
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	return w.Close()
}
