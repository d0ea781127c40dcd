package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
)

// Deadlines are generous: the machine is busy and shared. Nothing below
// waits a fixed time; every wait polls for its condition.
const (
	convergeWithin = 20 * time.Second
)

// testLog collects a node's log; a failed test prints it.
type testLog struct{ logbuf.Buffer }

func (l *testLog) contains(s string) bool { return strings.Contains(l.String(), s) }

func (l *testLog) count(s string) int { return strings.Count(l.String(), s) }

type testNode struct {
	*Membership
	log *testLog
}

type nodeOpt func(*Config)

func withKey(k string) nodeOpt        { return func(c *Config) { c.ClusterKey = k } }
func withBind(addr string) nodeOpt    { return func(c *Config) { c.BindAddr = addr } }
func withTiming(tm Timing) nodeOpt    { return func(c *Config) { c.Timing = tm } }
func joining(seeds ...string) nodeOpt { return func(c *Config) { c.Join = seeds } }

// startNode starts a node on a free loopback port with the local timing,
// publishing itself alive.
func startNode(t *testing.T, name string, opts ...nodeOpt) *testNode {
	t.Helper()
	l := &testLog{}
	cfg := Config{
		NodeName: name,
		BindAddr: "127.0.0.1:0",
		Meta:     Meta{HTTPAddr: "127.0.0.1:80/" + name, PeerAddr: "127.0.0.1:90/" + name, State: StateAlive},
		Logger:   slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name),
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		m.Shutdown()
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, l)
		}
	})
	return &testNode{Membership: m, log: l}
}

// startCluster starts n nodes, the first the seed of the others, and
// waits until every node sees every node alive.
func startCluster(t *testing.T, n int, opts ...nodeOpt) []*testNode {
	t.Helper()
	nodes := []*testNode{startNode(t, "n0", opts...)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(t, fmt.Sprint("n", i), append(opts, joining(nodes[0].Addr()))...))
	}
	eventually.TrueWithin(t, convergeWithin, "every node sees every node alive", func() bool {
		for _, a := range nodes {
			for _, b := range nodes {
				if mb, ok := a.node(b.name); !ok || mb.State != StateAlive || mb.Meta != b.Local() {
					return false
				}
			}
		}
		return true
	})
	return nodes
}

func (m *Membership) node(name string) (Node, bool) {
	for _, mb := range m.Nodes() {
		if mb.Name == name {
			return mb, true
		}
	}
	return Node{}, false
}

// collect reads a node's events into a list from now on.
type collector struct {
	mu     sync.Mutex
	events []Event
}

func collect(m *Membership) *collector {
	c := &collector{}
	go func() {
		for ev := range m.Events() {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	return c
}

// saw reports whether an event of kind about name was delivered.
func (c *collector) saw(kind EventKind, name string, match func(Node) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.events {
		if ev.Kind == kind && ev.Node.Name == name && (match == nil || match(ev.Node)) {
			return true
		}
	}
	return false
}

func TestThreeNodesSeeEachOtherAlive(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, n := range nodes {
		if got := len(n.Nodes()); got != 3 {
			t.Fatalf("%s lists %d members, want 3", n.name, got)
		}
		if mb, _ := nodes[0].node(n.name); mb.Addr != n.Addr() {
			t.Fatalf("n0 has %s at %s, want %s", n.name, mb.Addr, n.Addr())
		}
	}
}

func TestMetaUpdatePropagates(t *testing.T) {
	nodes := startCluster(t, 3)
	events := collect(nodes[0].Membership)
	if err := nodes[1].UpdateMeta(func(m *Meta) {
		m.State = StateDraining
		m.Led, m.Replicated = 1<<5, 1<<5|1<<6
		m.SystemID = "ffffffffffffffffffffffffffffffff" // cannot change
	}); err != nil {
		t.Fatal(err)
	}
	want := nodes[1].Local()
	if want.SystemID == "ffffffffffffffffffffffffffffffff" || want.State != StateDraining {
		t.Fatalf("local meta after update = %+v", want)
	}
	eventually.TrueWithin(t, convergeWithin, "n0 and n2 see n1's new meta, and n0's consumer gets it", func() bool {
		a, _ := nodes[0].node("n1")
		c, _ := nodes[2].node("n1")
		return a.Meta == want && c.Meta == want && a.State == StateDraining &&
			events.saw(EventUpdate, "n1", func(m Node) bool { return m.Meta == want })
	})
	t.Run("an invalid meta publishes nothing", func(t *testing.T) {
		err := nodes[1].UpdateMeta(func(m *Meta) { m.State = StateDead })
		if err == nil || nodes[1].Local() != want {
			t.Fatalf("UpdateMeta(dead) = %v, local %+v", err, nodes[1].Local())
		}
	})
}

// Members stopped together (a whole cluster shut down) each tell the
// others goodbye, and the others record them as left; memberlist's leave
// broadcast then cannot finish, as each stops gossiping to the others it
// saw leave. Its timeout is no failure of the leave, and the leave does
// not wait out its deadline for it: a few gossip rounds (leaveRounds).
func TestMembersLeavingTogetherLeaveCleanly(t *testing.T) {
	nodes := startCluster(t, 2)
	const deadline = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- n.Leave(ctx) }()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Errorf("Leave = %v, want a clean leave: every member was told goodbye", err)
		}
	}
	if took := time.Since(start); took > deadline/2 {
		t.Errorf("the leaves took %v: they waited for broadcasts that could not finish", took)
	}
}

func TestLeaveIsSeenAsLeft(t *testing.T) {
	nodes := startCluster(t, 3)
	events := collect(nodes[0].Membership)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := nodes[2].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	eventually.TrueWithin(t, convergeWithin, "n0 and n1 see n2 left", func() bool {
		a, _ := nodes[0].node("n2")
		b, _ := nodes[1].node("n2")
		return a.State == StateLeft && b.State == StateLeft && events.saw(EventLeave, "n2", nil)
	})
	t.Logf("a graceful leave was seen by both others %v after Leave began", time.Since(start))
	if events.saw(EventFail, "n2", nil) {
		t.Fatal("n0's consumer was told n2 failed; it left")
	}
	// Both recorded the goodbye and said so before the leave's broadcast,
	// which they could otherwise take first for a death.
	if got := nodes[2].answered.Load(); got != 2 {
		t.Fatalf("the leave was broadcast after %d answers to its goodbye, want both members'", got)
	}
	if err := nodes[2].Leave(ctx); err != ErrStopped {
		t.Fatalf("a second Leave = %v, want ErrStopped", err)
	}
	if _, ok := <-nodes[2].Events(); ok {
		t.Fatal("the events of a node that left are not closed")
	}
}

// crash shuts victim down and returns how long until every survivor
// lists it dead, and whether some survivor listed it suspect before.
func crash(t *testing.T, victim *testNode, survivors []*testNode) (time.Duration, bool) {
	t.Helper()
	suspected := false
	victim.Shutdown()
	start := time.Now()
	eventually.TrueWithin(t, convergeWithin, victim.name+" is dead for every survivor", func() bool {
		dead := 0
		for _, s := range survivors {
			switch mb, _ := s.node(victim.name); mb.State {
			case StateSuspect:
				suspected = true
			case StateDead:
				dead++
			}
		}
		return dead == len(survivors)
	})
	return time.Since(start), suspected
}

func TestCrashIsSuspectedThenDead(t *testing.T) {
	nodes := startCluster(t, 3)
	events := collect(nodes[0].Membership)
	took, suspected := crash(t, nodes[2], nodes[:2])
	t.Logf("crash of 1 of 3 nodes: dead for both survivors after %v (local timing)", took)
	if took > 10*time.Second {
		t.Fatalf("crash detected after %v, want under 10 s with the local timing", took)
	}
	if !suspected {
		t.Fatal("no survivor listed the crashed node suspect before dead")
	}
	eventually.TrueWithin(t, convergeWithin, "n0's consumer is told n2 failed", func() bool { return events.saw(EventFail, "n2", nil) })
	if events.saw(EventLeave, "n2", nil) {
		t.Fatal("n0's consumer was told n2 left; it crashed")
	}
}

// TestCrashDetectionTime measures (reports, never asserts) how long the
// local timing takes to find a crashed node dead on this machine.
func TestCrashDetectionTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	const rounds = 5
	var times []time.Duration
	for range rounds {
		nodes := startCluster(t, 3)
		took, _ := crash(t, nodes[2], nodes[:2])
		times = append(times, took)
		nodes[0].Shutdown()
		nodes[1].Shutdown()
	}
	slices.Sort(times)
	t.Logf("crash detection, 3 nodes, local timing, %d rounds: min %v median %v max %v", rounds, times[0], times[rounds/2], times[rounds-1])
}

func TestRestartRejoinsWithANewLife(t *testing.T) {
	for _, tc := range []struct {
		name      string
		samePort  bool
		awaitDead bool
	}{
		{"restart on the same address before the crash is noticed", true, false},
		{"restart on another address before the crash is noticed", false, false},
		{"restart on another address after the node was found dead", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No anti-entropy within the test's deadline: only the join
			// (and its retries) may bring the new life in.
			tm := LocalTiming()
			tm.PushPullInterval = time.Hour
			nodes := startCluster(t, 3, withTiming(tm))
			old := nodes[2]
			oldID := old.Local().SystemID
			events := collect(nodes[0].Membership)
			bind := "127.0.0.1:0"
			if tc.samePort {
				bind = old.Addr()
			}
			old.Shutdown()
			if tc.awaitDead {
				eventually.TrueWithin(t, convergeWithin, "n2 is dead for n0", func() bool { mb, _ := nodes[0].node("n2"); return mb.State == StateDead })
			}
			start := time.Now()
			again := startNode(t, "n2", withBind(bind), withTiming(tm), joining(nodes[0].Addr()))
			newID := again.Local().SystemID
			if newID == oldID {
				t.Fatal("a restarted node kept its SystemID")
			}
			eventually.TrueWithin(t, convergeWithin, "n0 and n1 see n2's new life alive at its new address, and it sees them", func() bool {
				for _, s := range nodes[:2] {
					mb, _ := s.node("n2")
					if mb.State != StateAlive || mb.Meta.SystemID != newID || mb.Addr != again.Addr() {
						return false
					}
					if mb, _ := again.node(s.name); mb.State != StateAlive {
						return false
					}
				}
				return events.saw(EventJoin, "n2", func(m Node) bool { return m.Meta.SystemID == newID })
			})
			t.Logf("%s: seen alive by both others %v after its start", tc.name, time.Since(start))
		})
	}
}
