package actors

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"sync"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Reads of a partition's records, wherever they are (docs/cluster.md,
// "Reads of other partitions").
//
// An actor reads its own partition's records straight from Env.Store: it
// runs on the partition's leader, which holds every committed write. Every
// other read, the front end's and an actor's of another partition's
// record, goes through Env.Partition: this node's replica when it holds
// one (with a catch-up on a miss, as a replica may lag its leader), else a
// node that holds it, asked over the network. The table of docs/cluster.md
// lists every read site and whose partition it reads.

// PartitionReader reads the records of one partition.
type PartitionReader interface {
	// Get is persistence.ErrNotFound when k is absent.
	Get(k []byte) ([]byte, error)
	Has(k []byte) (bool, error)
	// Scan calls fn with the records in [lower, upper), in key order or
	// reversed, until fn returns false. k and v are valid during the call.
	Scan(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error
}

// RemoteReader reads partitions this node holds no replica of
// (server/clusternode asks a node that does).
type RemoteReader interface {
	// Holds reports whether this node has a replica of p.
	Holds(p partition.ID) bool
	// ReadRecords answers q from a replica of q's partition caught up with
	// its leader; a reply holds at most a bounded number of bytes and says
	// whether more follow (kitpb.Records).
	ReadRecords(q *kitpb.ReadRecords) (*kitpb.Records, error)
}

var _ PartitionReader = (*persistence.Store)(nil)

// Partition is the reader of partition p's records. A node alone holds
// every partition up to date and reads its store, without a cost.
func (e *Env) Partition(p partition.ID) PartitionReader {
	if e.Reads == nil && e.Remote == nil {
		return e.Store
	}
	e.readers.once.Do(func() {
		e.readers.all = new([partition.Count]partitionReader)
		for i := range e.readers.all {
			e.readers.all[i] = partitionReader{env: e, p: partition.ID(i)}
		}
	})
	return &e.readers.all[p]
}

// everyPartition is a reader of each partition for a read of all of them
// (a delivery actor's outbox, a Kit's developer log). The replicas held
// here are caught up with their leaders first, all at once, and then read
// from the store: each one's Scan had waited for its own round trip to its
// leader, about forty in turn on three nodes. The others are read remotely,
// where the node that answers catches up.
func (e *Env) everyPartition() (*[partition.Count]PartitionReader, error) {
	var readers [partition.Count]PartitionReader
	var errs [partition.Count]error
	var wg sync.WaitGroup
	for p := range partition.ID(partition.Count) {
		readers[p] = e.Partition(p)
		if r, ok := readers[p].(*partitionReader); !ok || !r.local() {
			continue // the store of a node alone, or a remote read
		}
		readers[p] = e.Store
		if e.Reads != nil {
			wg.Go(func() { errs[p] = e.Reads.CatchUp(p) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &readers, nil
}

// partitionOf is the reader of the partition whose range holds k; a key
// outside every partition reads the store (no partition holds it, so
// every node has its own).
func (e *Env) partitionOf(k []byte) PartitionReader {
	p, ok := partition.OfKey(k)
	if !ok {
		return e.Store
	}
	return e.Partition(p)
}

// partitionReaders are the Env's partition readers, made once
// (Env.Partition), so that asking for one allocates nothing.
type partitionReaders struct {
	once sync.Once
	all  *[partition.Count]partitionReader
}

// partitionReader reads partition p for a node in a cluster.
type partitionReader struct {
	env *Env
	p   partition.ID
}

// ReadPageBytes bounds the records of one answer to a remote read; a
// record larger than it comes alone.
const ReadPageBytes = 1 << 20

// firstRemotePage is how many records the first page of a remote scan
// asks for; each next page asks twice as many. Many scans stop after a
// few records (a delivery actor taking a conversation's share of its
// outbox, a page of a listing), and a first page of ReadPageBytes had
// shipped up to a MiB for them.
const firstRemotePage = 64

func (r *partitionReader) local() bool { return r.env.Remote == nil || r.env.Remote.Holds(r.p) }

// within refuses a key of another partition: a caller's bug, which
// reading the wrong replica would hide.
func (r *partitionReader) within(k []byte) error {
	if p, ok := partition.OfKey(k); !ok || p != r.p {
		return fmt.Errorf("actors: key %q read as partition %d's", k, r.p)
	}
	return nil
}

func (r *partitionReader) Get(k []byte) ([]byte, error) {
	if err := r.within(k); err != nil {
		return nil, err
	}
	if !r.local() {
		return r.remoteGet(k)
	}
	v, err := r.env.Store.Get(k)
	if !errors.Is(err, persistence.ErrNotFound) {
		return v, err
	}
	if again, cerr := r.catchUp(); !again || cerr != nil {
		return nil, cmp.Or(cerr, err) // a miss before a failed catch-up proves nothing
	}
	return r.env.Store.Get(k)
}

func (r *partitionReader) Has(k []byte) (bool, error) {
	if err := r.within(k); err != nil {
		return false, err
	}
	if !r.local() {
		_, err := r.remoteGet(k)
		if errors.Is(err, persistence.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	found, err := r.env.Store.Has(k)
	if found || err != nil {
		return found, err
	}
	if again, err := r.catchUp(); !again || err != nil {
		return false, err
	}
	return r.env.Store.Has(k)
}

// Scan of a replica held here catches it up with the leader first (at
// once on the leader under its lease): a follower may be a moment
// behind, and a learner being filled may hold nothing yet, and a listing
// cannot tell a miss.
func (r *partitionReader) Scan(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	if err := r.within(lower); err != nil {
		return err
	}
	if upper != nil && bytes.Compare(upper, PartitionEnd(r.p)) > 0 {
		return fmt.Errorf("actors: scan to %q past partition %d", upper, r.p)
	}
	if r.local() {
		if _, err := r.catchUp(); err != nil {
			return err
		}
		return r.env.Store.Scan(lower, upper, reverse, fn)
	}
	if upper == nil {
		upper = PartitionEnd(r.p)
	}
	for limit := firstRemotePage; ; limit = min(2*limit, ReadPageBytes) {
		recs, err := r.env.Remote.ReadRecords(&kitpb.ReadRecords{
			Partition: uint32(r.p), Lower: lower, Upper: upper, Reverse: reverse, Limit: uint32(limit),
		})
		if err != nil {
			return err
		}
		if len(recs.Keys) != len(recs.Values) {
			return fmt.Errorf("actors: remote scan of partition %d: %d keys, %d values", r.p, len(recs.Keys), len(recs.Values))
		}
		for i, k := range recs.Keys {
			if !fn(k, recs.Values[i]) {
				return nil
			}
		}
		if !recs.More || len(recs.Keys) == 0 {
			return nil
		}
		last := recs.Keys[len(recs.Keys)-1]
		if reverse {
			upper = last
		} else {
			lower = keyAfter(bytes.Clone(last))
		}
	}
}

func (r *partitionReader) remoteGet(k []byte) ([]byte, error) {
	recs, err := r.env.Remote.ReadRecords(&kitpb.ReadRecords{Partition: uint32(r.p), Keys: [][]byte{k}})
	if err != nil {
		return nil, err
	}
	for i, rk := range recs.Keys {
		if bytes.Equal(rk, k) && i < len(recs.Values) {
			return recs.Values[i], nil
		}
	}
	return nil, persistence.ErrNotFound
}

// catchUp catches this node's replica of the partition up with its
// leader (a record written through another node a moment ago may not be
// here yet) and reports whether a second read may find more. It fails
// (unavailable) when the leader cannot be asked.
func (r *partitionReader) catchUp() (again bool, err error) {
	if r.env.Reads == nil {
		return false, nil
	}
	return true, r.env.Reads.CatchUp(r.p)
}

// catchUpFor catches this node's replica of k's partition up with its
// leader, for a record that changed a moment ago; a remote read needs
// none (the node that answers catches up first).
func (e *Env) catchUpFor(k []byte) error {
	if !e.mayLag(k) {
		return nil
	}
	p, _ := partition.OfKey(k)
	return e.Reads.CatchUp(p)
}

// mayLag reports whether a read of k's partition reads a replica here that
// may lag its leader: in a cluster, one this node holds.
func (e *Env) mayLag(k []byte) bool {
	p, ok := partition.OfKey(k)
	return ok && e.Reads != nil && (e.Remote == nil || e.Remote.Holds(p))
}

// PartitionEnd is the end of partition p's range (partition.KeyRange).
func PartitionEnd(p partition.ID) []byte {
	_, upper := partition.KeyRange(p)
	return upper
}

// CheckReadRecords refuses a request that names no partition, a key or a
// bound outside its partition, both keys and a range, or more keys than
// a page: what a member must never read (ServeReadRecords).
func CheckReadRecords(q *kitpb.ReadRecords) error {
	if q.Partition >= partition.Count {
		return kiterr.Invalid("partition", "no such partition")
	}
	lo, hi := partition.KeyRange(partition.ID(q.Partition))
	in := func(k []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }
	if len(q.Keys) > 0 {
		if len(q.Lower) > 0 || len(q.Upper) > 0 || q.Reverse || q.Limit > 0 {
			return kiterr.Invalid("keys", "keys and a range")
		}
		size := 0
		for _, k := range q.Keys {
			if !in(k) {
				return kiterr.Invalid("keys", "a key outside the partition")
			}
			size += len(k)
		}
		if size > ReadPageBytes {
			return kiterr.Invalid("keys", "more keys than a page")
		}
		return nil
	}
	if !in(q.Lower) {
		return kiterr.Invalid("lower", "a bound outside the partition")
	}
	if !in(q.Upper) && !bytes.Equal(q.Upper, hi) || bytes.Compare(q.Lower, q.Upper) > 0 {
		return kiterr.Invalid("upper", "a bound outside the partition")
	}
	return nil
}

// ServeReadRecords answers q (checked by CheckReadRecords) from store,
// which holds a replica of q's partition caught up by the caller: the
// other end of RemoteReader.ReadRecords. A page holds at most
// ReadPageBytes of records (at least one) and limit records.
func ServeReadRecords(store *persistence.Store, q *kitpb.ReadRecords) (*kitpb.Records, error) {
	if err := CheckReadRecords(q); err != nil {
		return nil, err
	}
	out := &kitpb.Records{}
	if len(q.Keys) > 0 {
		for _, k := range q.Keys {
			v, err := store.Get(k)
			if errors.Is(err, persistence.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out.Keys, out.Values = append(out.Keys, k), append(out.Values, v)
		}
		return out, nil
	}
	err := store.Scan(q.Lower, q.Upper, q.Reverse, PageOf(out, int(q.Limit)))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PageOf returns a scan callback that copies records into out as one page
// of a read: at most limit of them (0: any number) and ReadPageBytes of
// keys and values, but always the first; out.More says it stopped early.
func PageOf(out *kitpb.Records, limit int) func(k, v []byte) bool {
	size := 0
	return func(k, v []byte) bool {
		if limit > 0 && len(out.Keys) == limit || len(out.Keys) > 0 && size+len(k)+len(v) > ReadPageBytes {
			out.More = true
			return false
		}
		size += len(k) + len(v)
		out.Keys = append(out.Keys, bytes.Clone(k))
		out.Values = append(out.Values, bytes.Clone(v))
		return true
	}
}
