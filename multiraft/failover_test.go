package multiraft_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
)

// A leader cut off from its followers: its lease ends before another node
// can be elected (LeaseTicks < ElectionTicks, counted in ticks), a new
// leader is elected, the old leader's pending proposal fails with
// ErrLeadershipLost and never commits anywhere.
func TestIsolatedLeaderLosesLeaseBeforeNewLeader(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil) // ElectionTicks 10, LeaseTicks 8
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	c.tick(2) // a heartbeat round answered by a quorum
	old := c.nodes[c.leader(0)]
	if !old.node.LeaseValid(0) {
		t.Fatal("a leader whose heartbeats a quorum answered holds no lease")
	}

	c.net.Isolate(old.id)
	appended := func() uint64 {
		st, err := old.node.Status(0)
		if err != nil {
			t.Fatal(err)
		}
		return st.Match[old.id]
	}
	before := appended()
	done := make(chan error, 1)
	go func() {
		_, err := old.node.Propose(context.Background(), 0, []byte("lost"))
		done <- err
	}()
	// In its leader's log before the clock moves: a proposal that came
	// after the step-down would fail as sent to a follower instead.
	eventually.True(t, "the proposal in the isolated leader's log", func() bool { return appended() > before })

	leaseEnd, elected := -1, -1
	var newLeader uint64
	var perr error
	steppedDown := func() bool {
		st, err := old.node.Status(0)
		return err == nil && st.Leader != old.id
	}
	for k := 1; k <= 60 && (leaseEnd < 0 || elected < 0 || !steppedDown()); k++ {
		c.tickOne(c.live()...)
		if leaseEnd < 0 && !old.node.LeaseValid(0) {
			leaseEnd = k
		}
		for _, m := range c.live() {
			if st, _ := m.node.Status(0); m.id != old.id && st.Leader == m.id && elected < 0 {
				elected, newLeader = k, m.id
				if old.node.LeaseValid(0) {
					t.Fatalf("tick %d: node %d elected while the old leader's lease is valid", k, m.id)
				}
			}
		}
	}
	// The proposal fails when the old leader steps down (its check of a
	// quorum, on a tick of its own: possibly after the new leader's
	// election); its caller hears of it on a goroutine of its own.
	select {
	case perr = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the isolated leader's pending proposal never returned")
	}
	t.Logf("after isolation: lease ended at tick %d, new leader %d elected at tick %d", leaseEnd, newLeader, elected)
	if leaseEnd < 0 || elected < 0 || leaseEnd >= elected {
		t.Fatalf("lease ended at tick %d, new leader at tick %d: the lease must end first", leaseEnd, elected)
	}
	if !errors.Is(perr, multiraft.ErrLeadershipLost) {
		t.Fatalf("pending proposal of the old leader: err = %v, want ErrLeadershipLost", perr)
	}

	if !stepsDown(old) {
		t.Fatalf("the old leader's consumer was not told it stepped down: %v", old.leaderChanges())
	}

	c.net.Heal()
	c.elect(1)
	c.propose(0, "after")
	recs := c.waitEqual(0)
	for idx, v := range recs {
		if v == "lost" {
			t.Fatalf("the isolated leader's entry was committed at %d", idx)
		}
	}
	if st, _ := old.node.Status(0); st.Leader != newLeader {
		t.Fatalf("old leader follows %d, want %d", st.Leader, newLeader)
	}
}

// TransferLeadership moves the leader, and the old leader's lease ends at
// once (the new leader is elected without waiting out any lease).
func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	c.tick(2)
	old := c.leader(0)
	to := old%3 + 1
	if err := c.nodes[to].node.TransferLeadership(0, to); err == nil {
		t.Fatal("a follower started a transfer")
	}
	if err := c.nodes[old].node.TransferLeadership(0, to); err != nil {
		t.Fatal(err)
	}
	if c.nodes[old].node.LeaseValid(0) {
		t.Fatal("the lease outlives the start of a transfer")
	}
	c.transferredTo(to, 20)
	c.propose(0, "x")
}

// A transfer moves the leader in a group of five voters too: the old
// leader holds raft's TimeoutNow until a heartbeat naming the target
// reached enough voters, which grant its forced votes (transfer.go).
func TestTransferLeadershipAmongFiveVoters(t *testing.T) {
	ids := []uint64{1, 2, 3, 4, 5}
	c := newCluster(t, ids, nil)
	c.bootstrap(1, ids)
	c.elect(1)
	c.tick(2)
	old := c.leader(0)
	to := old%5 + 1
	if err := c.nodes[old].node.TransferLeadership(0, to); err != nil {
		t.Fatal(err)
	}
	c.transferredTo(to, 5)
	c.propose(0, "x")
}

// A transfer the other voters cannot all be told of still moves the
// leader: in a group of two there is no one else to tell, and a voter
// that does not answer holds the TimeoutNow a few ticks at most.
func TestTransferLeadershipWithNoOneElseToTell(t *testing.T) {
	for _, tc := range []struct {
		name   string
		voters []uint64
		down   bool // the voter that is neither leader nor target is stopped
	}{
		{"two voters", []uint64{1, 2}, false},
		{"three voters, the third down", []uint64{1, 2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.voters, nil)
			c.bootstrap(1, tc.voters)
			c.elect(1)
			c.tick(2)
			old := c.leader(0)
			to := tc.voters[0]
			if to == old {
				to = tc.voters[1]
			}
			if tc.down {
				c.stop(6 - old - to)
			}
			if err := c.nodes[old].node.TransferLeadership(0, to); err != nil {
				t.Fatal(err)
			}
			c.transferredTo(to, 8) // under an election timeout: raft would give it up
		})
	}
}

// A transfer raft gave up on (its target paused past an election timeout)
// and then acted on late: the target's forced campaign finds the other
// voter refusing, since the heartbeats it heard since named no transfer,
// and elects nobody while the old leader, which did not hear the campaign,
// holds a lease from that voter's answers. The lease counts only answers
// to heartbeats that named no target, and a late copy of a named one does
// not name the target again.
func TestALateTransferElectsNobodyUnderTheLease(t *testing.T) {
	unnamedTo := func(x, z uint64) func(multiraft.Message) bool {
		return func(m multiraft.Message) bool {
			return m.Msg.From == x && m.Msg.To == z && m.Msg.Type == pb.MsgHeartbeat && len(m.Msg.Context) == 16
		}
	}
	for _, tc := range []struct {
		name string
		// meddle, set before the transfer is given up, returns what to
		// deliver to z late, once x holds its lease again.
		meddle func(c *cluster, x, z uint64) (late func() *multiraft.Message)
	}{
		{"every heartbeat arrives", nil},
		{"the first heartbeat naming no target is lost on its way to the third voter", func(c *cluster, x, z uint64) func() *multiraft.Message {
			var lost atomic.Bool
			drop := unnamedTo(x, z)
			c.net.Drop(func(m multiraft.Message) bool { return drop(m) && !lost.Swap(true) })
			return nil
		}},
		{"a copy of a heartbeat naming the target reaches the third voter late", func(c *cluster, x, z uint64) func() *multiraft.Message {
			var mu sync.Mutex
			var named *multiraft.Message
			c.net.Drop(func(m multiraft.Message) bool {
				if m.Msg.From == x && m.Msg.To == z && m.Msg.Type == pb.MsgHeartbeat && len(m.Msg.Context) == 24 {
					mu.Lock()
					cp := m
					cp.Msg.Context = slices.Clone(m.Msg.Context)
					named = &cp
					mu.Unlock()
				}
				return false
			})
			return func() *multiraft.Message { mu.Lock(); defer mu.Unlock(); return named }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, x, y := threeVoters(t)
			z := c.nodes[6-x.id-y.id]
			c.net.Hold(y.id) // paused: what is sent to it waits, the TimeoutNow too
			if err := x.node.TransferLeadership(0, y.id); err != nil {
				t.Fatal(err)
			}
			c.settle()
			var late func() *multiraft.Message
			if tc.meddle != nil {
				late = tc.meddle(c, x.id, z.id)
			}
			// Until the lease is back: raft gave the transfer up (an
			// election timeout) and the leader counted the answers it may.
			for i := 0; i < 30 && !x.node.LeaseValid(0); i++ {
				c.tickOne(x, z)
			}
			if st, _ := x.node.Status(0); st.Leader != x.id || !x.node.LeaseValid(0) {
				t.Fatalf("after the transfer was given up: leader %d, lease %v; want %d under a lease", st.Leader, x.node.LeaseValid(0), x.id)
			}
			c.net.Hold(x.id) // the old leader hears nothing from now on
			if late != nil {
				m := late()
				if m == nil {
					t.Fatal("no heartbeat named the target")
				}
				if err := z.node.Step(*m); err != nil {
					t.Fatal(err)
				}
			}
			c.net.Release(y.id) // the late TimeoutNow, then the heartbeats
			c.settle()
			sy, _ := y.node.Status(0)
			if sy.Leader == y.id && x.node.LeaseValid(0) {
				t.Fatalf("node %d leads term %d while node %d still holds its lease", y.id, sy.Term, x.id)
			}
			if z.node.Stats().ForcedVotesRefused == 0 {
				t.Fatalf("node %d granted the late campaign its vote", z.id)
			}
			c.net.Release(x.id)
		})
	}
}

// A hand-over asks its transfer again until it is done (replica.HandOver,
// every 50 ms): raft goes on with the transfer under way and sends no
// other TimeoutNow, so the one held for it stays, and the leader moves.
func TestATransferAskedAgainMovesTheLeader(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("the third voter down: %v", down), func(t *testing.T) {
			c, x, y := threeVoters(t)
			if down {
				c.stop(6 - x.id - y.id)
			}
			for i := 0; i < 8 && c.leader(0) != y.id; i++ { // under an election timeout
				for range 2 {
					if err := x.node.TransferLeadership(0, y.id); err != nil {
						break // no longer the leader
					}
					c.settle()
				}
				c.tickOne(c.live()...)
			}
			if got := c.leader(0); got != y.id {
				t.Fatalf("leader %d after the transfer was asked twice a tick, want %d", got, y.id)
			}
		})
	}
}

// A node closed and opened again on its directory has its state and log,
// and catches up with what it missed.
func TestRestartKeepsStateAndCatchesUp(t *testing.T) {
	const groups = 4
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(groups, []uint64{1, 2, 3})
	c.elect(groups)
	for g := range groups {
		for range 5 {
			c.propose(multiraft.GroupID(g), "before")
		}
		c.waitEqual(multiraft.GroupID(g))
	}
	before := map[multiraft.GroupID]multiraft.Status{}
	for g := range groups {
		before[multiraft.GroupID(g)], _ = c.nodes[3].node.Status(multiraft.GroupID(g))
	}
	fs := c.nodes[3].fs
	c.stop(3)
	c.elect(groups)
	for g := range groups {
		c.propose(multiraft.GroupID(g), "while down")
	}

	m := c.start(3, fs)
	for g := range groups {
		st, err := m.node.Status(multiraft.GroupID(g))
		if err != nil {
			t.Fatal(err)
		}
		was := before[multiraft.GroupID(g)]
		// The commit index on disk is the one of the last term or vote: the
		// leader tells the rest (below).
		if st.Term < was.Term || len(st.Voters) != 3 {
			t.Fatalf("group %d after restart: %+v, before: %+v", g, st, was)
		}
		recs, _ := m.kv.Records(multiraft.GroupID(g))
		if len(recs) != 5 {
			t.Fatalf("group %d after restart: %d records, want 5", g, len(recs))
		}
	}
	for g := range groups {
		if recs := c.waitEqual(multiraft.GroupID(g)); len(recs) != 6 {
			t.Fatalf("group %d: %d records after catching up, want 6", g, len(recs))
		}
		if st, _ := m.node.Status(multiraft.GroupID(g)); st.Commit < before[multiraft.GroupID(g)].Commit+1 {
			t.Fatalf("group %d after catching up: commit %d, want past %d", g, st.Commit, before[multiraft.GroupID(g)].Commit)
		}
	}
}

func proposeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// stepsDown polls what m's consumer heard: that m stopped leading group 0
// (a change naming another leader or none) after it had led it.
func stepsDown(m *member) bool {
	return eventually.Holds(eventually.Within, func() bool {
		led := false
		for _, lc := range m.leaderChanges() {
			if lc.Group != 0 {
				continue
			}
			if lc.Leader == m.id {
				led = true
			} else if led {
				return true
			}
		}
		return false
	})
}

// With TickInterval, the lease is also bounded in monotonic time: a node
// whose ticks say the lease holds but whose clock says it ran out (a pause)
// does not trust it.
func TestLeaseBoundedInTime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     bool
	}{
		{"a lease past its time is not valid, whatever the ticks say", time.Nanosecond, false},
		{"a lease within its time is valid", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []uint64{1, 2, 3}, func(cfg *multiraft.Config) { cfg.TickInterval = tc.interval })
			c.bootstrap(1, []uint64{1, 2, 3})
			c.elect(1)
			c.tick(2)
			if got := c.nodes[c.leader(0)].node.LeaseValid(0); got != tc.want {
				t.Fatalf("LeaseValid = %v, want %v", got, tc.want)
			}
		})
	}
}

// A transfer raft gives up between ticks, when a removal of its target
// commits, gives no lease from answers to heartbeats sent in the tick the
// transfer was asked (before it was asked): their voters heard the
// heartbeats naming the target since, and grant its late campaign. The
// lease waits for answers to heartbeats sent after the driver saw the
// transfer end.
func TestATransferGivenUpByARemovalGivesNoLeaseFromEarlierAnswers(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3, 4, 5}, nil)
	c.bootstrap(1, []uint64{1, 2, 3, 4, 5})
	c.elect(1)
	c.tick(2)
	x := c.nodes[c.leader(0)]
	var others []*member
	for _, id := range c.ids {
		if id != x.id {
			others = append(others, c.nodes[id])
		}
	}
	y, z, a := others[0], others[1], others[2]

	var capture, dropAppResp, xOut, yToX atomic.Bool
	var mu sync.Mutex
	var stale []multiraft.Message
	c.net.Drop(func(m multiraft.Message) bool {
		f, to, typ := m.Msg.From, m.Msg.To, m.Msg.Type
		switch {
		case capture.Load() && to == x.id && (f == z.id || f == a.id) && typ == pb.MsgHeartbeatResp && len(m.Msg.Context) == 16:
			b, _ := m.Msg.Marshal()
			cp := multiraft.Message{Group: m.Group}
			_ = cp.Msg.Unmarshal(b)
			mu.Lock()
			stale = append(stale, cp)
			mu.Unlock()
			return true
		case dropAppResp.Load() && to == x.id && f != y.id && typ == pb.MsgAppResp:
			return true
		case xOut.Load() && f == x.id:
			return true
		case yToX.Load() && f == y.id && to == x.id:
			return true
		}
		return false
	})

	// Tick T: x heartbeats; z's and a's answers are late.
	capture.Store(true)
	c.tickOne(x)
	capture.Store(false)
	if len(stale) != 2 {
		t.Fatalf("captured %d answers", len(stale))
	}
	// The removal of y, replicated to all but acknowledged by y alone.
	dropAppResp.Store(true)
	removed := make(chan error, 1)
	before, _ := x.node.Status(0)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		removed <- x.node.RemoveReplica(ctx, 0, y.id)
	}()
	eventually.True(t, "the removal proposed", func() bool {
		st, _ := x.node.Status(0)
		return st.Match[x.id] > before.Match[x.id]
	})
	c.settle()
	// Still tick T: the transfer to y, whose TimeoutNow waits at y.
	c.net.Hold(y.id)
	yToX.Store(true)
	if err := x.node.TransferLeadership(0, y.id); err != nil {
		t.Fatal(err)
	}
	c.settle()
	for _, m := range stale { // the late answers
		if err := x.node.Step(m); err != nil {
			t.Fatal(err)
		}
	}
	c.settle()
	c.tickOne(x) // T+1: heartbeats name y; z, a, b answer: the TimeoutNow goes
	dropAppResp.Store(false)
	c.tickOne(x) // T+2: the removal commits, raft aborts the transfer
	select {
	case err := <-removed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the removal did not commit")
	}
	xOut.Store(true)    // x's next heartbeats are lost
	c.tickOne(x)        // T+3
	c.net.Release(y.id) // the TimeoutNow
	c.settle()
	sz, _ := z.node.Status(0)
	sx, _ := x.node.Status(0)
	if sz.Leader == y.id && sz.Term > sx.Term && x.node.LeaseValid(0) {
		t.Fatalf("node %d was elected in term %d (node %d follows it) while node %d, term %d, holds its lease", y.id, sz.Term, z.id, x.id, sx.Term)
	}
	c.net.Heal()
}

// transferredTo ticks every live node until node to leads group 0, at
// most ticks times, and fails unless it does, or if any node refused a
// vote of the transfer, which its leader announced (transfer.go).
func (c *cluster) transferredTo(to uint64, ticks int) {
	c.t.Helper()
	for range ticks {
		if c.leader(0) == to {
			break
		}
		c.tickOne(c.live()...)
	}
	if got := c.leader(0); got != to {
		c.t.Fatalf("leader %d after the transfer, want %d", got, to)
	}
	for _, m := range c.live() {
		if n := m.node.Stats().ForcedVotesRefused; n != 0 {
			c.t.Fatalf("node %d refused %d of the announced transfer's votes", m.id, n)
		}
	}
}

// threeVoters is a cluster of three voters of group 0, elected and past
// its first heartbeats: its leader x, and the voter y after it.
func threeVoters(t *testing.T) (c *cluster, x, y *member) {
	t.Helper()
	c = newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	c.tick(2)
	x = c.nodes[c.leader(0)]
	return c, x, c.nodes[x.id%3+1]
}
