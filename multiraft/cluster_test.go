package multiraft_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/multiraft/multirafttest"
	"github.com/kitd/kitd/persistence"
)

// A test cluster: nodes on in-memory filesystems, joined by a
// multirafttest.Network, whose clocks the test moves by hand.
type cluster struct {
	t     *testing.T
	net   *multirafttest.Network
	nodes map[uint64]*member
	ids   []uint64
	tweak func(*multiraft.Config)
}

type member struct {
	id    uint64
	fs    vfs.FS
	store *persistence.Store
	node  *multiraft.Node
	kv    multirafttest.KV
	tick  chan time.Time

	mu      sync.Mutex
	changes []multiraft.LeaderChange // what LeaderChanges delivered
}

func (m *member) leaderChanges() []multiraft.LeaderChange {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]multiraft.LeaderChange(nil), m.changes...)
}

const testDir = "db"

func newCluster(t *testing.T, ids []uint64, tweak func(*multiraft.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: multirafttest.NewNetwork(), nodes: make(map[uint64]*member), tweak: tweak}
	for _, id := range ids {
		c.start(id, vfs.NewMem())
	}
	t.Cleanup(func() {
		for _, m := range c.nodes {
			c.stop(m.id)
		}
	})
	return c
}

// start opens node id on fs (a new or a previous node's filesystem).
func (c *cluster) start(id uint64, fs vfs.FS) *member {
	c.t.Helper()
	store, err := persistence.Open(testDir, persistence.Options{FS: fs})
	if err != nil {
		c.t.Fatal(err)
	}
	m := &member{id: id, fs: fs, store: store, kv: multirafttest.KV{Store: store}, tick: make(chan time.Time)}
	cfg := multiraft.Config{
		NodeID: id, Store: store, Transport: c.net.Transport(id), StateMachine: m.kv, Ticker: m.tick,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if m.node, err = multiraft.Open(cfg); err != nil {
		c.t.Fatal(err)
	}
	go func(n *multiraft.Node) {
		for lc := range n.LeaderChanges() {
			m.mu.Lock()
			m.changes = append(m.changes, lc)
			m.mu.Unlock()
		}
	}(m.node)
	c.net.Attach(id, m.node)
	if _, ok := c.nodes[id]; !ok {
		c.ids = append(c.ids, id)
	}
	c.nodes[id] = m
	return m
}

// stop closes node id and its store; its filesystem stays for a restart.
func (c *cluster) stop(id uint64) {
	m := c.nodes[id]
	if m == nil || m.node == nil {
		return
	}
	c.net.Detach(id)
	if err := m.node.Close(); err != nil {
		c.t.Errorf("close node %d: %v", id, err)
	}
	if err := m.store.Close(); err != nil {
		c.t.Errorf("close store %d: %v", id, err)
	}
	m.node = nil
}

func (c *cluster) live() []*member {
	var out []*member
	for _, id := range c.ids {
		if m := c.nodes[id]; m.node != nil {
			out = append(out, m)
		}
	}
	return out
}

func (c *cluster) bootstrap(groups int, voters []uint64) {
	c.t.Helper()
	for _, id := range voters {
		for g := 0; g < groups; g++ {
			if err := c.nodes[id].node.Bootstrap(multiraft.GroupID(g), voters); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// settle lets every node handle what it was sent until no message moves.
func (c *cluster) settle() {
	c.t.Helper()
	// A snapshot streams on goroutines of its own, in real time: settled
	// means none is on its way either, which a loaded machine makes wait.
	deadline := time.Now().Add(30 * time.Second)
	for rounds := 0; rounds < 1000 && time.Now().Before(deadline); {
		before := c.net.Delivered()
		for _, m := range c.live() {
			if err := m.node.Flush(); err != nil {
				c.t.Fatal(err)
			}
		}
		var sending int64 // counted after the cycles that may start one
		for _, m := range c.live() {
			sending += m.node.Stats().SnapshotsSending
		}
		if sending > 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		if c.net.Delivered() == before {
			return
		}
		rounds++
	}
	c.t.Fatal("the cluster never settled")
}

// tickOne moves the clock of the given nodes by one tick, then settles.
func (c *cluster) tickOne(ms ...*member) {
	c.t.Helper()
	for _, m := range ms {
		m.tick <- time.Time{}
	}
	c.settle()
}

func (c *cluster) tick(n int) {
	for range n {
		c.tickOne(c.live()...)
	}
}

// leader returns the node every live member agrees leads g, or 0.
func (c *cluster) leader(g multiraft.GroupID) uint64 {
	c.t.Helper()
	var lead uint64
	for _, m := range c.live() {
		st, err := m.node.Status(g)
		if err != nil {
			continue
		}
		if lead == 0 {
			lead = st.Leader
		}
		if st.Leader == 0 || st.Leader != lead {
			return 0
		}
	}
	if m := c.nodes[lead]; m == nil || m.node == nil {
		return 0 // the others have not noticed yet that it is gone
	}
	return lead
}

// elect ticks until every group in groups has a leader all agree on.
func (c *cluster) elect(groups int) {
	c.t.Helper()
	for range 100 {
		all := true
		for g := 0; g < groups && all; g++ {
			all = c.leader(multiraft.GroupID(g)) != 0
		}
		if all {
			return
		}
		c.tickOne(c.live()...)
	}
	c.t.Fatal("no leader after 100 ticks")
}

// awaitLeads waits until node id takes proposals for each of groups. Raft
// leads once a campaign's votes are persisted (two driver cycles with
// PreVote), and the driver learns it from the next cycle's Ready, so a test
// that proposes right after Campaign must wait for that; no tick is needed.
func (c *cluster) awaitLeads(id uint64, groups ...multiraft.GroupID) {
	c.t.Helper()
	m := c.nodes[id]
	for _, g := range groups {
		eventually.NoError(c.t, fmt.Sprintf("node %d leads group %d", id, g), func() error {
			st, err := m.node.Status(g)
			if err == nil && st.Leader != id {
				err = fmt.Errorf("the leader is %d", st.Leader)
			}
			return err
		})
	}
	// Status reads raft's view; the cycle after it hands the driver the
	// Ready that says so.
	if err := m.node.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// propose proposes data to g on its leader, once every live node agrees
// on it: a replica just added learns its leader from the leader's first
// append, which may still be on its way.
func (c *cluster) propose(g multiraft.GroupID, data string) uint64 {
	c.t.Helper()
	var lead uint64
	eventually.True(c.t, fmt.Sprintf("a leader of group %d every live node agrees on", g), func() bool {
		lead = c.leader(g)
		return lead != 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := c.nodes[lead].node.Propose(ctx, g, []byte(data))
	if err != nil {
		c.t.Fatalf("propose to group %d on %d: %v", g, lead, err)
	}
	return idx
}

// waitEqual waits until every live node holds the same records of g as want
// (nil: as the leader), ticking so that lagging nodes are caught up.
func (c *cluster) waitEqual(g multiraft.GroupID, members ...*member) map[uint64]string {
	c.t.Helper()
	if len(members) == 0 {
		members = c.live()
	}
	var last error
	for range 200 {
		if last = sameRecords(g, members); last == nil {
			recs, _ := members[0].kv.Records(g)
			return recs
		}
		c.tickOne(c.live()...)
	}
	c.t.Fatalf("group %d: states differ: %v", g, last)
	return nil
}

func sameRecords(g multiraft.GroupID, members []*member) error {
	var want map[uint64]string
	for i, m := range members {
		got, err := m.kv.Records(g)
		if err != nil {
			return err
		}
		if i == 0 {
			want = got
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("node %d has %d records, node %d %d", m.id, len(got), members[0].id, len(want))
		}
	}
	return nil
}

func isNotLeader(err error) (*multiraft.NotLeaderError, bool) {
	var nl *multiraft.NotLeaderError
	return nl, errors.As(err, &nl)
}

// singleNode opens a store and node 1 alone on it, with groups
// single-voter groups that it leads (tweaks change its configuration);
// both are closed with the test.
func singleNode(tb testing.TB, dir string, opts persistence.Options, groups int, tweaks ...func(*multiraft.Config)) *multiraft.Node {
	tb.Helper()
	store, err := persistence.Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tick := make(chan time.Time)
	cfg := multiraft.Config{
		NodeID: 1, Store: store, Transport: multirafttest.NewNetwork().Transport(1),
		StateMachine: multirafttest.KV{Store: store}, Ticker: tick,
	}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	n, err := multiraft.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := errors.Join(n.Close(), store.Close()); err != nil {
			tb.Error(err)
		}
	})
	for g := range groups {
		if err := n.Bootstrap(multiraft.GroupID(g), []uint64{1}); err != nil {
			tb.Fatal(err)
		}
	}
	for range 100 {
		tick <- time.Time{}
		if err := n.Flush(); err != nil {
			tb.Fatal(err)
		}
		led := 0
		for g := range groups {
			if n.LeaseValid(multiraft.GroupID(g)) {
				led++
			}
		}
		if led == groups {
			return n
		}
	}
	tb.Fatal("the groups elected no leader in 100 ticks")
	return nil
}
