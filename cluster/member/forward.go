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
			if l := r.m.learned[p].Load(); l.newerThan(term, time.Now()) {
				// A Moved named the leader of a term this node's replica
				// has not heard of yet (its heartbeats are late on a busy
				// machine, or it is a learner being filled).
				return l.leader, true
			}
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

// Learn takes a newer leader of a partition: of one this node holds no
// replica of, any; of the others, only a leader of a term newer than its
// replica heard of, which hears of each new leader itself, usually within
// a heartbeat, but not always on a busy machine.
func (r router) Learn(p partition.ID, l cluster.Leader) bool {
	rep := r.m.started.Load()
	if rep == nil || l.Addr == "" || int(p) >= partition.Count {
		return false
	}
	now := time.Now()
	var heard uint64 // the term of the leader this node's replica follows
	if rep.InGroup(p) {
		_, heard = rep.Leader(p)
	}
	if !mayLearn(rep.InGroup(p), heard, r.m.learned[p].Load(), l, now) {
		return false
	}
	r.m.learned[p].Store(&learned{leader: l, at: now})
	return true
}

// mayLearn says whether a Moved's leader l replaces what this node knows
// of its partition: its replica's leader of term heard when it holds one,
// and what an earlier Moved taught (old, maybe nil).
func mayLearn(inGroup bool, heard uint64, old *learned, l cluster.Leader, now time.Time) bool {
	if inGroup && l.Term <= heard {
		return false
	}
	trusted := old != nil && now.Sub(old.at) < learnedFor
	return !trusted || l.Term > old.leader.Term // while trusted, old yields only to a newer term
}

// newerThan reports whether l is still trusted at now and of a term newer
// than term.
func (l *learned) newerThan(term uint64, now time.Time) bool {
	return l != nil && now.Sub(l.at) < learnedFor && l.leader.Term > term
}
