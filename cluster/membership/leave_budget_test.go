package membership

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kitd/kitd/internal/eventually"
)

// A member of the build before the goodbye's answers (a rolling upgrade)
// takes the goodbye and never answers it. Leave's ctx bounds the whole
// leave (Drain gives it 2 s): the wait for answers takes half of it, the
// broadcast the rest, never a whole deadline each.
func TestLeaveWithASilentMemberKeepsItsDeadline(t *testing.T) {
	// Gossip rounds of 200 ms, so that ten of them (the broadcast's own
	// bound) are past the deadline, which alone bounds the leave.
	tm := LocalTiming()
	tm.GossipInterval = 200 * time.Millisecond
	nodes := startCluster(t, 2, withTiming(tm))
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = "old-build", "127.0.0.1", 0, 0
	mc.GossipInterval, mc.ProbeInterval = tm.GossipInterval, tm.ProbeInterval
	mc.Logger = log.New(io.Discard, "", 0)
	old, err := memberlist.Create(mc) // no delegate: a goodbye is taken and not answered
	if err != nil {
		t.Fatal(err)
	}
	defer old.Shutdown()
	if _, err := old.Join([]string{nodes[0].Addr()}); err != nil {
		t.Fatal(err)
	}
	eventually.TrueWithin(t, convergeWithin, "n1 sees the old-build member", func() bool { return nodes[1].ml.NumMembers() == 3 })

	// Waiting a whole deadline for the answers, the broadcast's gossip
	// rounds came after it: 1.18-1.38 s; within the budget, 0.6-0.8 s.
	const deadline = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	if err := nodes[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Leave took %v with a %v deadline; answers %d", took, deadline, nodes[1].answered.Load())
	if took > deadline+deadline/10 {
		t.Fatalf("Leave took %v, past its ctx deadline of %v", took, deadline)
	}
}
