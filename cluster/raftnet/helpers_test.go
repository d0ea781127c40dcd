package raftnet_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/cluster/raftnet"
	"github.com/kitd/kitd/internal/logbuf"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/multiraft/multirafttest"
	"github.com/kitd/kitd/persistence"
)

var testKey = []byte("raftnet test cluster key, 32 b..")

// endpoint is a raftnet transport over its own peer transport on a
// loopback port, without a replication node unless one is attached.
type endpoint struct {
	id   uint64
	dir  *raftnet.StaticDirectory
	net  *raftnet.Transport
	peer *peer.Transport
	log  *logbuf.Buffer
}

type options struct {
	onDisk   bool                  // stores in a temporary directory, not in memory
	chunk    int                   // snapshot chunk and peer MaxChunk; 0: defaults
	editPeer func(*peer.Config)    // before Listen
	edit     func(*raftnet.Config) // before New
}

func newEndpoint(t testing.TB, id uint64, o options) *endpoint {
	t.Helper()
	e := &endpoint{id: id, dir: raftnet.NewStaticDirectory(nil), log: &logbuf.Buffer{}}
	logger := slog.New(slog.NewTextHandler(e.log, nil))
	cfg := raftnet.Config{NodeID: id, Directory: e.dir, ChunkSize: o.chunk, Logger: logger}
	if o.edit != nil {
		o.edit(&cfg)
	}
	var err error
	if e.net, err = raftnet.New(cfg); err != nil {
		t.Fatal(err)
	}
	pcfg := peer.Config{
		NodeName:   fmt.Sprintf("node-%d", id),
		ListenAddr: "127.0.0.1:0",
		ClusterKey: testKey,
		OneWay:     e.net.HandleBatch,
		Stream:     e.net.HandleStream,
		MaxChunk:   o.chunk,
		Logger:     logger,
	}
	if o.editPeer != nil {
		o.editPeer(&pcfg)
	}
	if e.peer, err = peer.Listen(pcfg); err != nil {
		t.Fatal(err)
	}
	e.net.Bind(e.peer)
	t.Cleanup(func() {
		e.net.Close()
		e.peer.Close()
	})
	return e
}

// connect waits until a has a connection to addr: raft's first messages
// are otherwise dropped while it dials, and a test moving the clocks
// faster than a dial would see elections fail for no reason of raft's.
func connect(t testing.TB, a *endpoint, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.peer.Send(addr) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("node %d cannot connect to %s", a.id, addr)
		}
		time.Sleep(time.Millisecond) // polling: the dial is under way
	}
}

// member is an endpoint with a replication node on an in-memory store,
// whose clock the test moves by hand.
type member struct {
	*endpoint
	store *persistence.Store
	node  *multiraft.Node
	kv    multirafttest.KV
	tick  chan time.Time
}

// cluster is a set of members that know each other's addresses.
type cluster struct {
	t       testing.TB
	o       options
	tweak   func(*multiraft.Config)
	members map[uint64]*member
	ids     []uint64
}

func newCluster(t testing.TB, ids []uint64, o options, tweak func(*multiraft.Config)) *cluster {
	c := &cluster{t: t, o: o, tweak: tweak, members: make(map[uint64]*member)}
	for _, id := range ids {
		c.start(id)
	}
	return c
}

// start adds member id: every member learns its address and it learns
// theirs.
func (c *cluster) start(id uint64) *member {
	c.t.Helper()
	m := &member{endpoint: newEndpoint(c.t, id, c.o), tick: make(chan time.Time)}
	dir, opts := "db", persistence.Options{FS: vfs.NewMem()}
	if c.o.onDisk {
		dir, opts = c.t.TempDir(), persistence.Options{}
	}
	store, err := persistence.Open(dir, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	m.store, m.kv = store, multirafttest.KV{Store: store}
	cfg := multiraft.Config{NodeID: id, Store: store, Transport: m.net, StateMachine: m.kv, Ticker: m.tick}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if m.node, err = multiraft.Open(cfg); err != nil {
		c.t.Fatal(err)
	}
	m.net.Attach(m.node)
	go func(n *multiraft.Node) {
		for range n.LeaderChanges() {
		}
	}(m.node)
	c.t.Cleanup(func() {
		m.node.Close()
		m.net.Close()
		m.peer.Close()
		store.Close()
	})
	for _, o := range c.members {
		o.dir.Set(id, m.peer.Addr())
		m.dir.Set(o.id, o.peer.Addr())
		connect(c.t, o.endpoint, m.peer.Addr())
		connect(c.t, m.endpoint, o.peer.Addr())
	}
	c.members[id] = m
	c.ids = append(c.ids, id)
	return m
}

func (c *cluster) all() []*member {
	out := make([]*member, 0, len(c.ids))
	for _, id := range c.ids {
		out = append(out, c.members[id])
	}
	return out
}

// cut makes id and the others unreachable to each other, by their
// directories.
func (c *cluster) cut(id uint64) {
	for _, o := range c.members {
		if o.id != id {
			o.dir.Remove(id)
			c.members[id].dir.Remove(o.id)
		}
	}
}

// heal makes every member reachable to every other again.
func (c *cluster) heal() {
	for _, a := range c.members {
		for _, b := range c.members {
			if a != b {
				a.dir.Set(b.id, b.peer.Addr())
			}
		}
	}
}

// settle lets the members handle what they were sent: it flushes every
// node until no message moves and every one queued to a peer was taken by
// its receiver. A message lost with a connection never arrives, so it
// gives up at a deadline and lets the next tick go on (raft sends again).
func (c *cluster) settle() {
	c.t.Helper()
	counts := func() (sent, taken uint64) {
		for _, m := range c.all() {
			st := m.net.Stats()
			sent += st.Sent
			taken += st.Received + st.UnknownGroup + st.Undelivered
		}
		return sent, taken
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		sent, taken := counts()
		for _, m := range c.all() {
			if err := m.node.Flush(); err != nil {
				c.t.Fatal(err)
			}
		}
		var sending int64 // a snapshot streams outside the counts
		for _, m := range c.all() {
			sending += m.node.Stats().SnapshotsSending
		}
		if s, k := counts(); s == sent && k == taken && sent == taken && sending == 0 {
			return
		}
		time.Sleep(time.Millisecond) // polling: the messages are on the wire
	}
}

// tickOne moves the clock of the given members by one tick, then settles.
func (c *cluster) tickOne(ms ...*member) {
	c.t.Helper()
	for _, m := range ms {
		m.tick <- time.Time{}
	}
	c.settle()
}

func (c *cluster) bootstrap(g multiraft.GroupID, voters ...uint64) {
	c.t.Helper()
	for _, id := range voters {
		if err := c.members[id].node.Bootstrap(g, voters); err != nil {
			c.t.Fatal(err)
		}
	}
}

// leader returns the node every one of ms agrees leads g, or 0.
func leader(g multiraft.GroupID, ms ...*member) uint64 {
	var lead uint64
	for _, m := range ms {
		st, err := m.node.Status(g)
		if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
			return 0
		}
		lead = st.Leader
	}
	if !slices.ContainsFunc(ms, func(m *member) bool { return m.id == lead }) {
		return 0
	}
	return lead
}

// elect ticks ms until they agree on a leader of g among them.
func (c *cluster) elect(g multiraft.GroupID, ms ...*member) uint64 {
	c.t.Helper()
	for range 200 {
		if lead := leader(g, ms...); lead != 0 {
			return lead
		}
		c.tickOne(ms...)
	}
	c.t.Fatalf("group %d: no leader after 200 ticks", g)
	return 0
}

// propose proposes data to g on its leader among ms, electing one again
// if leadership moved.
func (c *cluster) propose(g multiraft.GroupID, data string, ms ...*member) {
	c.t.Helper()
	for range 10 {
		lead := c.elect(g, ms...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.members[lead].node.Propose(ctx, g, []byte(data))
		cancel()
		var nl *multiraft.NotLeaderError
		switch {
		case err == nil:
			return
		case errors.As(err, &nl), errors.Is(err, multiraft.ErrLeadershipLost), errors.Is(err, multiraft.ErrProposalDropped):
			continue
		default:
			c.t.Fatalf("propose to group %d on %d: %v", g, lead, err)
		}
	}
	c.t.Fatalf("propose to group %d: the leadership kept moving", g)
}

// waitEqual ticks every member until ms hold the same records of g, and
// returns them.
func (c *cluster) waitEqual(g multiraft.GroupID, ms ...*member) map[uint64]string {
	c.t.Helper()
	var diff string
	for range 300 {
		want, err := ms[0].kv.Records(g)
		if err != nil {
			c.t.Fatal(err)
		}
		diff = ""
		for _, m := range ms[1:] {
			got, err := m.kv.Records(g)
			if err != nil {
				c.t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				diff = fmt.Sprintf("node %d has %d records, node %d %d", m.id, len(got), ms[0].id, len(want))
				break
			}
		}
		if diff == "" {
			return want
		}
		c.tickOne(c.all()...)
	}
	c.t.Fatalf("group %d: states differ: %s", g, diff)
	return nil
}
