package membership

import (
	"fmt"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

func TestStalledConsumerDoesNotStopGossip(t *testing.T) {
	nodes := startCluster(t, 3)
	// Nobody reads n0's events from here on.
	const updates = 20
	for i := 1; i <= updates; i++ {
		if err := nodes[1].UpdateMeta(func(m *Meta) { m.Led, m.Replicated = Partitions(i), Partitions(i) }); err != nil {
			t.Fatal(err)
		}
	}
	n3 := startNode(t, "n3", joining(nodes[0].Addr()))
	eventually.TrueWithin(t, convergeWithin, "every node sees n1's last update and n3, n0 included", func() bool {
		for _, n := range append(nodes, n3) {
			a, _ := n.node("n1")
			b, _ := n.node("n3")
			if a.Meta.Led != updates || b.State != StateAlive {
				return false
			}
		}
		return true
	})
	// Polled, not checked once: a busy machine may make anyone briefly
	// suspect; a node whose gossip is stuck would stay so, then dead.
	eventually.TrueWithin(t, convergeWithin, "n1 and n2 see n0 alive while its consumer is stalled", func() bool {
		a, _ := nodes[1].node("n0")
		b, _ := nodes[2].node("n0")
		return a.State == StateAlive && b.State == StateAlive
	})
	// What waited for the consumer is one event per node, each node's
	// latest: the 20 updates of n1 are folded into its join.
	got := map[string]Event{}
	timeout := time.After(convergeWithin)
	for len(got) < 4 {
		select {
		case ev := <-nodes[0].Events():
			if _, dup := got[ev.Node.Name]; dup {
				t.Fatalf("a second event for %s before the other nodes': %v", ev.Node.Name, ev)
			}
			got[ev.Node.Name] = ev
		case <-timeout:
			t.Fatalf("the stalled consumer got %v", got)
		}
	}
	for i := range 4 {
		if ev := got[fmt.Sprint("n", i)]; ev.Kind != EventJoin {
			t.Fatalf("n%d: %v, want a join", i, ev)
		}
	}
	if ev := got["n1"]; ev.Node.Meta.Led != updates {
		t.Fatalf("n1's event carries Led %d, want the last update's %d", ev.Node.Meta.Led, updates)
	}
}
