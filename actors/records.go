package actors

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/persistence"
)

// Records: each entity an actor owns is one protobuf value under its key
// (keys.go), read and written whole.

// load reads the record at k into m; found is false when it is absent.
func load(store *persistence.Store, k []byte, m proto.Message) (found bool, err error) {
	v, err := store.Get(k)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("decode %q: %w", k, err)
	}
	return true, nil
}

// setter is a batch: an actor's, or the store's own during an upgrade.
type setter interface{ Set(key, value []byte) }

// put adds the record to the batch.
func put(b setter, k []byte, m proto.Message) { b.Set(k, marshal(m)) }

// marshal encodes a record.
func marshal(m proto.Message) []byte {
	v, err := proto.Marshal(m)
	if err != nil {
		// Marshalling a well-formed generated message cannot fail.
		panic(fmt.Sprintf("actors: marshal %T: %v", m, err))
	}
	return v
}

// scanRecords decodes every record under prefix.
func scanRecords(store *persistence.Store, prefix []byte, fresh func() proto.Message, visit func(proto.Message)) error {
	var decodeErr error
	err := store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
		m := fresh()
		if decodeErr = proto.Unmarshal(v, m); decodeErr != nil {
			return false
		}
		visit(m)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return err
}

// nanos is the stored form of a time.
func nanos(t time.Time) int64 { return t.UnixNano() }
