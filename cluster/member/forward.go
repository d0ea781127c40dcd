package member

import (
	"time"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/partition"
)

// router is the cluster.Router of forwarded requests: a partition's leader
// as this node's replica of its group last heard, at the address gossip
// gives for it (docs/cluster.md, "Forwarding"). During an election it
// waits up to leaderWait for one, so that a request meets a short
// failover with a delay rather than a 503.
type router struct{ m *Member }

const (
	leaderWait = 2 * time.Second       // for an election to end
	leaderPoll = 20 * time.Millisecond // how often a waiting request looks again
)

var _ cluster.Router = router{}

func (r router) Leader(p partition.ID) (cluster.Leader, bool) {
	deadline := time.Now().Add(leaderWait)
	for {
		if rep := r.m.started.Load(); rep != nil {
			to, term := rep.Leader(p)
			switch {
			case to == r.m.id:
				return cluster.Leader{Addr: r.m.pt.Addr(), Term: term}, true
			case to != 0:
				if a, ok := r.m.addr(to); ok {
					return cluster.Leader{Addr: a, Term: term}, true
				}
			case !rep.Holds(p):
				// No replica here hears of p's elections: gossip says
				// who leads it, a little later.
				if a, ok := r.m.gossipLeader(p); ok {
					return cluster.Leader{Addr: a}, true
				}
			}
		}
		if time.Now().After(deadline) {
			return cluster.Leader{}, false
		}
		time.Sleep(leaderPoll)
	}
}

// Learn takes nothing from answers: this node's replica of the group
// hears of every new leader itself, within a heartbeat.
func (router) Learn(partition.ID, cluster.Leader) bool { return false }
