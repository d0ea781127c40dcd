package actors_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

func memStore(t *testing.T) *persistence.Store {
	t.Helper()
	s, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recordKey is a key of partition p.
func recordKey(p partition.ID, name string) []byte {
	lower, _ := partition.KeyRange(p)
	return append(slices.Clip(lower), name...)
}

func write(t *testing.T, s *persistence.Store, kvs map[string]string, p partition.ID) {
	t.Helper()
	b := s.NewBatch()
	for k, v := range kvs {
		b.Set(recordKey(p, k), []byte(v))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// holder is a cluster seen from one node: the partitions it holds, and
// another node's store that holds the rest, asked as a member would.
type holder struct {
	held    map[partition.ID]bool
	remote  *persistence.Store
	calls   int
	shipped int // records answered
}

func (h *holder) Holds(p partition.ID) bool { return h.held[p] }

func (h *holder) ReadRecords(q *kitpb.ReadRecords) (*kitpb.Records, error) {
	h.calls++
	if h.held[partition.ID(q.Partition)] {
		return nil, errors.New("asked another node for a partition held here")
	}
	recs, err := actors.ServeReadRecords(h.remote, q)
	if err == nil {
		h.shipped += len(recs.Keys)
	}
	return recs, err
}

// catchUp is a replica that lags: its catch-up applies the leader's
// records of the partition.
type catchUp struct {
	from, to *persistence.Store
	err      error
	calls    int
}

func (c *catchUp) CatchUp(p partition.ID) error {
	c.calls++
	if c.err != nil {
		return c.err
	}
	lower, upper := partition.KeyRange(p)
	b := c.to.NewBatch()
	err := c.from.Scan(lower, upper, false, func(k, v []byte) bool {
		b.Set(bytes.Clone(k), bytes.Clone(v))
		return true
	})
	if err != nil {
		return err
	}
	return b.Commit()
}

type scanned struct{ keys, values []string }

func scanAll(r actors.PartitionReader, lower, upper []byte, reverse bool, stopAfter int) (scanned, error) {
	var s scanned
	err := r.Scan(lower, upper, reverse, func(k, v []byte) bool {
		s.keys, s.values = append(s.keys, string(k)), append(s.values, string(v))
		return len(s.keys) != stopAfter
	})
	return s, err
}

// A read of a partition is answered from this node's replica when it
// holds one, and by a node that holds it when it does not: the same
// answers either way, never nothing.
func TestPartitionReadsGoWhereThePartitionIs(t *testing.T) {
	const p = partition.ID(7)
	records := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	for _, held := range []bool{true, false} {
		name := map[bool]string{true: "held here", false: "held elsewhere"}[held]
		t.Run(name, func(t *testing.T) {
			local, remote := memStore(t), memStore(t)
			if held {
				write(t, local, records, p)
			} else {
				write(t, remote, records, p)
			}
			h := &holder{held: map[partition.ID]bool{p: held}, remote: remote}
			env := &actors.Env{Store: local, Remote: h}
			r := env.Partition(p)

			if v, err := r.Get(recordKey(p, "b")); err != nil || string(v) != "2" {
				t.Errorf("Get of a record = %q, %v; want 2", v, err)
			}
			if _, err := r.Get(recordKey(p, "z")); !errors.Is(err, persistence.ErrNotFound) {
				t.Errorf("Get of no record: %v; want ErrNotFound", err)
			}
			if ok, err := r.Has(recordKey(p, "c")); !ok || err != nil {
				t.Errorf("Has of a record = %v, %v", ok, err)
			}
			if ok, err := r.Has(recordKey(p, "z")); ok || err != nil {
				t.Errorf("Has of no record = %v, %v", ok, err)
			}
			lower, upper := partition.KeyRange(p)
			for _, tc := range []struct {
				name         string
				lower, upper []byte
				reverse      bool
				stopAfter    int
				want         []string
			}{
				{"in order", lower, upper, false, 0, []string{"a", "b", "c", "d"}},
				{"reversed", lower, upper, true, 0, []string{"d", "c", "b", "a"}},
				{"bounded", recordKey(p, "b"), recordKey(p, "d"), false, 0, []string{"b", "c"}},
				{"stopped by the caller", lower, upper, true, 2, []string{"d", "c"}},
			} {
				got, err := scanAll(r, tc.lower, tc.upper, tc.reverse, tc.stopAfter)
				var want []string
				for _, k := range tc.want {
					want = append(want, string(recordKey(p, k)))
				}
				if err != nil || !slices.Equal(got.keys, want) {
					t.Errorf("Scan %s = %q, %v; want %q", tc.name, got.keys, err, want)
				}
			}
			if asked := h.calls > 0; asked == held {
				t.Errorf("another node asked: %v, with the partition %s", asked, name)
			}
		})
	}
}

// A remote scan comes in pages bounded in bytes, and the reader asks for
// the next page until the range or the caller ends.
func TestRemoteScanPages(t *testing.T) {
	const p = partition.ID(3)
	local, remote := memStore(t), memStore(t)
	big := string(bytes.Repeat([]byte{'x'}, actors.ReadPageBytes/3+1))
	records := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		records[k] = k + big
	}
	write(t, remote, records, p)
	h := &holder{held: map[partition.ID]bool{}, remote: remote}
	env := &actors.Env{Store: local, Remote: h}
	lower, upper := partition.KeyRange(p)
	for _, reverse := range []bool{false, true} {
		h.calls = 0
		got, err := scanAll(env.Partition(p), lower, upper, reverse, 0)
		if err != nil || len(got.keys) != len(records) {
			t.Fatalf("reverse %v: %d records, %v; want %d", reverse, len(got.keys), err, len(records))
		}
		for i, k := range got.keys {
			if !slices.IsSorted(got.keys) && !reverse || records[k[len(k)-1:]] != got.values[i] {
				t.Errorf("reverse %v: record %d is %q, out of order or with another value", reverse, i, k)
			}
		}
		if h.calls < 3 {
			t.Errorf("reverse %v: %d pages of 1 MiB for 2.3 MiB", reverse, h.calls)
		}
	}
}

// A remote scan asks for a few records first and twice as many each page
// after: a scan that stops early does not have a MiB shipped for it, and
// one that reads everything still gets it all, in order.
func TestRemoteScanAsksForLittleFirst(t *testing.T) {
	const p = partition.ID(3)
	local, remote := memStore(t), memStore(t)
	records := map[string]string{}
	for i := range 1000 {
		records[fmt.Sprintf("k%04d", i)] = "v"
	}
	write(t, remote, records, p)
	h := &holder{held: map[partition.ID]bool{}, remote: remote}
	env := &actors.Env{Store: local, Remote: h}
	lower, upper := partition.KeyRange(p)
	n := 0
	noErr(t, env.Partition(p).Scan(lower, upper, false, func(_, _ []byte) bool { n++; return n < 10 }))
	if h.shipped > 64 {
		t.Fatalf("a scan that stopped after 10 records had %d shipped, want one page of 64 at most", h.shipped)
	}
	h.calls = 0
	got, err := scanAll(env.Partition(p), lower, upper, false, 0)
	if err != nil || len(got.keys) != len(records) || !slices.IsSorted(got.keys) {
		t.Fatalf("a whole scan: %d records, %v, in order %v; want %d in order", len(got.keys), err, slices.IsSorted(got.keys), len(records))
	}
	if h.calls > 5 {
		t.Fatalf("a whole scan of 1,000 records took %d pages, want 5 (64, 128, 256, 512, then the rest)", h.calls)
	}
}

// A replica held here that misses a record catches up with the leader
// and reads again; a catch-up that fails is an error, not "absent".
func TestHeldPartitionCatchesUpOnAMiss(t *testing.T) {
	const p = partition.ID(9)
	leader := memStore(t)
	write(t, leader, map[string]string{"new": "v"}, p)
	for _, tc := range []struct {
		name     string
		err      error
		wantV    string
		wantCode kiterr.Code
	}{
		{"a record written through another node is found", nil, "v", ""},
		{"a failed catch-up is unavailable, not a miss", kiterr.New(kiterr.Unavailable, "no leader"), "", kiterr.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := memStore(t)
			c := &catchUp{from: leader, to: local, err: tc.err}
			env := &actors.Env{Store: local, Reads: c, Remote: &holder{held: map[partition.ID]bool{p: true}}}
			v, err := env.Partition(p).Get(recordKey(p, "new"))
			if string(v) != tc.wantV || kiterr.CodeOf(err) != tc.wantCode && tc.wantCode != "" || tc.wantCode == "" && err != nil {
				t.Errorf("Get = %q, %v; want %q, code %q", v, err, tc.wantV, tc.wantCode)
			}
			if errors.Is(err, persistence.ErrNotFound) {
				t.Errorf("a failed catch-up read as absent: %v", err)
			}
			if c.calls != 1 {
				t.Errorf("%d catch-ups; want 1", c.calls)
			}
		})
	}
}

// A listing of a replica held here catches it up first: a learner being
// filled, or a follower a moment behind, cannot tell a miss.
func TestHeldPartitionCatchesUpBeforeAScan(t *testing.T) {
	const p = partition.ID(11)
	local, leader := memStore(t), memStore(t)
	write(t, leader, map[string]string{"a": "1", "b": "2"}, p)
	c := &catchUp{from: leader, to: local}
	env := &actors.Env{Store: local, Reads: c, Remote: &holder{held: map[partition.ID]bool{p: true}}}
	lower, upper := partition.KeyRange(p)
	got, err := scanAll(env.Partition(p), lower, upper, false, 0)
	if err != nil || len(got.keys) != 2 {
		t.Errorf("Scan = %q, %v; want the leader's 2 records", got.keys, err)
	}
	c.err = kiterr.New(kiterr.Unavailable, "no leader")
	if _, err := scanAll(env.Partition(p), lower, upper, false, 0); kiterr.CodeOf(err) != kiterr.Unavailable {
		t.Errorf("Scan after a failed catch-up: %v; want unavailable", err)
	}
}

// A reader reads its own partition only: a key of another is a caller's
// bug, refused rather than read from the wrong replica.
func TestPartitionReaderRefusesAnotherPartitionsKeys(t *testing.T) {
	s := memStore(t)
	write(t, s, map[string]string{"k": "v"}, 2)
	env := &actors.Env{Store: s, Remote: &holder{held: map[partition.ID]bool{1: true, 2: true}}}
	r := env.Partition(1)
	other := recordKey(2, "k")
	if _, err := r.Get(other); err == nil || errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Get of another partition's key: %v", err)
	}
	if ok, err := r.Has(other); ok || err == nil {
		t.Error("Has of another partition's key: no error")
	}
	lower, _ := partition.KeyRange(1)
	if err := r.Scan(lower, actors.PartitionEnd(2), false, func(_, _ []byte) bool { return true }); err == nil {
		t.Error("Scan past the partition: no error")
	}
	lower2, upper2 := partition.KeyRange(2)
	if err := r.Scan(lower2, upper2, false, func(_, _ []byte) bool { return true }); err == nil {
		t.Error("Scan of another partition: no error")
	}
}

// What a member refuses to read for another: never a panic, never a read
// outside the partition named.
func TestReadRecordsRefusesMalformedRequests(t *testing.T) {
	lower, upper := partition.KeyRange(5)
	inside := recordKey(5, "k")
	for _, tc := range []struct {
		name string
		q    *kitpb.ReadRecords
		path string
	}{
		{"no such partition", &kitpb.ReadRecords{Partition: partition.Count, Keys: [][]byte{inside}}, "partition"},
		{"a key of another partition", &kitpb.ReadRecords{Partition: 5, Keys: [][]byte{inside, recordKey(6, "k")}}, "keys"},
		{"a key outside every partition", &kitpb.ReadRecords{Partition: 5, Keys: [][]byte{[]byte("r/5/hs")}}, "keys"},
		{"keys and a range", &kitpb.ReadRecords{Partition: 5, Keys: [][]byte{inside}, Lower: lower, Upper: upper}, "keys"},
		{"more keys than a page", &kitpb.ReadRecords{Partition: 5, Keys: slices.Repeat([][]byte{append(slices.Clip(inside), make([]byte, 1<<16)...)}, 17)}, "keys"},
		{"no bounds", &kitpb.ReadRecords{Partition: 5}, "lower"},
		{"a lower bound before the partition", &kitpb.ReadRecords{Partition: 5, Lower: []byte("p"), Upper: upper}, "lower"},
		{"an upper bound past the partition", &kitpb.ReadRecords{Partition: 5, Lower: lower, Upper: actors.PartitionEnd(6)}, "upper"},
		{"an open upper bound", &kitpb.ReadRecords{Partition: 5, Lower: lower}, "upper"},
		{"bounds crossed", &kitpb.ReadRecords{Partition: 5, Lower: recordKey(5, "b"), Upper: recordKey(5, "a")}, "upper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := actors.ServeReadRecords(memStore(t), tc.q)
			var kerr *kiterr.Error
			if !errors.As(err, &kerr) || kerr.Code != kiterr.Validation || kerr.Path != tc.path {
				t.Errorf("ServeReadRecords = %v; want invalid at %q", err, tc.path)
			}
		})
	}
	// And what it answers.
	s := memStore(t)
	write(t, s, map[string]string{"k": "v"}, 5)
	for _, q := range []*kitpb.ReadRecords{
		{Partition: 5, Keys: [][]byte{inside}},
		{Partition: 5, Lower: lower, Upper: upper},
		{Partition: 5, Lower: inside, Upper: upper, Reverse: true, Limit: 1},
	} {
		recs, err := actors.ServeReadRecords(s, q)
		if err != nil || len(recs.Keys) != 1 || string(recs.Values[0]) != "v" || recs.More {
			t.Errorf("ServeReadRecords(%v) = %v, %v; want the one record", q, recs, err)
		}
	}
}

// A node alone reads its store through the seam at no cost.
func TestPartitionAloneAllocatesNothing(t *testing.T) {
	s := memStore(t)
	write(t, s, map[string]string{"k": "v"}, 4)
	env := &actors.Env{Store: s}
	k := recordKey(4, "k")
	if env.Partition(4) != actors.PartitionReader(s) {
		t.Error("a node alone reads through something other than its store")
	}
	if n := actors.LeastAllocs(100, func() {
		if ok, err := env.Partition(4).Has(k); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n != 0 {
		t.Errorf("Partition(p).Has allocates %v times; want 0", n)
	}
	env.Remote = &holder{held: map[partition.ID]bool{4: true}}
	if n := actors.LeastAllocs(100, func() { _, _ = env.Partition(4).Has(k) }); n != 0 {
		t.Errorf("in a cluster, Partition(p).Has of a held partition allocates %v times; want 0", n)
	}
}

// Whatever a member sends, ServeReadRecords answers only records of the
// partition named, or refuses; never a panic.
func FuzzServeReadRecords(f *testing.F) {
	lower, upper := partition.KeyRange(5)
	for _, q := range []*kitpb.ReadRecords{
		{Partition: 5, Keys: [][]byte{recordKey(5, "a")}},
		{Partition: 5, Lower: lower, Upper: upper, Reverse: true, Limit: 1},
		{Partition: 5, Lower: recordKey(4, "a"), Upper: recordKey(6, "a")},
	} {
		b, err := proto.Marshal(q)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	for _, p := range []partition.ID{4, 5, 6} {
		for _, k := range []string{"a", "b"} {
			b.Set(recordKey(p, k), []byte(k))
		}
	}
	if err := b.Commit(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q := &kitpb.ReadRecords{}
		if proto.Unmarshal(data, q) != nil {
			return
		}
		recs, err := actors.ServeReadRecords(s, q)
		if err != nil {
			return
		}
		for _, k := range recs.Keys {
			if p, ok := partition.OfKey(k); !ok || p != partition.ID(q.Partition) {
				t.Fatalf("answered %q for partition %d", k, q.Partition)
			}
		}
	})
}
