package clusternode

import (
	"testing"
	"time"

	"github.com/kitd/kitd/cluster"
)

func TestWhatAMovedTeaches(t *testing.T) {
	now := time.Unix(1000, 0)
	fresh := func(term uint64) *learned {
		return &learned{leader: cluster.Leader{Addr: "old", Term: term}, at: now.Add(-learnedFor / 2)}
	}
	stale := &learned{leader: cluster.Leader{Addr: "old", Term: 9}, at: now.Add(-learnedFor)}
	for _, tc := range []struct {
		name    string
		inGroup bool
		heard   uint64
		old     *learned
		term    uint64 // the Moved's
		learn   bool
	}{
		{"no replica here: a leader of any term is learnt", false, 0, nil, 0, true},
		{"no replica here: a newer term replaces what a Moved taught", false, 0, fresh(2), 3, true},
		{"no replica here: the same term does not", false, 0, fresh(3), 3, false},
		{"no replica here: what a Moved taught is forgotten after a while", false, 0, stale, 1, true},
		{"a replica here: a term it has heard of teaches nothing", true, 3, nil, 3, false},
		{"a replica here: a term newer than it heard of is learnt (its heartbeats are late)", true, 2, nil, 3, true},
		{"a replica here: a newer term still yields to what a Moved taught of a newer one", true, 2, fresh(5), 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayLearn(tc.inGroup, tc.heard, tc.old, cluster.Leader{Addr: "new", Term: tc.term}, now); got != tc.learn {
				t.Fatalf("mayLearn = %v, want %v", got, tc.learn)
			}
		})
	}
}

func TestALearntLeaderOverridesItsReplicaOnlyWhenNewer(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &learned{leader: cluster.Leader{Addr: "b", Term: 4}, at: now.Add(-time.Second)}
	for _, tc := range []struct {
		name  string
		l     *learned
		heard uint64
		at    time.Time
		want  bool
	}{
		{"a newer term than the replica heard of", l, 3, now, true},
		{"the term the replica heard of", l, 4, now, false},
		{"nothing learnt", nil, 0, now, false},
		{"learnt too long ago", l, 3, now.Add(learnedFor), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.newerThan(tc.heard, tc.at); got != tc.want {
				t.Fatalf("newerThan = %v, want %v", got, tc.want)
			}
		})
	}
}

// A leader a Moved taught routes nothing once gossip knows its node dead
// or gone: a departed node is never routed to, not even for the moment a
// Moved is trusted.
func TestALearntLeaderOfADepartedNodeRoutesNothing(t *testing.T) {
	now := time.Unix(1000, 0)
	taught := &learned{leader: cluster.Leader{Addr: "127.0.0.1:7009", Term: 6}, at: now.Add(-time.Second)}
	for _, tc := range []struct {
		name     string
		departed bool
		term     uint64 // the term this node's replica heard of; 0: gossip's route
		want     string
	}{
		{"a live node's, newer than the replica heard of", false, 5, "127.0.0.1:7009"},
		{"a live node's, over gossip", false, 0, "127.0.0.1:7009"},
		{"a departed node's, newer than the replica heard of", true, 5, "127.0.0.1:7002"},
		{"a departed node's, over gossip", true, 0, "127.0.0.1:7002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Node{id: 1}
			dir := map[uint64]string{2: "127.0.0.1:7002"}
			m.dir.Store(&dir)
			departed := map[string]bool{"127.0.0.1:7009": tc.departed}
			m.departed.Store(&departed)
			l, ok := router{m}.route(2, tc.term, taught, now)
			if !ok || l.Addr != tc.want {
				t.Fatalf("route = %v, %v; want %s", l, ok, tc.want)
			}
		})
	}
}
