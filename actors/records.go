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

// The reads of records of other partitions: index entries, credentials,
// locators. A node holds replicas of partitions it does not lead, which
// may lag their leader by a moment, so a record written through another
// node just before may not be here yet. Finding a stale record is safe
// (an index entry is a pointer its owner checks; an ended credential is
// also told to every node, Authenticator.ended); finding nothing is not,
// so a miss catches up with the partition's leader and reads again.

// loadIndex is load of another partition's record.
func (e *Env) loadIndex(k []byte, m proto.Message) (bool, error) {
	found, err := load(e.Store, k, m)
	if found || err != nil {
		return found, err
	}
	if again, err := e.catchUp(k); !again || err != nil {
		return false, err
	}
	return load(e.Store, k, m)
}

// getIndex is Store.Get of another partition's record.
func (e *Env) getIndex(k []byte) ([]byte, error) {
	v, err := e.Store.Get(k)
	if !errors.Is(err, persistence.ErrNotFound) {
		return v, err
	}
	if again, cerr := e.catchUp(k); !again || cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return e.Store.Get(k)
}

// hasIndex is Store.Has of another partition's record.
func (e *Env) hasIndex(k []byte) (bool, error) {
	found, err := e.Store.Has(k)
	if found || err != nil {
		return found, err
	}
	if again, err := e.catchUp(k); !again || err != nil {
		return false, err
	}
	return e.Store.Has(k)
}

// catchUp catches up with the leader of k's partition and reports whether
// a second read may find more; a node alone never needs one. It fails
// (unavailable) when the leader cannot be asked: a miss then proves
// nothing.
func (e *Env) catchUp(k []byte) (again bool, err error) {
	if e.Reads == nil {
		return false, nil
	}
	p, ok := PartitionOfKey(k)
	if !ok {
		return false, nil
	}
	if err := e.Reads.CatchUp(p); err != nil {
		return false, err
	}
	return true, nil
}

// put adds the record to the batch.
func put(b batch, k []byte, m proto.Message) { b.Set(k, marshal(m)) }

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
