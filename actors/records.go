package actors

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
)

// Records: each entity an actor owns is one protobuf value under its key
// (keys.go), read and written whole.

// getter is what load needs: the store, for an actor's own partition, or
// a PartitionReader.
type getter interface {
	Get(k []byte) ([]byte, error)
}

// load reads the record at k into m; found is false when it is absent.
// loadExisting is load of a record a request names: a missing one is the
// 404 of what (kiterr.Absent), a storage error says which key failed.
func loadExisting(r getter, k []byte, m proto.Message, what string) error {
	found, err := load(r, k, m)
	if err != nil {
		return fmt.Errorf("load %s %q: %w", what, k, err)
	}
	if !found {
		return kiterr.Absent(what)
	}
	return nil
}

func load(r getter, k []byte, m proto.Message) (found bool, err error) {
	v, err := r.Get(k)
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
// locators, a workspace's sessions read by an installation. They go
// through the reader of the key's partition (Env.Partition), which reads
// this node's replica, catching up with the leader on a miss, or asks a
// node that holds the partition. Finding a stale record is safe (an index
// entry is a pointer its owner checks; an ended credential is also told
// to every node, Authenticator.ended); finding nothing where another node
// just wrote is not, which the catch-up prevents.

// loadIndex is load of another partition's record.
func (e *Env) loadIndex(k []byte, m proto.Message) (bool, error) {
	return load(e.partitionOf(k), k, m)
}

// loadOwn is loadIndex of a record of another partition that the actor
// is about to change (a credential it spends, rotates, revokes or
// touches), after this node's replica of that partition has caught up
// with its leader. The actor's last write of the record was applied by
// the leader, which may be elsewhere and ahead of the replica here: a
// change made on the replica's copy would undo it (a code exchanged
// twice, a revocation written back as live by a touch).
func (e *Env) loadOwn(k []byte, m proto.Message) (bool, error) {
	if err := e.catchUpFor(k); err != nil {
		return false, err
	}
	return e.loadIndex(k, m)
}

// loadSwept is loadIndex for a sweep that judges a record by what never
// changes in it (a credential's kind, creation, expiry): this node's
// replica may lag, and a catch-up, a round trip, is made only where it
// says the record is not there, since a replica behind its creation says
// so too, and a record found is as good as its leader's.
func (e *Env) loadSwept(k []byte, m proto.Message) (bool, error) {
	found, err := e.loadIndex(k, m)
	if err == nil && !found {
		found, err = e.loadOwn(k, m)
	}
	return found, err
}

// getIndex is Get of another partition's record.
func (e *Env) getIndex(k []byte) ([]byte, error) { return e.partitionOf(k).Get(k) }

// hasIndex is Has of another partition's record.
func (e *Env) hasIndex(k []byte) (bool, error) { return e.partitionOf(k).Has(k) }

// scanIndex is Scan of [lower, upper) of another partition, lower's.
func (e *Env) scanIndex(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	return e.partitionOf(lower).Scan(lower, upper, reverse, fn)
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
func scanRecords(store PartitionReader, prefix []byte, fresh func() proto.Message, visit func(proto.Message)) error {
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
