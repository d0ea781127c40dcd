package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// net is an in-memory transport between the replicas of a test: a
// message for a group its receiver lacks makes the receiver join it, as
// the cluster's transport does.
type net struct {
	mu    sync.Mutex
	reps  map[uint64]*Replica
	down  map[uint64]bool
	order []uint64
	// draining is a node gossip says drains: not a member to place on.
	draining uint64
}

type netEnd struct {
	n    *net
	from uint64
}

// setDown cuts node id off the network, or brings it back.
func (n *net) setDown(id uint64, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[id] = down
}

func (n *net) to(id uint64) *Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[id] {
		return nil
	}
	return n.reps[id]
}

func (e netEnd) Send(msgs []multiraft.Message) {
	if e.n.to(e.from) == nil {
		return
	}
	for _, m := range msgs {
		r := e.n.to(m.Msg.To)
		if r == nil {
			continue
		}
		if errors.Is(r.node.Step(m), multiraft.ErrUnknownGroup) {
			r.JoinGroup(m.Group)
			_ = r.node.Step(m)
		}
	}
}

func (e netEnd) SendSnapshot(m multiraft.Message, state io.Reader) error {
	r := e.n.to(m.Msg.To)
	if r == nil {
		return errors.New("down")
	}
	data, err := io.ReadAll(state)
	if err != nil {
		return err
	}
	if err := r.node.ReceiveSnapshot(m, bytes.NewReader(data)); errors.Is(err, multiraft.ErrUnknownGroup) {
		r.JoinGroup(m.Group)
		return r.node.ReceiveSnapshot(m, bytes.NewReader(data))
	} else {
		return err
	}
}

// members is what gossip would say: every replica not down, with the
// groups it leads.
func (n *net) members() []LiveNode {
	n.mu.Lock()
	var reps []*Replica
	for _, id := range n.order {
		if !n.down[id] && n.reps[id] != nil && id != n.draining {
			reps = append(reps, n.reps[id])
		}
	}
	n.mu.Unlock()
	var out []LiveNode
	for _, r := range reps {
		led, _ := r.Partitions()
		c := 0
		for ; led != 0; led &= led - 1 {
			c++
		}
		out = append(out, LiveNode{RaftID: r.ID(), Led: c})
	}
	return out
}

// leaderOf is what gossip would say leads p: a replica not down that
// leads it (0: none).
func (n *net) leaderOf(p partition.ID) uint64 {
	n.mu.Lock()
	var reps []*Replica
	for id, r := range n.reps {
		if !n.down[id] {
			reps = append(reps, r)
		}
	}
	n.mu.Unlock()
	if l := leaderOf(reps, p); l != nil {
		return l.ID()
	}
	return 0
}

// Three nodes grow from one: the first node's groups gain a replica on
// each of the others, the leaderships spread, a write committed by a
// partition's leader is on all three stores, and when a leader stops the
// others elect a new one that has every committed write.
func TestGrowFromOneNodeToThree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nodes")
	}
	n, all, stores := growThree(t, 0)
	a, b, c := all[0], all[1], all[2]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eventually.NoError(t, "every group on three voters and the leaderships spread", func() error {
		for g := range multiraft.GroupID(partition.Count) {
			lead := leaderOf(all, partition.ID(g))
			if lead == nil {
				return fmt.Errorf("group %d has no leader", g)
			}
			st, err := lead.node.Status(g)
			if err != nil || len(st.Voters) != 3 {
				return fmt.Errorf("group %d: voters %v (%v)", g, st.Voters, err)
			}
		}
		for _, r := range all {
			led, _ := r.Partitions()
			if count(led) < 10 {
				return fmt.Errorf("node %d leads %d groups", r.ID(), count(led))
			}
		}
		return nil
	})

	// A write through each partition's leader reaches every store.
	for p := range partition.ID(partition.Count) {
		commitVia(t, all, p, "k", "v1")
	}
	eventually.NoError(t, "every write on every store", func() error {
		for id, s := range stores {
			for p := range partition.ID(partition.Count) {
				if v, err := s.Get(keyIn(p, "k")); err != nil || string(v) != "v1" {
					return fmt.Errorf("node %d partition %d: %q %v", id, p, v, err)
				}
			}
		}
		return nil
	})

	// A batch over partitions that other nodes lead, committed by a third:
	// every part reaches every store.
	var spread []partition.ID
	for p := range partition.ID(partition.Count) {
		if l := leaderOf(all, p); l != a && len(spread) < 2 && (len(spread) == 0 || leaderOf(all, spread[0]) != l) {
			spread = append(spread, p)
		}
	}
	if len(spread) != 2 {
		t.Fatalf("no two partitions led by b and c: %v", spread)
	}
	eventually.NoError(t, "a commit over partitions b and c lead, through a", func() error {
		batch := stores[a.ID()].NewBatch()
		for _, p := range spread {
			batch.Set(keyIn(p, "multi"), []byte("m"))
		}
		defer batch.Close()
		return a.Log.Commit(batch.Repr())
	})
	eventually.NoError(t, "both parts on every store", func() error {
		for id, s := range stores {
			for _, p := range spread {
				if v, err := s.Get(keyIn(p, "multi")); err != nil || string(v) != "m" {
					return fmt.Errorf("node %d partition %d: %q %v", id, p, v, err)
				}
			}
		}
		return nil
	})

	// A drain hands every lead of a node to the others, which no longer
	// count it as a member to give leads to (gossip says it drains).
	n.mu.Lock()
	n.draining = c.ID()
	n.mu.Unlock()
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	if err := c.HandOver(hctx); err != nil {
		t.Fatal(err)
	}
	if led, _ := c.Partitions(); led != 0 {
		t.Fatalf("c still leads %b after handing over", led)
	}
	eventually.NoError(t, "every group led by a or b", func() error {
		for p := range partition.ID(partition.Count) {
			if l := leaderOf([]*Replica{a, b}, p); l == nil {
				return fmt.Errorf("partition %d", p)
			}
		}
		return nil
	})

	// The leader of partition 0 stops: the others take over, with the write.
	old := leaderOf(all, 0)
	n.mu.Lock()
	n.down[old.ID()] = true
	n.mu.Unlock()
	var rest []*Replica
	for _, r := range all {
		if r != old {
			rest = append(rest, r)
		}
	}
	eventually.NoError(t, "a new leader of partition 0", func() error {
		if l := leaderOf(rest, 0); l == nil {
			return errors.New("none yet")
		}
		return nil
	})
	commitVia(t, rest, 0, "k2", "v2")
	for _, r := range rest {
		if v, err := stores[r.ID()].Get(keyIn(0, "k")); err != nil || string(v) != "v1" {
			t.Errorf("node %d after the failover: %q %v", r.ID(), v, err)
		}
	}
}

// growThree starts three replicas, the first founding, over an in-memory
// network, with the given DownTimeout (0: the default).
func growThree(t *testing.T, downTimeout time.Duration) (*net, []*Replica, map[uint64]*persistence.Store) {
	t.Helper()
	n, start, stores := newGrowing(t, downTimeout, 0)
	a := start(true)
	b, c := start(false), start(false)
	return n, []*Replica{a, b, c}, stores
}

// newGrowing is an empty network of replicas (with replicas per group,
// 0: every node) and the function that starts one more, founding the
// cluster or joining it.
func newGrowing(t *testing.T, downTimeout time.Duration, replicas int) (*net, func(found bool) *Replica, map[uint64]*persistence.Store) {
	t.Helper()
	n := &net{reps: map[uint64]*Replica{}, down: map[uint64]bool{}}
	stores := map[uint64]*persistence.Store{}
	start := func(found bool) *Replica {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s := openStore(t, vfs.NewMem())
		id, err := multiraft.NodeID(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Store: s, Hosts: &hosts{hosted: map[partition.ID]bool{}}, TickInterval: 10 * time.Millisecond,
			Transport: netEnd{n, id}, Found: found, LiveNodes: n.members, GrowInterval: 20 * time.Millisecond, DownTimeout: downTimeout,
			Replicas: replicas,
			Remote: func(ctx context.Context, to uint64, g multiraft.GroupID, data []byte) error {
				r := n.to(to)
				if r == nil {
					return errors.New("down")
				}
				return r.ProposeHere(ctx, g, data)
			},
			LeaderOf: n.leaderOf, ForgetAfter: 100 * time.Millisecond,
			AskMembers: func(_ context.Context, to uint64, g multiraft.GroupID) ([]uint64, error) {
				r := n.to(to)
				if r == nil {
					return nil, errors.New("down")
				}
				return r.GroupMembers(g)
			}}
		n.mu.Lock()
		n.order = append(n.order, id)
		n.mu.Unlock()
		r, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		n.reps[id] = r
		n.mu.Unlock()
		stores[id] = s
		t.Cleanup(func() { r.Close(); s.Close() })
		return r
	}
	return n, start, stores
}

// With three replicas a group, a fourth node that joins a settled
// cluster takes its share: each group's replicas move to the three nodes
// that rank highest for it, and the fourth leads some.
func TestJoiningNodeTakesItsShareOfReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four nodes")
	}
	n, start, _ := newGrowing(t, 0, 3)
	all := []*Replica{start(true), start(false), start(false)}
	onTop := func(want int) error {
		members := n.members()
		if len(members) != want {
			return fmt.Errorf("%d members", len(members))
		}
		for g := range multiraft.GroupID(partition.Count) {
			lead := leaderOf(all, partition.ID(g))
			if lead == nil {
				return fmt.Errorf("group %d has no leader", g)
			}
			st, err := lead.node.Status(g)
			top := rank(g, members)[:3]
			slices.Sort(top)
			if err != nil || len(st.Learners) != 0 || !slices.Equal(slices.Sorted(slices.Values(st.Voters)), top) {
				return fmt.Errorf("group %d: voters %v learners %v, want %v (%v)", g, st.Voters, st.Learners, top, err)
			}
		}
		for _, r := range all {
			if led, _ := r.Partitions(); count(led) == 0 {
				return fmt.Errorf("node %d leads nothing", r.ID())
			}
		}
		return nil
	}
	eventually.NoError(t, "three nodes, every group on all three", func() error { return onTop(3) })
	for p := range partition.ID(partition.Count) {
		commitVia(t, all, p, "k", "v")
	}
	all = append(all, start(false))
	eventually.NoError(t, "every group on the three nodes that rank highest for it", func() error { return onTop(4) })
	_, held := all[3].Partitions()
	t.Logf("the fourth node holds %d groups", count(held))

	// The replicas the moves left behind are forgotten, records and all;
	// the others keep theirs. The test reads partitions a node no longer
	// holds, which the read check would count as the node's own bug.
	for _, r := range all {
		r.cfg.Store.SetReadCheck(nil)
	}
	eventually.NoError(t, "every replica its group removed forgotten", func() error {
		for _, r := range all {
			groups := r.node.Groups()
			for p := range partition.ID(partition.Count) {
				g := multiraft.GroupID(p)
				lead := leaderOf(all, p)
				if lead == nil {
					return fmt.Errorf("group %d has no leader", g) // a move under way
				}
				st, err := lead.node.Status(g)
				if err != nil {
					return err
				}
				member := slices.Contains(st.Voters, r.ID()) || slices.Contains(st.Learners, r.ID())
				if has := slices.Contains(groups, g); has != member {
					return fmt.Errorf("node %d: has group %d %v, a member %v", r.ID(), g, has, member)
				}
				_, err = r.cfg.Store.Get(keyIn(p, "k"))
				if found := err == nil; found != member {
					return fmt.Errorf("node %d: partition %d's record found %v (%v), a member %v", r.ID(), p, found, err, member)
				}
			}
		}
		return nil
	})
	var forgotten uint64
	for _, r := range all {
		forgotten += r.forgotten.Load()
	}
	t.Logf("%d replicas forgotten", forgotten)
	if forgotten == 0 {
		t.Fatal("no replica forgotten: the fourth node took no share")
	}
}

// A voter that stays down leaves its groups once DownTimeout passed, so
// that the two left make every quorum by themselves: a second loss then
// would not be the third of four. Its node forgets those replicas, records
// and all (it still reaches the leaders to ask, though it hears none of
// their raft messages: a one-way loss); back, it is added to every group
// again and filled by snapshots, with what was written while it was away.
func TestDownVoterLeavesItsGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nodes")
	}
	n, all, stores := growThree(t, 300*time.Millisecond)
	waitVoters(t, all, 3, 0)
	gone := all[2]
	n.setDown(gone.ID(), true)
	waitVoters(t, all[:2], 2, gone.ID())
	eventually.NoError(t, "the node away forgets every replica", func() error {
		if gs := gone.node.Groups(); len(gs) != 0 {
			return fmt.Errorf("it has %d groups", len(gs))
		}
		return nil
	})
	if marked, err := multiraft.Forgotten(stores[gone.ID()]); err != nil || !marked {
		t.Fatalf("store not marked: %v %v", marked, err)
	}
	for p := range partition.ID(partition.Count) {
		commitVia(t, all[:2], p, "away", "v")
	}

	n.setDown(gone.ID(), false)
	waitVoters(t, all, 3, 0)
	stores[gone.ID()].SetReadCheck(nil) // the test reads what it may not hold yet
	eventually.NoError(t, "the node back holds what was written while it was away", func() error {
		for p := range partition.ID(partition.Count) {
			if v, err := stores[gone.ID()].Get(keyIn(p, "away")); err != nil || string(v) != "v" {
				return fmt.Errorf("partition %d: %q %v", p, v, err)
			}
		}
		return nil
	})
	if n := gone.forgotten.Load(); n != partition.Count {
		t.Errorf("%d replicas forgotten, want %d", n, partition.Count)
	}
}

// waitVoters waits until every group has want voters, led by one of rs,
// none of them without.
func waitVoters(t *testing.T, rs []*Replica, want int, without uint64) {
	t.Helper()
	eventually.NoError(t, fmt.Sprintf("every group on %d voters", want), func() error {
		for g := range multiraft.GroupID(partition.Count) {
			lead := leaderOf(rs, partition.ID(g))
			if lead == nil {
				return fmt.Errorf("group %d has no leader", g)
			}
			st, err := lead.node.Status(g)
			if err != nil || len(st.Voters) != want || slices.Contains(st.Voters, without) {
				return fmt.Errorf("group %d: voters %v (%v)", g, st.Voters, err)
			}
		}
		return nil
	})
}

// leaderOf is the replica among rs that leads p and knows it.
func leaderOf(rs []*Replica, p partition.ID) *Replica {
	for _, r := range rs {
		if st, err := r.node.Status(multiraft.GroupID(p)); err == nil && st.Leader == r.ID() {
			return r
		}
	}
	return nil
}

func commitVia(t *testing.T, rs []*Replica, p partition.ID, k, v string) {
	t.Helper()
	eventually.NoError(t, fmt.Sprintf("a commit to partition %d", p), func() error {
		l := leaderOf(rs, p)
		if l == nil {
			return errors.New("no leader")
		}
		b := l.cfg.Store.NewBatch()
		b.Set(keyIn(p, k), []byte(v))
		defer b.Close()
		return l.Log.Commit(b.Repr())
	})
}

func count(set uint64) int {
	c := 0
	for ; set != 0; set &= set - 1 {
		c++
	}
	return c
}

// A leader hands a partition over (balancing, draining) without refusing
// a write: raft drops every proposal while a transfer is under way, so the
// partition is released first, and its writers (the activations) finish
// their commits and stop before the transfer starts; then they wait for
// the new leader, as during an election.
func TestHandOverRefusesNoWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nodes")
	}
	_, all, _ := growThree(t, 0)
	eventually.NoError(t, "the leaderships spread", func() error {
		for _, r := range all {
			if led, _ := r.Partitions(); count(led) < 10 {
				return fmt.Errorf("node %d leads %d groups", r.ID(), count(led))
			}
		}
		return nil
	})
	var a, b *Replica
	var p partition.ID
	eventually.NoError(t, "a partition led by one node, with another voter caught up", func() error {
		for q := range partition.ID(partition.Count) {
			lead := leaderOf(all, q)
			if lead == nil {
				continue
			}
			st, err := lead.node.Status(multiraft.GroupID(q))
			if err != nil || len(st.Voters) != 3 || !lead.hosts.(*hosts).isHosted(q) {
				continue
			}
			for _, o := range all {
				if o != lead && st.Match[o.ID()] >= st.Commit {
					a, b, p = lead, o, q
					return nil
				}
			}
		}
		return errors.New("none yet")
	})
	h := a.hosts.(*hosts)
	var stop, failed atomic.Bool
	var commits atomic.Int64
	var errs sync.Map
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				h.gate.RLock()
				if h.isHosted(p) {
					batch := a.cfg.Store.NewBatch()
					batch.Set(keyIn(p, fmt.Sprintf("w%d-%d", w, i)), []byte("v"))
					if err := a.Log.Commit(batch.Repr()); err != nil {
						failed.Store(true)
						errs.Store(err.Error(), true)
					} else {
						commits.Add(1)
					}
					batch.Close()
				}
				h.gate.RUnlock()
				runtime.Gosched()
			}
		})
	}
	// Until the writers are going: 20 commits, or fewer when the balancer
	// handed the partition over meanwhile (then the writers pause, and
	// handOver below finds it gone: the same hand-over, under writes).
	eventually.NoError(t, "writes going", func() error {
		if n := commits.Load(); n < 20 && (n == 0 || h.isHosted(p)) {
			return fmt.Errorf("%d commits, partition %d hosted: %v", n, p, h.isHosted(p))
		}
		return nil
	})
	var nl *multiraft.NotLeaderError
	switch err := a.handOver(multiraft.GroupID(p), b.ID()); {
	case errors.As(err, &nl):
		// The balancer handed it over first, the same way; the writers
		// were going all along.
		t.Logf("the balancer handed partition %d over first", p)
	case err != nil:
		t.Fatal(err)
	}
	// Until another node leads (the balancer may move it back a moment
	// later: this looks at most 5 s), with the writers going.
	moved := false
	for deadline := time.Now().Add(5 * time.Second); !moved && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l := leaderOf(all, p)
		moved = l != nil && l != a
	}
	if !moved {
		t.Log("the transfer did not complete; the old leader serves again")
	}
	stop.Store(true)
	wg.Wait()
	if failed.Load() {
		var msgs []string
		errs.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return true })
		t.Fatalf("writes refused during the hand-over: %q", msgs)
	}
}

// A drain with nobody to take its leads returns at once rather than at its
// deadline: a member alone in its cluster (every group's only voter) is
// stopped in no time, and still leads every group when it returns.
func TestHandOverWithNobodyToTakeTheLeads(t *testing.T) {
	n, start, _ := newGrowing(t, 0, 0)
	alone := start(true)
	eventually.NoError(t, "the member alone leads every group", func() error {
		if led, _ := alone.Partitions(); led != 1<<partition.Count-1 {
			return fmt.Errorf("leads %b", led)
		}
		return nil
	})
	n.mu.Lock()
	n.draining = alone.ID()
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := alone.HandOver(ctx); err != nil {
		t.Fatalf("hand over with nobody to take the leads: %v", err)
	}
	if led, _ := alone.Partitions(); led != 1<<partition.Count-1 {
		t.Fatalf("leads %b after the drain, want every group", led)
	}
}
