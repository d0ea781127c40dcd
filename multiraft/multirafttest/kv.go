package multirafttest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// KV is a state machine that records every applied entry of a group at
// kv/<group>/<index>: applying an entry twice writes the same record, as
// the replication package demands.
type KV struct {
	Store *persistence.Store
}

func kvPrefix(g multiraft.GroupID) []byte {
	return binary.BigEndian.AppendUint16([]byte("kv/"), uint16(g))
}

func kvKey(g multiraft.GroupID, index uint64) []byte {
	return persistence.AppendUint64(append(kvPrefix(g), '/'), index)
}

// Apply records data at its index.
func (kv KV) Apply(g multiraft.GroupID, index uint64, data []byte, b *persistence.Batch) error {
	b.Set(kvKey(g, index), data)
	return nil
}

// Snapshot writes every record of g as (key length, key, value length,
// value) frames, from one scan.
func (kv KV) Snapshot(g multiraft.GroupID, w io.Writer) error {
	bw := bufio.NewWriter(w)
	var werr error
	p := kvPrefix(g)
	err := kv.Store.Scan(p, persistence.PrefixEnd(p), false, func(k, v []byte) bool {
		for _, s := range [][]byte{k, v} {
			bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
			if _, werr = bw.Write(s); werr != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	return bw.Flush()
}

// Restore replaces g's records with those of a snapshot.
func (kv KV) Restore(g multiraft.GroupID, r io.Reader, b *persistence.Batch) error {
	p := kvPrefix(g)
	b.DeleteRange(p, persistence.PrefixEnd(p))
	br := bufio.NewReader(r)
	for {
		k, err := readFrame(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := readFrame(br)
		if err != nil {
			return fmt.Errorf("kv: truncated snapshot: %w", err)
		}
		b.Set(k, v)
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Records returns g's records: index → data.
func (kv KV) Records(g multiraft.GroupID) (map[uint64]string, error) {
	out := make(map[uint64]string)
	p := append(kvPrefix(g), '/')
	err := kv.Store.Scan(p, persistence.PrefixEnd(p), false, func(k, v []byte) bool {
		out[binary.BigEndian.Uint64(k[len(p):])] = string(v)
		return true
	})
	return out, err
}
