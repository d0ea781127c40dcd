package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// Records is the multiraft.StateMachine of kitd's records.
type Records struct {
	Store *persistence.Store
	// CurrentKey is Config.CurrentKey; nil: every key as it is.
	CurrentKey func(key []byte) []byte
}

// current is the key this build stores k under.
func (r Records) current(k []byte) []byte {
	if r.CurrentKey == nil {
		return k
	}
	return r.CurrentKey(k)
}

var _ multiraft.StateMachine = Records{}

// errOutsidePartition reports a write of an entry or a snapshot outside
// its group's partition: a bug, so it stops the node rather than spread.
var errOutsidePartition = errors.New("replica: write outside its group's partition")

// Apply writes the entry's writes. Set, Delete and DeleteRange of the same
// keys give the same records when applied again, which a restart asks of
// it (multiraft.StateMachine).
func (r Records) Apply(g multiraft.GroupID, index uint64, data []byte, b *persistence.Batch) error {
	if len(data) == 0 {
		return nil // a leader's barrier (Start)
	}
	err := persistence.Ops(data, func(op persistence.Op) error {
		if p, ok := partition.OfKey(op.Key); !ok || p != partition.ID(g) {
			return fmt.Errorf("%w: entry %d of group %d", errOutsidePartition, index, g)
		}
		if op.Kind != persistence.OpDeleteRange {
			op.Key = r.current(op.Key)
		}
		b.Add(op)
		return nil
	})
	if err != nil {
		return fmt.Errorf("replica: apply entry %d of group %d: %w", index, g, err)
	}
	return nil
}

// A snapshot is the partition's records in key order, each as a uvarint
// length and the key, then a uvarint length and the value.

// Snapshot writes partition g's records.
func (r Records) Snapshot(g multiraft.GroupID, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	lower, upper := partition.KeyRange(partition.ID(g))
	var werr error
	var n [binary.MaxVarintLen64]byte
	err := r.Store.Scan(lower, upper, false, func(k, v []byte) bool {
		for _, part := range [][]byte{k, v} {
			bw.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
			if _, werr = bw.Write(part); werr != nil {
				return false
			}
		}
		return true
	})
	if err = errors.Join(err, werr); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("replica: snapshot of group %d: %w", g, err)
	}
	return nil
}

// maxSnapshotField bounds one key or value of a snapshot: a record is far
// smaller (a file chunk is the largest), so a larger length is corruption.
const maxSnapshotField = 16 << 20

// Restore replaces partition g's records with a snapshot's.
func (r Records) Restore(g multiraft.GroupID, rd io.Reader, b *persistence.Batch) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	lower, upper := partition.KeyRange(partition.ID(g))
	b.DeleteRange(lower, upper)
	for {
		k, err := readField(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replica: restore group %d: %w", g, err)
		}
		v, err := readField(br)
		if err != nil {
			return fmt.Errorf("replica: restore group %d: %w", g, noEOF(err))
		}
		if p, ok := partition.OfKey(k); !ok || p != partition.ID(g) {
			return fmt.Errorf("replica: restore group %d: %w", g, errOutsidePartition)
		}
		b.Set(r.current(k), v)
	}
}

// readField reads one length-prefixed field; io.EOF only before its first
// byte.
func readField(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > maxSnapshotField {
		return nil, fmt.Errorf("field of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, noEOF(err)
	}
	return buf, nil
}

// noEOF turns an end of stream inside a record into the error it is.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
