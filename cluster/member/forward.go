package member

import (
	"sync/atomic"
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

// learnedLeaders are the leaders that Moved answers taught, of partitions
// this node holds no replica of (so hears nothing of their elections):
// newer than gossip for a moment after an election, which publishes the
// new leader within about 100 ms. Each is trusted for learnedFor, then
// gossip again.
type learnedLeaders [partition.Count]atomic.Pointer[learned]

type learned struct {
	leader cluster.Leader
	at     time.Time
}

const learnedFor = 2 * time.Second

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
			case !rep.InGroup(p):
				// No replica here hears of p's elections: a Moved answer
				// taught who leads it, or gossip says, a little later.
				if l := r.m.learned[p].Load(); l != nil && time.Since(l.at) < learnedFor {
					return l.leader, true
				}
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

// Learn takes a newer leader of a partition this node holds no replica
// of; of the others it takes nothing: this node's replica of the group
// hears of every new leader itself, within a heartbeat.
func (r router) Learn(p partition.ID, l cluster.Leader) bool {
	rep := r.m.started.Load()
	if rep == nil || rep.InGroup(p) || l.Addr == "" || int(p) >= partition.Count {
		return false
	}
	if old := r.m.learned[p].Load(); old != nil && time.Since(old.at) < learnedFor && old.leader.Term >= l.Term {
		return false
	}
	r.m.learned[p].Store(&learned{leader: l, at: time.Now()})
	return true
}
