package multiraft_test

import (
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
)

// A group its leader finds idle ticks only every IdleTicks (idle.go), and
// wakes as soon as anything happens in it. Each row starts from an idle
// group of three voters, does what the row says, then counts the leader's
// heartbeats to one follower over the row's ticks, checking at every tick
// that the leader keeps its lease and that no follower stood for election.
func TestIdleGroups(t *testing.T) {
	const (
		electionTicks = 10 // the defaults
		idleTicks     = 4
	)
	type roles struct{ lead, counted, other uint64 }
	tests := []struct {
		name  string
		then  func(c *cluster, r roles)
		drop  func(m multiraft.Message, r roles) bool // on top of the count
		ticks int
		want  int64 // heartbeats to the counted follower
	}{
		{name: "an idle group's leader heartbeats every IdleTicks and keeps its lease",
			ticks: 40, want: 40 / idleTicks},
		{name: "a proposal wakes it",
			then:  func(c *cluster, _ roles) { c.propose(0, "wake") },
			ticks: 8, want: 8},
		{name: "a voter that stops answering wakes it",
			then:  func(c *cluster, r roles) { c.net.Isolate(r.other); c.tick(2*idleTicks + 1) },
			ticks: 8, want: 8},
		{name: "a follower that lacks entries keeps it awake",
			drop: func(m multiraft.Message, r roles) bool { return m.Msg.Type == pb.MsgApp && m.Msg.To == r.other },
			then: func(c *cluster, _ roles) {
				c.propose(0, "not for every follower")
				c.tick(electionTicks + idleTicks)
			},
			ticks: 8, want: 8},
		{name: "a leadership transfer wakes it",
			// Held, so that the transfer stays under way.
			drop: func(m multiraft.Message, r roles) bool { return m.Msg.Type == pb.MsgTimeoutNow },
			then: func(c *cluster, r roles) {
				if err := c.nodes[r.lead].node.TransferLeadership(0, r.other); err != nil {
					c.t.Fatal(err)
				}
			},
			ticks: 8, want: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, []uint64{1, 2, 3}, nil)
			c.bootstrap(1, []uint64{1, 2, 3})
			c.elect(1)
			c.propose(0, "first")
			c.waitEqual(0)
			r := roles{lead: c.leader(0)}
			for _, id := range []uint64{1, 2, 3} {
				if id == r.lead {
					continue
				}
				if r.counted == 0 {
					r.counted = id
				} else {
					r.other = id
				}
			}
			leader := c.nodes[r.lead].node
			c.tick(electionTicks + idleTicks)
			if got := leader.Stats().IdleGroups; got != 1 {
				t.Fatalf("after %d quiet ticks the leader finds %d groups idle, want 1", electionTicks+idleTicks, got)
			}
			term := status(t, leader).Term

			var heartbeats atomic.Int64
			c.net.Drop(func(m multiraft.Message) bool {
				if tt.drop != nil && tt.drop(m, r) {
					return true
				}
				if m.Msg.Type == pb.MsgHeartbeat && m.Msg.From == r.lead && m.Msg.To == r.counted {
					heartbeats.Add(1)
				}
				return false
			})
			if tt.then != nil {
				tt.then(c, r)
			}
			heartbeats.Store(0)
			for i := range tt.ticks {
				c.tickOne(c.live()...)
				if tt.then == nil && !leader.LeaseValid(0) {
					t.Fatalf("tick %d: the idle leader has no lease", i+1)
				}
			}
			if got := heartbeats.Load(); got != tt.want {
				t.Errorf("%d heartbeats to a follower over %d ticks, want %d", got, tt.ticks, tt.want)
			}
			for _, m := range c.live() {
				if st := status(t, m.node); st.Term != term {
					t.Errorf("node %d is at term %d, the idle group was at %d", m.id, st.Term, term)
				}
			}
		})
	}
}

func status(t *testing.T, n *multiraft.Node) multiraft.Status {
	t.Helper()
	st, err := n.Status(0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
