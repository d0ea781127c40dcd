package clusternode

import (
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/partition"
)

// router is the cluster.Router of forwarded requests: a partition's leader
// where replica.Route finds it (this node's replica of its group, or
// gossip when the replica's leader is no member any more, or the replica
// hears none for longer than an election, or there is no replica here),
// at the address gossip gives for it, unless a Moved taught a newer one
// (docs/cluster.md, "Forwarding"). During an election it waits up to
// leaderWait for one, so that a request meets a short failover with a
// delay rather than a 503.
type router struct{ m *Node }

// learnedLeaders are the leaders that Moved answers taught, of partitions
// this node holds no replica of (so hears nothing of their elections):
// newer than gossip for a moment after an election, which publishes the
// new leader within about 100 ms. Each is trusted for learnedFor, then
// gossip again, and not at all once gossip knows its node dead or gone.
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
			now := time.Now()
			to, term := rep.Route(p, now)
			if l, ok := r.route(to, term, r.m.learned[p].Load(), now); ok {
				return l, true
			}
		}
		if time.Now().After(deadline) {
			return cluster.Leader{}, false
		}
		time.Sleep(leaderPoll)
	}
}

// route is p's leader at now, from the route its replicas and gossip give
// (replica.Route: to, with the term its replica heard of, 0 from gossip)
// and what a Moved taught (l, maybe nil).
func (r router) route(to, term uint64, l *learned, now time.Time) (cluster.Leader, bool) {
	switch {
	case l != nil && r.m.hasDeparted(l.leader.Addr):
		// Taught before its node died or left: gossip's word is newer.
		return r.route(to, term, nil, now)
	case l.newerThan(term, now), term == 0 && l.trusted(now):
		// A Moved named the leader of a term this node's replica has not
		// heard of yet (its heartbeats are late on a busy machine, it is a
		// learner being filled), or one that gossip, which carries no
		// term, may not publish for a moment yet.
		return l.leader, true
	case to == r.m.id:
		return cluster.Leader{Addr: r.m.pt.Addr(), Term: term}, true
	case to != 0:
		if a, ok := r.m.addr(to); ok {
			return cluster.Leader{Addr: a, Term: term}, true
		}
	}
	return cluster.Leader{}, false
}

// Learn takes a newer leader of a partition: of one this node holds no
// replica of, any; of the others, only a leader of a term newer than its
// replica heard of, which hears of each new leader itself, usually within
// a heartbeat, but not always on a busy machine.
func (r router) Learn(p partition.ID, l cluster.Leader) bool {
	rep := r.m.started.Load()
	if rep == nil || l.Addr == "" || int(p) >= partition.Count || r.m.hasDeparted(l.Addr) {
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
	return l.trusted(now) && l.leader.Term > term
}

// trusted reports whether l, maybe nil, is recent enough at now to route by.
func (l *learned) trusted(now time.Time) bool {
	return l != nil && now.Sub(l.at) < learnedFor
}
