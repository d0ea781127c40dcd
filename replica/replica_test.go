package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

func openStore(t *testing.T, fs vfs.FS) *persistence.Store {
	t.Helper()
	s, err := persistence.Open("db", persistence.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keyIn is a key of partition p (the prefix actors' constructors write).
func keyIn(p partition.ID, name string) []byte {
	lower, _ := partition.KeyRange(p)
	return append(lower, name...)
}

func repr(store *persistence.Store, ops ...persistence.Op) []byte {
	b := store.NewBatch()
	for _, op := range ops {
		b.Add(op)
	}
	return slices.Clone(b.Repr())
}

func records(t *testing.T, s *persistence.Store, p partition.ID) map[string]string {
	t.Helper()
	lower, upper := partition.KeyRange(p)
	out := map[string]string{}
	if err := s.Scan(lower, upper, false, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordsApply(t *testing.T) {
	s := openStore(t, vfs.NewMem()) // builds the entries
	defer s.Close()
	set := func(p partition.ID, k, v string) persistence.Op {
		return persistence.Op{Kind: persistence.OpSet, Key: keyIn(p, k), Value: []byte(v)}
	}
	for _, tc := range []struct {
		rule    string
		data    []byte
		wantErr bool
		want    map[string]string
	}{
		{"an entry's writes are applied", repr(s, set(5, "a", "1"), set(5, "b", "2")), false,
			map[string]string{string(keyIn(5, "a")): "1", string(keyIn(5, "b")): "2"}},
		{"an empty entry (a leader's barrier) writes nothing", nil, false, map[string]string{}},
		{"a write outside the group's partition stops the node", repr(s, set(5, "a", "1"), set(6, "x", "1")), true, nil},
		{"a key of no partition stops the node", repr(s, persistence.Op{Kind: persistence.OpSet, Key: []byte("meta/x"), Value: nil}), true, nil},
		{"bytes that are no batch stop the node", []byte("not a batch at all"), true, nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s := openStore(t, vfs.NewMem())
			defer s.Close()
			b := s.NewBatch()
			// Applied twice, as a restart may: the same records.
			err := errors.Join(Records{Store: s}.Apply(5, 7, tc.data, b), Records{Store: s}.Apply(5, 7, tc.data, b))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				b.Close()
				return
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := records(t, s, 5); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("records %v, want %v", got, tc.want)
			}
		})
	}
}

// A snapshot of a partition restored on another store replaces that
// partition there, whatever it held, and leaves the other partitions alone.
func TestSnapshotRestoresOnePartition(t *testing.T) {
	src, dst := openStore(t, vfs.NewMem()), openStore(t, vfs.NewMem())
	defer src.Close()
	defer dst.Close()
	write := func(s *persistence.Store, kv map[string]string) {
		b := s.NewBatch()
		for k, v := range kv {
			b.Set([]byte(k), []byte(v))
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	big := string(bytes.Repeat([]byte("v"), 200<<10)) // crosses the buffers
	write(src, map[string]string{string(keyIn(3, "a")): "1", string(keyIn(3, "b")): big, string(keyIn(4, "other")): "src"})
	write(dst, map[string]string{string(keyIn(3, "stale")): "x", string(keyIn(4, "mine")): "dst"})

	var snap bytes.Buffer
	if err := (Records{Store: src}).Snapshot(3, &snap); err != nil {
		t.Fatal(err)
	}
	b := dst.NewBatch()
	if err := (Records{Store: dst}).Restore(3, &snap, b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := records(t, dst, 3), records(t, src, 3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partition 3 restored with %d records, want the source's %d", len(got), len(want))
	}
	if got := records(t, dst, 4); len(got) != 1 || got[string(keyIn(4, "mine"))] != "dst" {
		t.Errorf("partition 4 changed by partition 3's restore: %v", got)
	}
}

// An entry or a snapshot of a build before the node's upgrade may carry
// keys of an older layout: each set and delete lands on the key this
// build stores it under (Config.CurrentKey), a range deletion as it is.
func TestOlderLayoutsKeysLandWhereThisBuildStoresThem(t *testing.T) {
	old, now := keyIn(5, "old-layout"), keyIn(5, "this-layout")
	current := func(k []byte) []byte {
		if bytes.Equal(k, old) {
			return now
		}
		return k
	}
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	r := Records{Store: s, CurrentKey: current}
	apply := func(ops ...persistence.Op) {
		t.Helper()
		b := s.NewBatch()
		if err := r.Apply(5, 1, repr(s, ops...), b); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(rule string, recs map[string]string) {
		t.Helper()
		if got := records(t, s, 5); fmt.Sprint(got) != fmt.Sprint(recs) {
			t.Errorf("%s: records %q, want %q", rule, got, recs)
		}
	}
	apply(persistence.Op{Kind: persistence.OpSet, Key: old, Value: []byte("v")}, persistence.Op{Kind: persistence.OpSet, Key: keyIn(5, "x"), Value: []byte("x")})
	want("a set of an older key", map[string]string{string(now): "v", string(keyIn(5, "x")): "x"})
	apply(persistence.Op{Kind: persistence.OpDelete, Key: old})
	want("a delete of an older key", map[string]string{string(keyIn(5, "x")): "x"})
	// "p" lies between the older key and the newer one: only the range
	// as it is covers it.
	apply(persistence.Op{Kind: persistence.OpSet, Key: keyIn(5, "p"), Value: []byte("p")}, persistence.Op{Kind: persistence.OpDeleteRange, Key: old, Value: keyIn(5, "q")})
	want("a range deletion as it is", map[string]string{string(keyIn(5, "x")): "x"})

	src := openStore(t, vfs.NewMem())
	defer src.Close()
	b := src.NewBatch()
	b.Set(old, []byte("snap"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := (Records{Store: src}).Snapshot(5, &snap); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if err := r.Restore(5, &snap, b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	want("a snapshot's older key", map[string]string{string(now): "snap"})
}

func TestRestoreRefusesABadSnapshot(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	field := func(b []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(b))), b...) }
	for _, tc := range []struct {
		rule string
		snap []byte
	}{
		{"a snapshot cut inside a record", field(keyIn(3, "a"))},
		{"a snapshot cut inside a field", field(keyIn(3, "a"))[:4]},
		{"a field longer than any record", binary.AppendUvarint(nil, maxSnapshotField+1)},
		{"a record of another partition", slices.Concat(field(keyIn(9, "a")), field([]byte("v")))},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			b := s.NewBatch()
			defer b.Close()
			if err := (Records{Store: s}).Restore(3, bytes.NewReader(tc.snap), b); err == nil {
				t.Error("restored")
			}
		})
	}
}

// fakeGroups records what Log proposes, and answers err to every proposal
// but the first answers[g] to g's, in turn.
type fakeGroups struct {
	mu      sync.Mutex
	calls   [][]multiraft.Proposal
	err     error
	answers map[multiraft.GroupID][]error
}

func (f *fakeGroups) Propose(_ context.Context, g multiraft.GroupID, data []byte) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, []multiraft.Proposal{{Group: g, Data: slices.Clone(data)}})
	return 1, f.answer(g)
}

func (f *fakeGroups) ProposeAll(_ context.Context, props []multiraft.Proposal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var call []multiraft.Proposal
	errs, failed := make([]error, len(props)), false
	for i, p := range props {
		call = append(call, multiraft.Proposal{Group: p.Group, Data: slices.Clone(p.Data)})
		errs[i] = f.answer(p.Group)
		failed = failed || errs[i] != nil
	}
	f.calls = append(f.calls, call)
	if failed {
		return &multiraft.ProposalsError{Errs: errs}
	}
	return nil
}

func (f *fakeGroups) answer(g multiraft.GroupID) error {
	if a := f.answers[g]; len(a) > 0 {
		f.answers[g] = a[1:]
		return a[0]
	}
	return f.err
}

// opsOf lists an entry's writes as "kind key=value" strings.
func opsOf(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	if err := persistence.Ops(data, func(op persistence.Op) error {
		out = append(out, fmt.Sprintf("%d %s=%s", op.Kind, op.Key, op.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLogCommit(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	type entry struct {
		group multiraft.GroupID
		ops   []string
	}
	op := func(kind persistence.OpKind, p partition.ID, k, v string) persistence.Op {
		return persistence.Op{Kind: kind, Key: keyIn(p, k), Value: []byte(v)}
	}
	str := func(o persistence.Op) string { return fmt.Sprintf("%d %s=%s", o.Kind, o.Key, o.Value) }
	a1, a2, b1 := op(persistence.OpSet, 2, "a1", "x"), op(persistence.OpDelete, 2, "a2", ""), op(persistence.OpSet, 40, "b1", "y")
	for _, tc := range []struct {
		rule    string
		ops     []persistence.Op
		wantErr error
		want    [][]entry // calls, each with its entries
	}{
		{"a batch of one partition is one entry of its group", []persistence.Op{a1, a2}, nil,
			[][]entry{{{2, []string{str(a1), str(a2)}}}}},
		{"a batch of two partitions is one entry per group, proposed together, each in order",
			[]persistence.Op{a1, b1, a2}, nil,
			[][]entry{{{2, []string{str(a1), str(a2)}}, {40, []string{str(b1)}}}}},
		{"an empty batch proposes nothing", nil, nil, nil},
		{"a key of no partition proposes nothing", []persistence.Op{a1, {Kind: persistence.OpSet, Key: []byte("meta/layout")}},
			errNoPartition, nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f := &fakeGroups{}
			l := newLog(f, s, time.Second)
			b := s.NewBatch()
			for _, o := range tc.ops {
				b.Add(o)
			}
			err := l.Commit(b.Repr())
			b.Close()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var got [][]entry
			for _, call := range f.calls {
				var c []entry
				for _, p := range call {
					c = append(c, entry{p.Group, opsOf(t, p.Data)})
				}
				slices.SortFunc(c, func(x, y entry) int { return int(x.group) - int(y.group) })
				got = append(got, c)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("proposed %v, want %v", got, tc.want)
			}
		})
	}
}

// A proposal that fails fails the commit: the actor answers an error.
func TestLogCommitFailsWithItsGroup(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	f := &fakeGroups{err: multiraft.ErrLeadershipLost}
	b := s.NewBatch()
	b.Set(keyIn(1, "a"), nil)
	if err := (newLog(f, s, time.Second)).Commit(b.Repr()); !errors.Is(err, multiraft.ErrLeadershipLost) {
		t.Errorf("err = %v, want ErrLeadershipLost", err)
	}
}

// hosts records the switch.
type hosts struct {
	// gate stands for the activations: a writer holds it shared while it
	// commits, and Release waits for it, as cluster.Host.Release waits
	// for the activations of the partition to stop.
	gate   sync.RWMutex
	mu     sync.Mutex
	hosted map[partition.ID]bool
	events []string
}

// isHosted reports whether p is hosted (under gate, for a writer).
func (h *hosts) isHosted(p partition.ID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hosted[p]
}

func (h *hosts) Host(p partition.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosted[p] = true
	h.events = append(h.events, fmt.Sprint("host ", p))
}

func (h *hosts) Release(p partition.ID) {
	h.gate.Lock()
	defer h.gate.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosted[p] = false
	h.events = append(h.events, fmt.Sprint("release ", p))
}

// A node alone leads and hosts every partition once Start returns, having
// released them first; after a restart it is the same node, and what it
// committed is there.
func TestStartLeadsEveryPartitionAndRestarts(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	h := &hosts{hosted: map[partition.ID]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, Config{Store: s, Hosts: h, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for p := range partition.ID(partition.Count) {
		if !h.hosted[p] {
			t.Errorf("partition %d not hosted after Start", p)
		}
	}
	if h.events[0] != "release 0" || len(h.events) != 2*partition.Count {
		t.Errorf("events %v: want every partition released, then hosted once", h.events[:4])
	}
	b := s.NewBatch()
	b.Set(keyIn(7, "k"), []byte("v"))
	b.Set(keyIn(8, "k"), []byte("w"))
	err = r.Log.Commit(b.Repr())
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := r.id
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, fs)
	defer s.Close()
	r, err = Start(ctx, Config{Store: s, Hosts: h, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.id != id {
		t.Errorf("node id %d after a restart, was %d", r.id, id)
	}
	for p, want := range map[partition.ID]string{7: "v", 8: "w"} {
		if v, err := s.Get(keyIn(p, "k")); err != nil || string(v) != want {
			t.Errorf("partition %d after a restart: %q, %v; want %q", p, v, err, want)
		}
	}
}

// A write its group did not commit answers errNotCommitted's words, never
// raft's, even when the leader's refusal came back as an error of its own.
func TestUncommittedWriteSaysSoInItsOwnWords(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	l := newLog(&fakeGroups{}, s, time.Second)
	l.leads = func(multiraft.GroupID) bool { return false }
	l.remote = func(context.Context, multiraft.GroupID, []byte) error {
		return kiterr.New(kiterr.Unavailable, "replication: group 1: not the leader (leader 7, term 4)")
	}
	b := s.NewBatch()
	b.Set(keyIn(1, "a"), nil)
	err := l.Commit(b.Repr())
	b.Close()
	var e *kiterr.Error
	if !errors.As(err, &e) || e.Message != errNotCommitted.Message || e.Code != kiterr.Unavailable {
		t.Fatalf("err = %v, want errNotCommitted's answer", err)
	}
}

// lateGroups are groups led here whose entries are applied only after any
// deadline their proposal carries: a raft round that outlives the commit
// timeout (a slow disk, a follower catching up). Like multiraft.Node, a
// proposal gives up when its context ends, with its entry still in the
// log.
type lateGroups struct{ fakeGroups }

func (l *lateGroups) Propose(ctx context.Context, g multiraft.GroupID, data []byte) (uint64, error) {
	if _, ok := ctx.Deadline(); ok {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return l.fakeGroups.Propose(ctx, g, data)
}

func (l *lateGroups) ProposeAll(ctx context.Context, props []multiraft.Proposal) error {
	if _, ok := ctx.Deadline(); ok {
		<-ctx.Done()
		return &multiraft.ProposalsError{Errs: slices.Repeat([]error{ctx.Err()}, len(props))}
	}
	return l.fakeGroups.ProposeAll(ctx, props)
}

// A write whose entry outlives the commit timeout on a group led here is
// awaited to its outcome: told "failed", an actor would act as if the
// write had not happened, and the entry could still land after (a
// conversation gave its next post the late post's position).
func TestALateEntryHereIsAwaitedToItsOutcome(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	for _, tc := range []struct {
		name  string
		parts []partition.ID
	}{
		{"a write of one partition", []partition.ID{1}},
		{"a write of two partitions, both led here", []partition.ID{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(&lateGroups{}, s, time.Millisecond)
			b := s.NewBatch()
			defer b.Close()
			for _, p := range tc.parts {
				b.Set(keyIn(p, "a"), nil)
			}
			if err := l.Commit(b.Repr()); err != nil {
				t.Fatalf("a write applied after the commit timeout: %v, want its outcome, applied", err)
			}
		})
	}
}

// An entry for a group led elsewhere is sent again while its leader
// refuses it with nothing appended, and only then.
func TestRemoteProposalRefusedIsSentAgain(t *testing.T) {
	refused := &multiraft.NotLeaderError{Group: 1, Leader: 7, Term: 4}
	dropped := fmt.Errorf("%w: transfer", multiraft.ErrProposalDropped)
	for _, tc := range []struct {
		name      string
		answers   []error // the remote's answers, in turn; then nil
		leadAfter int     // sends after which this node leads the group (0: never)
		timeout   time.Duration
		sends     int  // remote sends
		local     int  // proposals here
		fails     bool // Commit answers errNotCommitted
	}{
		{"a refusal naming another leader is sent again", []error{refused}, 0, time.Second, 2, 0, false},
		{"a proposal dropped during a transfer is sent again", []error{dropped, dropped}, 0, time.Second, 3, 0, false},
		{"an outcome not known is never sent again", []error{multiraft.ErrLeadershipLost}, 0, time.Second, 1, 0, true},
		{"an error of the leader's own is never sent again", []error{kiterr.New(kiterr.Internal, "disk")}, 0, time.Second, 1, 0, true},
		{"leadership that came here is proposed here", []error{refused, refused}, 1, time.Second, 1, 1, false},
		{"refusals for the whole request's time answer 503", slices.Repeat([]error{refused}, 1000), 0, 100 * time.Millisecond, -1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, vfs.NewMem())
			defer s.Close()
			groups := &fakeGroups{}
			l := newLog(groups, s, tc.timeout)
			var sends int
			l.leads = func(multiraft.GroupID) bool { return tc.leadAfter > 0 && sends >= tc.leadAfter }
			l.remote = func(context.Context, multiraft.GroupID, []byte) error {
				sends++
				if sends <= len(tc.answers) {
					return tc.answers[sends-1]
				}
				return nil
			}
			b := s.NewBatch()
			b.Set(keyIn(1, "a"), nil)
			err := l.Commit(b.Repr())
			b.Close()
			var e *kiterr.Error
			if failed := errors.As(err, &e) && e.Message == errNotCommitted.Message; failed != tc.fails {
				t.Errorf("err = %v, want failed %v", err, tc.fails)
			}
			if tc.sends >= 0 && sends != tc.sends {
				t.Errorf("%d sends, want %d", sends, tc.sends)
			}
			if tc.sends < 0 && sends < 2 {
				t.Errorf("%d sends in the request's time, want several", sends)
			}
			if len(groups.calls) != tc.local {
				t.Errorf("%d proposals here, want %d", len(groups.calls), tc.local)
			}
		})
	}
}

// The parts of a batch that other nodes lead are proposed all at once,
// and the parts led here only after every one of them is applied.
func TestPartsLedElsewhereGoTogetherBeforeThoseLedHere(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	groups := &fakeGroups{}
	l := newLog(groups, s, time.Minute)
	l.leads = func(g multiraft.GroupID) bool { return g == 9 }
	elsewhere := []partition.ID{1, 2, 3, 4}
	var mu sync.Mutex
	arrived, together := 0, make(chan struct{})
	l.remote = func(ctx context.Context, _ multiraft.GroupID, _ []byte) error {
		mu.Lock()
		if arrived++; arrived == len(elsewhere) {
			close(together)
		}
		mu.Unlock()
		select {
		case <-together:
		case <-time.After(10 * time.Second):
			return errors.New("the parts led elsewhere went one at a time")
		}
		groups.mu.Lock()
		defer groups.mu.Unlock()
		if len(groups.calls) != 0 {
			return errors.New("the parts led here went before those led elsewhere were applied")
		}
		return nil
	}
	b := s.NewBatch()
	for _, p := range append(slices.Clone(elsewhere), 9) {
		b.Set(keyIn(p, "a"), nil)
	}
	err := l.Commit(b.Repr())
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.calls) != 1 || len(groups.calls[0]) != 1 || groups.calls[0][0].Group != 9 {
		t.Fatalf("proposals here %v, want the part of group 9 alone", groups.calls)
	}
}

// A part led here that entered no log (raft dropped it while that
// partition's lead is handed over, or this node just stopped leading) goes
// again, through whichever node leads by then; a part whose outcome is
// unknown does not. (Replica.propose refuses a partition whose activations
// may still run here: TestNoEntryLeavesWhileItsActivationsMayRunHere.)
func TestPartRefusedHereIsSentAgain(t *testing.T) {
	dropped := fmt.Errorf("%w: transfer", multiraft.ErrProposalDropped)
	lost := &multiraft.NotLeaderError{Group: 2, Leader: 7, Term: 4}
	for _, tc := range []struct {
		name    string
		parts   []partition.ID // the batch writes one key in each
		answers []error        // partition 2's answers here, in turn
		leads2  int            // proposals here to 2 after which the lead is elsewhere
		sends   int            // remote sends to 2
		fails   bool           // Commit answers errNotCommitted
	}{
		{"a part of several, dropped, goes to the next leader", []partition.ID{1, 2}, []error{dropped}, 1, 1, false},
		{"a part of several, dropped while the transfer lasts, goes again here", []partition.ID{1, 2}, []error{dropped, dropped}, 3, 0, false},
		{"a batch of one partition, dropped, goes to the next leader", []partition.ID{2}, []error{dropped}, 1, 1, false},
		{"a part of several whose lead was lost goes to the next leader", []partition.ID{1, 2}, []error{lost}, 1, 1, false},
		{"a batch of one partition whose lead was lost goes to the next leader", []partition.ID{2}, []error{lost}, 1, 1, false},
		{"a part of several whose outcome is unknown is not sent again", []partition.ID{1, 2}, []error{multiraft.ErrLeadershipLost}, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, vfs.NewMem())
			defer s.Close()
			groups := &fakeGroups{answers: map[multiraft.GroupID][]error{2: tc.answers}}
			l := newLog(groups, s, time.Second)
			here := func() (n int) {
				for _, call := range groups.calls {
					for _, p := range call {
						if p.Group == 2 {
							n++
						}
					}
				}
				return n
			}
			l.leads = func(g multiraft.GroupID) bool { return g != 2 || here() < tc.leads2 }
			var sends int
			l.remote = func(_ context.Context, g multiraft.GroupID, _ []byte) error {
				if g != 2 {
					t.Errorf("sent group %d elsewhere", g)
				}
				sends++
				return nil
			}
			b := s.NewBatch()
			for _, p := range tc.parts {
				b.Set(keyIn(p, "a"), nil)
			}
			err := l.Commit(b.Repr())
			b.Close()
			var e *kiterr.Error
			if failed := errors.As(err, &e) && e.Message == errNotCommitted.Message; failed != tc.fails {
				t.Errorf("err = %v, want failed %v", err, tc.fails)
			}
			if sends != tc.sends {
				t.Errorf("%d remote sends, want %d", sends, tc.sends)
			}
		})
	}
}

// Who creates and leads every group on start.
func TestFounds(t *testing.T) {
	for _, tc := range []struct {
		rule                 string
		alone, found, forgot bool
		groups               int
		want                 bool
	}{
		{"a node alone founds, new", true, false, false, 0, true},
		{"a node alone founds, restarted", true, false, false, 64, true},
		{"the founder founds on its first start", false, true, false, 0, true},
		{"the founder restarted is one replica among others", false, true, false, 64, false},
		{"a founder that forgot every group waits to be added again", false, true, true, 0, false},
		{"a node that joins founds nothing", false, false, false, 0, false},
	} {
		if got := founds(tc.alone, tc.found, tc.forgot, tc.groups); got != tc.want {
			t.Errorf("%s: founds = %v, want %v", tc.rule, got, tc.want)
		}
	}
}

// No entry of a partition leaves for a leader elsewhere while the
// partition's activations may still run here (hosted, or being released):
// it may be an activation's own write, and the new leader may have loaded
// that activation's state already.
func TestNoEntryLeavesWhileItsActivationsMayRunHere(t *testing.T) {
	const g = multiraft.GroupID(3)
	p := partition.ID(g)
	h := &hosts{hosted: map[partition.ID]bool{}}
	r := &Replica{id: 1, hosts: h}
	r.leaders[p] = leader{id: 2, term: 5}
	var sends int
	r.cfg.Remote = func(context.Context, uint64, multiraft.GroupID, []byte) error {
		sends++
		return nil
	}
	propose := func(rule string, wantSent bool) {
		t.Helper()
		before := sends
		err := r.propose(context.Background(), g, nil)
		switch {
		case wantSent && (err != nil || sends != before+1):
			t.Errorf("%s: err %v, %d sends; want it sent", rule, err, sends-before)
		case !wantSent && (!errors.Is(err, errActivationsHere) || appendedNothing(err) || sends != before):
			t.Errorf("%s: err %v, %d sends; want errActivationsHere, not to be sent again", rule, err, sends-before)
		}
	}
	r.hosted[p] = true
	propose("hosted", false)

	// An activation is committing: the release waits for it.
	h.gate.RLock()
	r.mu.Lock()
	if !r.unhost(p) {
		t.Fatal("unhost: it was hosted")
	}
	r.mu.Unlock()
	released := make(chan struct{})
	go func() {
		r.release(p)
		close(released)
	}()
	propose("being released", false)
	h.gate.RUnlock()
	<-released
	propose("released", true)
}

// The leader a refusing node names gets the next entry, while this node
// still knows only an older term.
func TestARefusalNamesWhereTheNextEntryGoes(t *testing.T) {
	const g = multiraft.GroupID(3)
	for _, tc := range []struct {
		name  string
		known leader // what this node's replica heard
		named leader // what the refusal said
		age   time.Duration
		want  uint64 // where the second entry goes
	}{
		{"a newer term than known: there", leader{id: 2, term: 4}, leader{id: 3, term: 5}, 0, 3},
		{"the term known: where the replica says", leader{id: 2, term: 5}, leader{id: 3, term: 5}, 0, 2},
		{"named too long ago: where the replica says", leader{id: 2, term: 4}, leader{id: 3, term: 5}, refusalFor, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent []uint64
			r := &Replica{id: 1}
			r.leaders[g] = tc.known
			r.cfg.Remote = func(_ context.Context, to uint64, _ multiraft.GroupID, _ []byte) error {
				sent = append(sent, to)
				if len(sent) == 1 {
					return &multiraft.NotLeaderError{Group: g, Leader: tc.named.id, Term: tc.named.term}
				}
				return nil
			}
			if err := r.propose(context.Background(), g, nil); !appendedNothing(err) {
				t.Fatalf("first send: %v, want the refusal", err)
			}
			if rf := r.refusals[g].Load(); rf != nil {
				rf.at = rf.at.Add(-tc.age)
			}
			if err := r.propose(context.Background(), g, nil); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sent, []uint64{tc.known.id, tc.want}) {
				t.Fatalf("sent to %v, want [%d %d]", sent, tc.known.id, tc.want)
			}
		})
	}
}

// Where a request or an entry for a partition goes: the leader this node's
// replica follows while gossip counts its node a member, else gossip's
// word, but for an election a replica of the group hears the end of.
func TestRoutesNeverNameADepartedNode(t *testing.T) {
	const p = partition.ID(7)
	grace := 2 * time.Second
	members := map[uint64]bool{1: true, 2: true, 4: true} // 3 left or died
	rs := routes{self: 1, live: func(id uint64) bool { return members[id] }, grace: grace}
	gossipNames := func(id uint64) routes {
		r := rs
		r.gossip = func(partition.ID) uint64 { return id }
		return r
	}
	for _, tc := range []struct {
		rule       string
		rs         routes
		l          leader
		leaderless time.Duration
		inGroup    bool
		wantID     uint64
		wantTerm   uint64
	}{
		{"the replica's leader, a member, in its term", gossipNames(4), leader{id: 2, term: 5}, 0, true, 2, 5},
		{"this node itself, whatever gossip says", gossipNames(4), leader{id: 1, term: 5}, 0, true, 1, 5},
		{"a leader that left or died: gossip's instead", gossipNames(4), leader{id: 3, term: 5}, 0, true, 4, 0},
		{"a leader that left or died, gossip names none: none", gossipNames(0), leader{id: 3, term: 5}, 0, true, 0, 5},
		{"an election the replica takes part in: wait for it", gossipNames(4), leader{term: 5}, grace / 2, true, 0, 5},
		{"no leader for longer than an election (removed unknowingly): gossip's", gossipNames(4), leader{term: 5}, grace, true, 4, 0},
		{"no replica in the group: gossip's at once", gossipNames(4), leader{term: 5}, 0, false, 4, 0},
		{"alone (no gossip): the replica's leader", routes{self: 1, grace: grace}, leader{id: 3, term: 5}, 0, true, 3, 5},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			id, term := tc.rs.route(p, tc.l, tc.leaderless, tc.inGroup)
			if id != tc.wantID || term != tc.wantTerm {
				t.Fatalf("route = %d in term %d, want %d in term %d", id, term, tc.wantID, tc.wantTerm)
			}
		})
	}
}

// A catch-up refused (no leader known yet, or one that does not lead
// under a lease) asks again until it is answered or its time ends; any
// other failure is its answer.
func TestACatchUpRefusedAsksAgain(t *testing.T) {
	notLeader := &multiraft.NotLeaderError{Group: 3, Leader: 7, Term: 4}
	remoteRefusal := kiterr.New(kiterr.Unavailable, "replication: group 3: not the leader (leader 7, term 4)")
	disk := errors.New("disk")
	for _, tc := range []struct {
		name    string
		answers []error // in turn; then the last again
		timeout time.Duration
		want    error
		asks    int // -1: at least two
	}{
		{"this node's refusal is asked again", []error{notLeader, nil}, time.Minute, nil, 2},
		{"another node's refusal is asked again", []error{remoteRefusal, remoteRefusal, nil}, time.Minute, nil, 3},
		{"another failure is the answer at once", []error{disk}, time.Minute, disk, 1},
		{"refusals past the time answer the last refusal", []error{notLeader}, 50 * time.Millisecond, notLeader, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			asks := 0
			err := askAgain(ctx, refused, func() error {
				a := tc.answers[min(asks, len(tc.answers)-1)]
				asks++
				return a
			})
			if !errors.Is(err, tc.want) || err != nil && tc.want == nil {
				t.Fatalf("answered %v, want %v", err, tc.want)
			}
			if tc.asks >= 0 && asks != tc.asks || tc.asks < 0 && asks < 2 {
				t.Fatalf("asked %d times, want %d", asks, tc.asks)
			}
		})
	}
}

// A message of a group this node lacks that comes as the node stops asks
// it to join a group it no longer can: that is no warning, the node is
// going down.
func TestAStoppingNodeJoinsNoGroupAndSaysNothing(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	var logged bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, Config{Store: s, Hosts: &hosts{hosted: map[partition.ID]bool{}}, TickInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.JoinGroup(multiraft.GroupID(3))
	if logged.Len() != 0 {
		t.Fatalf("a stopped node's join logged %q, want nothing", logged.String())
	}
}

// A read served from this node's store without asking the leader
// (CatchUp's fast path) must see every write acknowledged before: a new
// leader may not have applied what its predecessor committed last until
// its own term's barrier entry is applied.
func TestAReadIsServedHereOnceTheTermsBarrierIsApplied(t *testing.T) {
	const p = partition.ID(3)
	for _, tc := range []struct {
		rule             string
		leading, applied uint64
		want             bool
	}{
		{"a leader that applied its term's barrier reads here", 5, 5, true},
		{"a leader whose barrier is not applied yet asks", 5, 0, false},
		{"a barrier of an earlier term is not this term's", 6, 5, false},
		{"a node that does not lead asks", 0, 5, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := &Replica{} // no transport: the lease holds
			r.leading[p], r.applied[p] = tc.leading, tc.applied
			if got := r.readsHere(p); got != tc.want {
				t.Fatalf("readsHere = %v, want %v", got, tc.want)
			}
		})
	}
}
