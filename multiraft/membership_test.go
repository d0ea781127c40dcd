package multiraft_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
)

// snapshotConfig makes the log short and the chunks small, so that a
// replica behind the log gets a snapshot streamed in several chunks.
func snapshotConfig(cfg *multiraft.Config) { cfg.CompactAfter = 4 }

const chunk = 4 << 10

// addLearner starts node id on a store of its own and has lead add it to
// group 0 as a learner.
func (c *cluster) addLearner(lead *member, id uint64) *member {
	c.t.Helper()
	m := c.start(id, vfs.NewMem())
	if err := m.node.Join(0); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := proposeCtx()
	defer cancel()
	if err := lead.node.AddLearner(ctx, 0, id); err != nil {
		c.t.Fatal(err)
	}
	return m
}

func bigValue(i int) string { return strings.Repeat(string(rune('a'+i%26)), 3000) }

// A new node joins as a learner: it receives the state as a snapshot in
// bounded chunks, then the log, then is promoted to voter and counts in
// the quorum.
func TestLearnerCatchesUpThenIsPromoted(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, snapshotConfig)
	c.net.ChunkSize = chunk
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	for i := range 20 {
		c.propose(0, bigValue(i))
	}
	lead := c.nodes[c.leader(0)]

	n4 := c.addLearner(lead, 4)
	ctx, cancel := proposeCtx()
	defer cancel()
	if _, err := lead.node.Propose(ctx, 0, []byte("after the learner")); err != nil { // the learner may not know the leader yet
		t.Fatal(err)
	}
	recs := c.waitEqual(0)
	if len(recs) != 21 {
		t.Fatalf("%d records, want 21", len(recs))
	}
	chunks, largest := c.net.Chunks()
	t.Logf("snapshot: %d chunks, largest %d bytes", chunks, largest)
	if chunks < 2 || largest > chunk {
		t.Fatalf("snapshot sent in %d chunks of at most %d bytes, want several of at most %d", chunks, largest, chunk)
	}
	st, _ := n4.node.Status(0)
	if !slices.Contains(st.Learners, 4) || slices.Contains(st.Voters, 4) {
		t.Fatalf("node 4 before promotion: %+v", st)
	}

	if err := lead.node.Promote(ctx, 0, 4); err != nil {
		t.Fatal(err)
	}
	c.settle()
	st, _ = n4.node.Status(0)
	if !slices.Contains(st.Voters, 4) || len(st.Voters) != 4 {
		t.Fatalf("node 4 after promotion: %+v", st)
	}
	// Only a voter can lead: hand it the leadership.
	if err := lead.node.TransferLeadership(0, 4); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if c.leader(0) == 4 {
			break
		}
		c.tickOne(c.live()...)
	}
	if got := c.leader(0); got != 4 {
		t.Fatalf("leader %d after the transfer to the promoted node", got)
	}
	c.propose(0, "led by the new voter")
	c.waitEqual(0)
}

// A follower cut off while the log moved past what the leader keeps gets a
// snapshot when it is back, then follows the log.
func TestLaggingFollowerGetsSnapshot(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, snapshotConfig)
	c.net.ChunkSize = chunk
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	c.propose(0, "first")
	c.waitEqual(0)
	lag := c.leader(0)%3 + 1
	c.net.Isolate(lag)
	lagging := c.nodes[lag]
	others := []*member{}
	for _, m := range c.live() {
		if m.id != lag {
			others = append(others, m)
		}
	}
	for i := range 20 {
		lead := c.leader(0)
		if lead == 0 || lead == lag {
			c.tickOne(others...)
			continue
		}
		c.propose(0, bigValue(i))
	}
	before, _ := c.net.Chunks()
	c.net.Heal()
	c.elect(1)
	c.propose(0, "last")
	recs := c.waitEqual(0)
	after, _ := c.net.Chunks()
	if after == before {
		t.Fatal("the lagging follower caught up without a snapshot: the log was not compacted")
	}
	got, _ := lagging.kv.Records(0)
	if len(got) != len(recs) {
		t.Fatalf("lagging follower has %d records, want %d", len(got), len(recs))
	}
}

// Removing a replica takes it out of the group's configuration.
func TestRemoveReplica(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	lead := c.nodes[c.leader(0)]
	gone := lead.id%3 + 1
	ctx, cancel := proposeCtx()
	defer cancel()
	if err := lead.node.RemoveReplica(ctx, 0, gone); err != nil {
		t.Fatal(err)
	}
	st, _ := lead.node.Status(0)
	if slices.Contains(st.Voters, gone) || len(st.Voters) != 2 {
		t.Fatalf("after removing %d: voters %v", gone, st.Voters)
	}
	c.stop(gone)
	c.propose(0, "two voters")
}

// A replica its group removed is forgotten whole: its raft state and its
// records go, in one synced batch that a restart keeps, and the store is
// marked. Forget refuses on the group's leader and once the group spoke
// to the node after Heard; a replica added back starts from a snapshot.
func TestForget(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, snapshotConfig)
	c.bootstrap(2, []uint64{1, 2, 3})
	c.elect(2)
	c.propose(0, "zero")
	c.propose(1, "one")
	lead := c.nodes[c.leader(0)]
	gone := c.nodes[lead.id%3+1]
	forget := func(m *member, g multiraft.GroupID, between func()) error {
		t.Helper()
		heard, err := m.node.Heard(g)
		if err != nil {
			t.Fatal(err)
		}
		between()
		return m.node.Forget(g, heard)
	}
	if err := forget(lead, 0, func() {}); !errors.Is(err, multiraft.ErrGroupSpoke) {
		t.Errorf("forget on the leader: %v, want ErrGroupSpoke", err)
	}
	if err := forget(gone, 0, func() { c.propose(0, "spoken"); c.settle() }); !errors.Is(err, multiraft.ErrGroupSpoke) {
		t.Errorf("forget after the group spoke: %v, want ErrGroupSpoke", err)
	}
	c.waitEqual(0)
	ctx, cancel := proposeCtx()
	defer cancel()
	if err := lead.node.RemoveReplica(ctx, 0, gone.id); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if marked, err := multiraft.Forgotten(gone.store); err != nil || marked {
		t.Fatalf("marked forgotten before any Forget: %v %v", marked, err)
	}
	if err := forget(gone, 0, func() {}); err != nil {
		t.Fatalf("forget a removed replica: %v", err)
	}

	check := func(when string) {
		t.Helper()
		if gs := gone.node.Groups(); !slices.Equal(gs, []multiraft.GroupID{1}) {
			t.Errorf("%s: groups %v, want [1]", when, gs)
		}
		if recs, _ := gone.kv.Records(0); len(recs) != 0 {
			t.Errorf("%s: group 0's records %v are left", when, recs)
		}
		if recs, _ := gone.kv.Records(1); len(recs) == 0 {
			t.Errorf("%s: group 1's records went too", when)
		}
		if _, err := gone.node.Heard(0); !errors.Is(err, multiraft.ErrUnknownGroup) {
			t.Errorf("%s: Heard(0) = %v, want ErrUnknownGroup", when, err)
		}
		if marked, err := multiraft.Forgotten(gone.store); err != nil || !marked {
			t.Errorf("%s: Forgotten = %v %v, want true", when, marked, err)
		}
	}
	check("forgotten")
	c.stop(gone.id)
	gone = c.start(gone.id, gone.fs)
	check("restarted")

	// Added back, it starts again from a snapshot.
	if err := gone.node.Join(0); err != nil {
		t.Fatal(err)
	}
	if err := lead.node.AddLearner(ctx, 0, gone.id); err != nil {
		t.Fatal(err)
	}
	c.propose(0, "added back")
	if recs := c.waitEqual(0); len(recs) != 3 {
		t.Fatalf("%d records after the return, want 3", len(recs))
	}
}

// Each snapshot a leader streams is counted by its outcome: one its
// follower could not take counts as failed, and raft sends another, which
// counts as sent.
func TestSnapshotsAreCountedByOutcome(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, snapshotConfig)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	for i := range 8 {
		c.propose(0, bigValue(i))
	}
	lead := c.nodes[c.leader(0)]
	var dropped atomic.Int32
	c.net.Drop(func(m multiraft.Message) bool {
		return m.Msg.Type == pb.MsgSnap && dropped.CompareAndSwap(0, 1)
	})
	c.addLearner(lead, 4)
	c.waitEqual(0)
	st := lead.node.Stats()
	if dropped.Load() != 1 {
		t.Fatal("no snapshot was sent to drop")
	}
	if st.SnapshotsFailed != 1 || st.SnapshotsSent != 1 || st.SnapshotsSending != 0 {
		t.Errorf("snapshots failed %d, sent %d, sending %d; want 1, 1, 0", st.SnapshotsFailed, st.SnapshotsSent, st.SnapshotsSending)
	}
}
