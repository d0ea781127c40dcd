package multiraft_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
)

// An append that only tells a follower a higher commit index is not sent
// (appends.go): raft sends one to every follower each time the commit
// index rises, and each is answered. The followers learn the index from
// the next heartbeat instead, and apply what the leader applied.
func TestAnAppendTellingOnlyTheCommitIndexIsNotSent(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	lead := c.leader(0)
	c.propose(0, "first") // its commit tells every follower the configuration is committed
	c.waitEqual(0)

	before := c.nodes[lead].node.Stats()
	var empty, withEntries atomic.Int64
	c.net.Drop(func(m multiraft.Message) bool {
		if m.Msg.Type == pb.MsgApp && m.Msg.From == lead {
			if len(m.Msg.Entries) == 0 {
				empty.Add(1)
			} else {
				withEntries.Add(1)
			}
		}
		return false
	})
	const proposals = 10
	for i := range proposals {
		c.propose(0, fmt.Sprint(i))
		c.settle()
	}
	if empty.Load() != 0 || withEntries.Load() != 2*proposals {
		t.Fatalf("the leader sent %d empty appends and %d with entries, want 0 and %d", empty.Load(), withEntries.Load(), 2*proposals)
	}
	// Two a proposal: the commit index it raised, to each follower.
	after := c.nodes[lead].node.Stats()
	if got := after.UnsentCommitOnly - before.UnsentCommitOnly; got != 2*proposals {
		t.Errorf("the leader counted %d appends not sent, want %d", got, 2*proposals)
	}
	if after.MessagesSent-before.MessagesSent < 2*proposals {
		t.Errorf("the leader counted %d messages sent, want at least its %d appends", after.MessagesSent-before.MessagesSent, 2*proposals)
	}
	c.tickOne(c.live()...)
	if err := sameRecords(0, c.live()); err != nil {
		t.Fatalf("after one heartbeat: %v", err)
	}
}
