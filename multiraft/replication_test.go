package multiraft_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kitd/kitd/multiraft"
)

// Three nodes, 64 groups: every group elects one leader, and what its
// leader applies every replica applies identically.
func TestGroupsElectAndReplicate(t *testing.T) {
	const groups = 64
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(groups, []uint64{1, 2, 3})
	c.elect(groups)
	leaders := map[uint64]int{}
	for g := range groups {
		leaders[c.leader(multiraft.GroupID(g))]++
		for i := range 3 {
			c.propose(multiraft.GroupID(g), string(rune('a'+i))+"-"+string(rune('A'+g%26)))
		}
	}
	t.Logf("leaderships per node: %v", leaders)
	for g := range groups {
		recs := c.waitEqual(multiraft.GroupID(g))
		if len(recs) != 3 {
			t.Fatalf("group %d: %d records, want 3", g, len(recs))
		}
	}
}

// A proposal on a follower is refused with the leader's name.
func TestProposeOnFollowerNamesLeader(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	lead := c.leader(0)
	for _, m := range c.live() {
		if m.id == lead {
			continue
		}
		_, err := m.node.Propose(context.Background(), 0, []byte("x"))
		nl, ok := isNotLeader(err)
		if !ok {
			t.Fatalf("node %d: err = %v, want *NotLeaderError", m.id, err)
		}
		if nl.Leader != lead || nl.Group != 0 || nl.Term == 0 {
			t.Fatalf("node %d: %+v, want leader %d", m.id, nl, lead)
		}
	}
	if _, err := c.nodes[lead].node.Propose(context.Background(), 7, []byte("x")); err != multiraft.ErrUnknownGroup {
		t.Fatalf("unknown group: err = %v", err)
	}
}

// Raft retries what the network loses: with a third of all messages
// dropped, every proposal is still applied identically everywhere.
func TestReplicatesThroughLossyNetwork(t *testing.T) {
	const groups, proposals = 4, 10
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(groups, []uint64{1, 2, 3})
	c.elect(groups)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	c.net.Drop(func(multiraft.Message) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(3) == 0
	})
	ctx, cancel := proposeCtx()
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := range groups {
		lead := c.nodes[c.leader(multiraft.GroupID(g))]
		for i := range proposals {
			wg.Go(func() {
				if _, err := lead.node.Propose(ctx, multiraft.GroupID(g), []byte{byte(i)}); err != nil {
					failed.Add(1)
				}
			})
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		default:
			c.tickOne(c.live()...) // retransmissions ride on heartbeats
		}
	}
	c.net.Heal()
	for g := range groups {
		recs := c.waitEqual(multiraft.GroupID(g))
		if got := len(recs) + int(failed.Load()); got < proposals {
			t.Fatalf("group %d: %d records", g, len(recs))
		}
	}
	t.Logf("%d of %d proposals lost leadership on the way", failed.Load(), groups*proposals)
}
