package raftnet_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/cluster/raftnet"
	"github.com/kitd/kitd/multiraft"
)

// One group on three nodes, their raft messages and snapshots carried by
// raftnet over real peer transports on loopback (mTLS from a test cluster
// key), each node on an in-memory store with a clock moved by hand.
func TestGroupOverLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"three nodes elect a leader and replicate every proposal", threeNodesReplicate},
		{"a learner catches up from a snapshot streamed in chunks, then is promoted", learnerCatchesUp(false)},
		{"a node added to a group it does not hold joins through OnUnknownGroup", learnerCatchesUp(true)},
		{"a node cut off loses its leadership, the others go on, and it catches up when healed", cutOffNodeCatchesUp},
	} {
		t.Run(tc.name, tc.run)
	}
}

func threeNodesReplicate(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, options{}, nil)
	c.bootstrap(0, 1, 2, 3)
	c.elect(0, c.all()...)
	for i := range 20 {
		c.propose(0, "proposal "+string(rune('a'+i)), c.all()...)
	}
	recs := c.waitEqual(0, c.all()...)
	if len(recs) != 20 {
		t.Fatalf("%d records on every node, want 20", len(recs))
	}
	for _, m := range c.all() {
		st := m.net.Stats()
		if st.Sent == 0 || st.Received == 0 || st.Refused != 0 {
			t.Fatalf("node %d: %+v", m.id, st)
		}
	}
}

const chunk = 4 << 10

func bigValue(i int) string { return strings.Repeat(string(rune('a'+i%26)), 3000) }

// learnerCatchesUp adds node 4 to a group whose log was compacted, so it
// can only catch up from a snapshot; byHook: node 4 joins the group when
// the leader's first message for it arrives, not beforehand.
func learnerCatchesUp(byHook bool) func(t *testing.T) {
	return func(t *testing.T) {
		c := newCluster(t, []uint64{1, 2, 3}, options{chunk: chunk},
			func(cfg *multiraft.Config) { cfg.CompactAfter = 4 })
		c.bootstrap(0, 1, 2, 3)
		voters := c.all()
		for i := range 20 {
			c.propose(0, bigValue(i), voters...)
		}
		if byHook {
			joined := make(chan error, 1)
			c.o.edit = func(cfg *raftnet.Config) {
				node := func() *multiraft.Node { return c.members[4].node }
				cfg.OnUnknownGroup = func(g multiraft.GroupID, from uint64) {
					// Off the read loop: Join waits for the driver. Every
					// message until then calls the hook again, and a Join
					// after the first finds the group there.
					go func() {
						err := node().Join(g)
						if errors.Is(err, multiraft.ErrGroupExists) {
							return
						}
						select {
						case joined <- err:
						default:
						}
					}()
				}
			}
			defer func() {
				select {
				case err := <-joined:
					if err != nil {
						t.Errorf("join by the hook: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("the hook never joined the group")
				}
			}()
		}
		n4 := c.start(4)
		if !byHook {
			if err := n4.node.Join(0); err != nil {
				t.Fatal(err)
			}
		}
		lead := c.members[c.elect(0, voters...)]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := lead.node.AddLearner(ctx, 0, 4); err != nil {
			t.Fatal(err)
		}
		c.propose(0, "after the learner", voters...)
		recs := c.waitEqual(0, c.all()...)
		if len(recs) != 21 {
			t.Fatalf("%d records, want 21", len(recs))
		}
		// The sender hears that the snapshot was taken after the receiver
		// has it: wait for that too.
		var sent raftnet.Stats // by whichever voter led when the learner needed it
		for deadline := time.Now().Add(10 * time.Second); sent.SnapshotsSent == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polling: the stream's end is on the wire
			sent = raftnet.Stats{}
			for _, m := range voters {
				st := m.net.Stats()
				sent.SnapshotsSent += st.SnapshotsSent
				sent.Chunks += st.Chunks
			}
		}
		// The state is 20 values of 3,000 bytes: several chunks of at most
		// chunk bytes (the peer transport refuses a larger one).
		if sent.SnapshotsSent == 0 || sent.Chunks < 20*3000/chunk {
			t.Fatalf("the leader sent %d snapshots in %d chunks", sent.SnapshotsSent, sent.Chunks)
		}
		if byHook && n4.net.Stats().UnknownGroup == 0 {
			t.Fatal("node 4 joined without a message for an unknown group")
		}

		if err := lead.node.Promote(ctx, 0, 4); err != nil {
			t.Fatal(err)
		}
		c.settle()
		st, _ := n4.node.Status(0)
		if !slices.Contains(st.Voters, 4) || len(st.Voters) != 4 {
			t.Fatalf("node 4 after promotion: %+v", st)
		}
		c.propose(0, "four voters", c.all()...)
		c.waitEqual(0, c.all()...)
	}
}

func cutOffNodeCatchesUp(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, options{}, nil)
	c.bootstrap(0, 1, 2, 3)
	c.propose(0, "before", c.all()...)
	old := c.members[c.elect(0, c.all()...)]
	var rest []*member
	for _, m := range c.all() {
		if m != old {
			rest = append(rest, m)
		}
	}

	c.cut(old.id)
	before := old.net.Stats().Unreachable
	// Every node's clock moves: the cut-off leader steps down (CheckQuorum)
	// and the others elect one of them.
	var lead uint64
	for range 200 {
		st, _ := old.node.Status(0)
		if lead = leader(0, rest...); lead != 0 && st.Leader != old.id {
			break
		}
		c.tickOne(c.all()...)
	}
	if st, _ := old.node.Status(0); lead == 0 || st.Leader == old.id {
		t.Fatalf("after the cut: the others follow %d, node %d follows %d", lead, old.id, st.Leader)
	}
	if old.net.Stats().Unreachable == before {
		t.Fatal("the cut-off node sent nothing it had to drop")
	}
	for i := range 5 {
		c.propose(0, "while cut off "+string(rune('a'+i)), rest...)
	}
	if n := len(c.waitEqual(0, rest...)); n != 6 {
		t.Fatalf("%d records on the rest, want 6", n)
	}
	if recs, _ := old.kv.Records(0); len(recs) != 1 {
		t.Fatalf("the cut-off node has %d records, want 1", len(recs))
	}

	c.heal()
	c.propose(0, "healed", c.all()...)
	if n := len(c.waitEqual(0, c.all()...)); n != 7 {
		t.Fatalf("%d records after healing, want 7", n)
	}
}
