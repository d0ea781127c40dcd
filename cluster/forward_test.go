package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/deadline"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

var testClusterKey = []byte("0123456789abcdef0123456789abcdef")

// peerNode is one node of a test cluster: a cluster.Host with its own peer
// transport over loopback mTLS, and its routing table.
type peerNode struct {
	name   string
	n      *Host
	peers  *peer.Transport
	table  *RoutingTable
	served atomic.Int64 // forwarded requests that reached ServePeer here
	runs   atomic.Int64 // requests the test actor ran here
	told   atomic.Int64 // notices the test actor took here
	// release unblocks the test actor's "block" requests.
	release chan struct{}
}

// forwardActor answers GetUser with the id asked for and the member that
// ran it; "block" waits for the member's release first. DeactivateUser is a
// conflict with a path, GetWorkspace not found, CreateWorkspace over a rate
// limit: domain errors that must survive a forward.
type forwardActor struct{ m *peerNode }

func (a forwardActor) Receive(ctx actor.Context) {
	switch r := ctx.Message().(type) {
	case *kitpb.GetUser:
		a.m.runs.Add(1)
		if r.UserId == "block" {
			<-a.m.release
		}
		ctx.Respond(&kitpb.UserReply{User: &kitpb.User{Id: r.UserId, DisplayName: a.m.name}})
	case *kitpb.WakeDelivery:
		a.m.told.Add(1)
	case *kitpb.DeactivateUser:
		ctx.Respond(kiterr.ToFailure(kiterr.Invalid("userId", "is not a member")))
	case *kitpb.GetWorkspace:
		ctx.Respond(kiterr.ToFailure(kiterr.Absent("workspace")))
	case *kitpb.CreateWorkspace:
		ctx.Respond(kiterr.ToFailure(kiterr.OverLimit(limits.Decision{Remaining: 0, RetryAfter: 7, ResetSeconds: 60, Policy: limits.Write})))
	}
}

// startMembers starts count members that know each other's transports but
// no leaders: each test sets the tables and what each node hosts.
func startMembers(t testing.TB, count int) []*peerNode {
	t.Helper()
	ms := make([]*peerNode, count)
	for i := range ms {
		m := &peerNode{name: string(rune('A' + i)), table: NewRoutingTable(), release: make(chan struct{})}
		n, err := Start(Config{RequestTimeout: 20 * time.Second},
			&Kind{Name: "fwd", New: func(string) actor.Actor { return forwardActor{m} }})
		if err != nil {
			t.Fatal(err)
		}
		m.n = n
		tr, err := peer.Listen(peer.Config{
			NodeName:   m.name,
			ListenAddr: "127.0.0.1:0",
			ClusterKey: testClusterKey,
			Registry:   PeerRegistry(),
			Handler: func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
				m.served.Add(1)
				return m.n.ServePeer(ctx, from, msg, id)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		m.peers = tr
		if err := n.EnableForwarding(Forwarding{Router: m.table, Peers: tr}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			tr.Close()
			n.Stop()
		})
		ms[i] = m
	}
	return ms
}

// forwardingPair starts two members: B leads p, and A forwards to it.
func forwardingPair(t testing.TB, p partition.ID) (a, b *peerNode) {
	ms := startMembers(t, 2)
	a, b = ms[0], ms[1]
	a.n.Release(p)
	a.table.Set(p, b.peers.Addr(), 1)
	return a, b
}

// leadOnly makes leader the only member that hosts p.
func leadOnly(p partition.ID, leader *peerNode, ms []*peerNode) {
	for _, m := range ms {
		if m != leader {
			m.n.Release(p)
		}
	}
}

func getUser(m *peerNode, identity, user string) (*kitpb.UserReply, error) {
	return Call[*kitpb.UserReply](m.n, "fwd", identity, &kitpb.GetUser{UserId: user})
}

func wantUnavailable(t *testing.T, err error) {
	t.Helper()
	if code := kiterr.CodeOf(err); code != kiterr.Unavailable || code.Status() != 503 {
		t.Fatalf("got %v (code %s), want 503 unavailable", err, code)
	}
}

func TestForwarding(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, p partition.ID, id string, a, b, c *peerNode)
	}{
		{"a request for a partition led elsewhere gets the leader's reply", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 1)
			r, err := getUser(a, id, "u1")
			if err != nil || r.User.Id != "u1" || r.User.DisplayName != "B" {
				t.Fatalf("got %v, %v; want u1 from B", r, err)
			}
			if a.runs.Load() != 0 || b.served.Load() != 1 {
				t.Fatalf("runs on A %d, served by B %d: want 0 and 1", a.runs.Load(), b.served.Load())
			}
		}},
		{"a stale entry costs one more hop: Moved with a newer term reaches the new leader", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, c.peers.Addr(), 1) // C led p in term 1 and released it
			c.table.Set(p, b.peers.Addr(), 2)
			r, err := getUser(a, id, "u2")
			if err != nil || r.User.DisplayName != "B" {
				t.Fatalf("got %v, %v; want the reply of B", r, err)
			}
			if c.served.Load() != 1 || b.served.Load() != 1 || c.runs.Load() != 0 {
				t.Fatalf("served by C %d, by B %d, runs on C %d: want 1, 1, 0", c.served.Load(), b.served.Load(), c.runs.Load())
			}
			if l, _ := a.table.Leader(p); l != (Leader{b.peers.Addr(), 2}) {
				t.Fatalf("A's table says %v, want B in term 2 (learned from Moved)", l)
			}
			if _, err := getUser(a, id, "u3"); err != nil || c.served.Load() != 1 {
				t.Fatalf("second request: %v, served by C %d: want it straight to B", err, c.served.Load())
			}
		}},
		{"Moved twice is unavailable: never more than one retry", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, nil, []*peerNode{a, b, c}) // an election: nobody hosts p
			a.table.Set(p, b.peers.Addr(), 1)
			b.table.Set(p, c.peers.Addr(), 2)
			c.table.Set(p, b.peers.Addr(), 3)
			_, err := getUser(a, id, "u")
			wantUnavailable(t, err)
			if got := b.served.Load() + c.served.Load(); got != 2 {
				t.Fatalf("%d hops, want 2", got)
			}
		}},
		{"Moved naming a leader of no newer term is unavailable: no hop", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, nil, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 4)
			b.table.Set(p, c.peers.Addr(), 4)
			_, err := getUser(a, id, "u")
			wantUnavailable(t, err)
			if b.served.Load() != 1 || c.served.Load() != 0 {
				t.Fatalf("served by B %d, C %d: want 1, 0", b.served.Load(), c.served.Load())
			}
		}},
		{"a forwarded request that finds its partition not hosted answers Moved and is never forwarded again", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			c.table.Set(p, b.peers.Addr(), 5)
			res, err := a.peers.Call(context.Background(), c.peers.Addr(), forwardOf(t, id, &kitpb.GetUser{UserId: "u"}), "direct-1")
			m, ok := res.(*kitpb.Moved)
			if err != nil || !ok || m.Leader != b.peers.Addr() || m.Term != 5 || partition.ID(m.Partition) != p {
				t.Fatalf("got %v, %v; want Moved to B in term 5", res, err)
			}
			if b.served.Load() != 0 || c.runs.Load() != 0 {
				t.Fatalf("served by B %d, runs on C %d: want 0, 0", b.served.Load(), c.runs.Load())
			}
		}},
		{"a Moved naming this node serves the request here once it hosts the partition", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			// B led p in term 1 and handed it to A, which applies its
			// term's first entry before it hosts p: the cluster balancing
			// its leaderships, a request through A meanwhile.
			leadOnly(p, nil, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 1)
			b.table.Set(p, a.peers.Addr(), 2)
			hosted := make(chan struct{})
			go func() {
				defer close(hosted)
				eventually.Holds(eventually.Within, func() bool { return b.served.Load() == 1 })
				a.n.Host(p)
			}()
			r, err := getUser(a, id, "u")
			<-hosted
			if err != nil || r.User.DisplayName != "A" {
				t.Fatalf("got %v, %v; want the reply of A, which leads p now", r, err)
			}
			if b.runs.Load() != 0 || c.served.Load() != 0 {
				t.Fatalf("runs on B %d, served by C %d: want 0, 0", b.runs.Load(), c.served.Load())
			}
		}},
		{"a Moved naming no leader waits for the table to name another node, then hops there", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, c, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 0) // gossip's word: B leads, no term
			// B left p's group and knows no leader; gossip names C a
			// moment later.
			go func() {
				time.Sleep(100 * time.Millisecond)
				a.table.Set(p, c.peers.Addr(), 0)
			}()
			r, err := getUser(a, id, "u")
			if err != nil || r.User.DisplayName != "C" {
				t.Fatalf("got %v, %v; want the reply of C", r, err)
			}
			if b.served.Load() != 1 || c.served.Load() != 1 {
				t.Fatalf("served by B %d, C %d: want 1, 1", b.served.Load(), c.served.Load())
			}
		}},
		{"a leader that serves its partition a moment later answers the forwarded request then, not Moved", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, nil, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 1)
			b.table.Set(p, b.peers.Addr(), 1) // B leads p, but its lease lapsed for a moment
			go func() {
				time.Sleep(100 * time.Millisecond)
				b.n.Host(p)
			}()
			r, err := getUser(a, id, "u")
			if err != nil || r.User.DisplayName != "B" {
				t.Fatalf("got %v, %v; want the answer of B once it serves p", r, err)
			}
			if b.served.Load() != 1 {
				t.Fatalf("served by B %d, want 1: the request waited there", b.served.Load())
			}
		}},
		{"no known leader is unavailable, nothing sent", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, b.peers.Addr(), 1)
			a.table.Forget(p)
			_, err := getUser(a, id, "u")
			wantUnavailable(t, err)
			if b.served.Load() != 0 {
				t.Fatal("a request was sent")
			}
		}},
		{"a leader that cannot be reached is unavailable", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, closedAddr(t), 1)
			_, err := getUser(a, id, "u")
			wantUnavailable(t, err)
		}},
		{"a leader that cannot be reached: the request goes to the node the table names next (nothing was sent)", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, closedAddr(t), 1) // it died; gossip says so a moment later
			go func() {
				time.Sleep(100 * time.Millisecond)
				a.table.Set(p, b.peers.Addr(), 2)
			}()
			r, err := getUser(a, id, "u")
			if err != nil || r.User.DisplayName != "B" {
				t.Fatalf("got %v, %v; want the reply of B", r, err)
			}
		}},
		{"a table that names this node, which does not host p, is unavailable without a hop", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, a.peers.Addr(), 1)
			_, err := getUser(a, id, "u")
			wantUnavailable(t, err)
			if a.served.Load() != 0 {
				t.Fatal("the node sent the request to itself")
			}
		}},
		{"a table that names this node, which hosts p a moment later, waits for it and answers here", func(t *testing.T, p partition.ID, id string, a, b, c *peerNode) {
			leadOnly(p, b, []*peerNode{a, b, c})
			a.table.Set(p, a.peers.Addr(), 1)
			go func() {
				time.Sleep(100 * time.Millisecond) // the first entry of its term being applied
				a.n.Host(p)
			}()
			r, err := getUser(a, id, "u")
			if err != nil || r.User.DisplayName != "A" {
				t.Fatalf("got %v, %v; want the answer of A, once it hosts p", r, err)
			}
			if a.served.Load() != 0 || b.served.Load() != 0 {
				t.Fatal("the request travelled")
			}
		}},
	}
	ms := startMembers(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := partition.ID(10 + i) // a partition, and tables, of its own
			for _, m := range ms {
				m.served.Store(0)
				m.runs.Store(0)
				t.Cleanup(func() { m.n.Host(p) })
			}
			tt.run(t, p, identitiesOf(p, 1)[0], a, b, c)
		})
	}
}

// A notice (Send) sent while its partition changes leader follows it as
// a request does, until the request timeout: the receiver of a lost notice
// learns of it only from the next one, and a drained member's last notices
// went nowhere.
func TestNoticesFollowTheirPartition(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, p partition.ID, a, b, c *peerNode)
	}{
		{"a notice sent while no leader is known reaches the leader the table names later", func(t *testing.T, p partition.ID, a, b, c *peerNode) {
			a.table.Forget(p)
			later(func() { a.table.Set(p, b.peers.Addr(), 2) })
		}},
		{"a notice whose leader cannot be reached goes to the node the table names next", func(t *testing.T, p partition.ID, a, b, c *peerNode) {
			a.table.Set(p, closedAddr(t), 1)
			later(func() { a.table.Set(p, b.peers.Addr(), 2) })
		}},
		{"a notice that reaches a node no longer hosting its partition goes on to the leader", func(t *testing.T, p partition.ID, a, b, c *peerNode) {
			a.table.Set(p, c.peers.Addr(), 1)
			c.table.Set(p, b.peers.Addr(), 2)
		}},
		{"a notice for this node's partition waits for it to be hosted", func(t *testing.T, p partition.ID, a, b, c *peerNode) {
			b.n.Release(p)
			a.table.Set(p, a.peers.Addr(), 2)
			later(func() { a.n.Host(p) })
		}},
	}
	ms := startMembers(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := partition.ID(20 + i)
			leadOnly(p, b, ms)
			for _, m := range ms {
				m.told.Store(0)
				t.Cleanup(func() { m.n.Host(p) })
			}
			tt.run(t, p, a, b, c)
			if !a.n.Send("fwd", identitiesOf(p, 1)[0], &kitpb.WakeDelivery{}) {
				t.Fatal("Send did not take the notice")
			}
			eventually.True(t, "the notice to reach the leader", func() bool { return a.told.Load()+b.told.Load() == 1 })
			if c.told.Load() != 0 {
				t.Fatal("a node that does not host the partition took the notice")
			}
		})
	}
}

// A notice that reaches its leader before the leader hosts the partition
// (its term's first entry not applied yet) waits there, and is then handed
// to the actor as a notice: asked as a request, it would hold both ends
// until the request timeout, since an actor answers no notice.
func TestANoticeThatWaitsOnItsLeaderIsHandedOver(t *testing.T) {
	ms := startMembers(t, 2)
	a, b := ms[0], ms[1]
	const p = partition.ID(46)
	a.n.Release(p)
	b.n.Release(p)
	t.Cleanup(func() { a.n.Host(p); b.n.Host(p) })
	a.table.Set(p, b.peers.Addr(), 2)
	b.table.Set(p, b.peers.Addr(), 2) // b leads, and hosts a moment later
	a.n.requests = deadline.NewShared(2 * time.Second)
	b.n.requests = deadline.NewShared(2 * time.Second)
	later(func() { b.n.Host(p) })
	if _, err := a.n.toLeader("fwd", identitiesOf(p, 1)[0], &kitpb.WakeDelivery{}, true); err != nil {
		t.Fatalf("a notice that waited on its leader: %v, want it handed over", err)
	}
	if got := b.told.Load(); got != 1 {
		t.Fatalf("the leader's actor was told %d notices, want 1", got)
	}
}

// later runs fn a moment after the test's Send: gossip's word, or a
// leader's first entry, coming in after the notice left.
func later(fn func()) {
	go func() {
		time.Sleep(100 * time.Millisecond)
		fn()
	}()
}

// Domain errors of the leader's actor reach the caller as a local request's
// would, a rate limit's decision included.
func TestForwardedErrorsLookLocal(t *testing.T) {
	ms := startMembers(t, 2)
	a, b := ms[0], ms[1]
	const p = partition.ID(30)
	id := identitiesOf(p, 1)[0]
	tests := []struct {
		name string
		msg  proto.Message
		code kiterr.Code
	}{
		{"400 validation_error keeps its path", &kitpb.DeactivateUser{}, kiterr.Validation},
		{"404 not_found", &kitpb.GetWorkspace{}, kiterr.NotFound},
		{"429 rate_limited keeps its bucket's decision", &kitpb.CreateWorkspace{}, kiterr.RateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, local := b.n.Request("fwd", id, tt.msg)
			a.n.Release(p)
			t.Cleanup(func() { a.n.Host(p) })
			a.table.Set(p, b.peers.Addr(), 1)
			_, forwarded := a.n.Request("fwd", id, tt.msg)
			var le, fe *kiterr.Error
			if !errors.As(local, &le) || !errors.As(forwarded, &fe) {
				t.Fatalf("local %v, forwarded %v: want domain errors", local, forwarded)
			}
			if le.Code != tt.code || !reflect.DeepEqual(le, fe) {
				t.Fatalf("forwarded %+v (limit %+v), want %+v (limit %+v)", fe, fe.Limit, le, le.Limit)
			}
			if b.served.Load() == 0 {
				t.Fatal("the request was not forwarded")
			}
		})
	}
}

// A reply lost with its connection: the sender retries with the same
// request id, and the leader answers it from the first run.
func TestLostReplyRunsOnce(t *testing.T) {
	const p = partition.ID(40)
	a, b := forwardingPair(t, p)
	id := identitiesOf(p, 1)[0]
	px := peertest.NewProxy(t, b.peers.Addr())
	a.table.Set(p, px.Addr(), 2)

	done := make(chan error, 1)
	go func() {
		r, err := getUser(a, id, "block")
		if err == nil && r.User.DisplayName != "B" {
			err = errors.New("wrong reply")
		}
		done <- err
	}()
	eventually.True(t, "the first run to start", func() bool { return b.runs.Load() == 1 })
	px.Cut() // the first reply has nowhere to go
	eventually.True(t, "the retry to reach B", func() bool { return b.served.Load() == 2 })
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.runs.Load(); got != 1 {
		t.Fatalf("the handler ran %d times, want once", got)
	}
}

// A leader lost between the two attempts of a request (its reply lost
// with the connection, then its port refusing the retry) may have run
// it: the request is unavailable, never sent to the next leader, where
// it would run a second time (docs/cluster.md "Lost replies").
func TestALeaderLostBetweenTwoAttemptsRunsNothingTwice(t *testing.T) {
	ms := startMembers(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	const p = partition.ID(45)
	leadOnly(p, b, ms)
	c.n.Host(p) // the next leader
	close(c.release)
	px := peertest.NewProxy(t, b.peers.Addr())
	a.table.Set(p, px.Addr(), 2)

	done := make(chan error, 1)
	go func() {
		_, err := getUser(a, identitiesOf(p, 1)[0], "block")
		done <- err
	}()
	eventually.True(t, "the first run to start", func() bool { return b.runs.Load() == 1 })
	a.table.Set(p, c.peers.Addr(), 3) // the next leader, known before the retry fails
	px.Kill()
	err := <-done
	close(b.release)
	wantUnavailable(t, err)
	if got := c.runs.Load(); got != 0 {
		t.Fatalf("the next leader ran the request %d times after the first may have, want none", got)
	}
}

// A leader that does not answer within the request timeout (cut off from
// this node by a network partition, which holds the request, or stalled)
// is unavailable, as an unreachable one is: never the 500 of an internal
// error (the partition run of e2e met one).
func TestForwardedTimeoutIsUnavailable(t *testing.T) {
	const p = partition.ID(41)
	a, b := forwardingPair(t, p)
	a.n.requests = deadline.NewShared(200 * time.Millisecond)
	_, err := getUser(a, identitiesOf(p, 1)[0], "block")
	close(b.release)
	wantUnavailable(t, err)
}

func TestConcurrentForwardedRequests(t *testing.T) {
	const p = partition.ID(50)
	a, b := forwardingPair(t, p)
	ids := identitiesOf(p, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			want := string(rune('a'+i%26)) + string(rune('a'+i/26))
			r, err := getUser(a, ids[i%len(ids)], want)
			if err == nil && (r.User.Id != want || r.User.DisplayName != "B") {
				err = errors.New("crossed replies: " + r.User.Id + " for " + want)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if b.runs.Load() != 200 {
		t.Fatalf("%d runs on B, want 200", b.runs.Load())
	}
}

// A node that does not host a partition and has no forwarding answers 503
// unavailable (it was a 500 before), and still says ErrNotHosted.
func TestNotHostedWithoutForwardingIsUnavailable(t *testing.T) {
	n := hostingNode(t)
	const p = partition.ID(60)
	n.Release(p)
	t.Cleanup(func() { n.Host(p) })
	_, err := Call[*kitpb.UserReply](n, "echo", identitiesOf(p, 1)[0], &kitpb.GetUser{UserId: "u"})
	wantUnavailable(t, err)
	if !errors.Is(err, ErrNotHosted) {
		t.Fatalf("%v does not say ErrNotHosted", err)
	}
}

// forwardOf is the Forward of msg for the test kind.
func forwardOf(t testing.TB, identity string, msg proto.Message) *kitpb.Forward {
	payload, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &kitpb.Forward{Kind: "fwd", Identity: identity, RequestType: string(msg.ProtoReflect().Descriptor().FullName()), Request: payload}
}

// A Forward this node cannot run is refused with an error, logged, and
// never panics or reaches an actor.
func TestMalformedForwardIsRefused(t *testing.T) {
	ms := startMembers(t, 2)
	a, b := ms[0], ms[1]
	id := identitiesOf(partition.ID(61), 1)[0]
	good := forwardOf(t, id, &kitpb.GetUser{UserId: "u"})
	edit := func(f func(*kitpb.Forward)) proto.Message {
		fw := proto.Clone(good).(*kitpb.Forward)
		f(fw)
		return fw
	}
	tests := []struct {
		name string
		msg  proto.Message
	}{
		{"an unknown kind", edit(func(f *kitpb.Forward) { f.Kind = "nope" })},
		{"an unknown request type", edit(func(f *kitpb.Forward) { f.RequestType = "kit.v1.NoSuchThing" })},
		{"a type of another package", edit(func(f *kitpb.Forward) { f.RequestType = "actor.PID" })},
		{"a Forward inside a Forward", edit(func(f *kitpb.Forward) { f.RequestType = "kit.v1.Forward" })},
		{"a Failure as a request", edit(func(f *kitpb.Forward) { f.RequestType = "kit.v1.Failure"; f.Request = nil })},
		{"a request that does not decode", edit(func(f *kitpb.Forward) { f.Request = []byte{0xff, 0xff, 0xff} })},
		{"a message that is not a Forward", &kitpb.GetUser{UserId: "u"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := b.peers.Stats().Refused
			_, err := a.peers.Call(context.Background(), b.peers.Addr(), tt.msg, "")
			if !errors.Is(err, peer.ErrRefused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if b.runs.Load() != 0 {
				t.Fatal("an actor ran it")
			}
			if b.peers.Stats().Refused != refused+1 {
				t.Fatal("the refusal was not counted (and logged) by the transport")
			}
		})
	}
	t.Run("the connection stays up", func(t *testing.T) {
		if res, err := a.peers.Call(context.Background(), b.peers.Addr(), good, ""); err != nil || res.(*kitpb.UserReply).User.Id != "u" {
			t.Fatalf("got %v, %v", res, err)
		}
	})
}

func FuzzDecodeForward(f *testing.F) {
	n, err := Start(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		&Kind{Name: "fwd", New: func(string) actor.Actor { return echo{} }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(n.Stop)
	seed, _ := proto.Marshal(&kitpb.GetUser{UserId: "u"})
	f.Add("fwd", "kit.v1.GetUser", seed)
	f.Add("fwd", "kit.v1.Forward", seed)
	f.Add("nope", "kit.v1.GetUser", []byte{0xff})
	f.Add("fwd", "kit.v1.CreateWorkspace", []byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, kind, typ string, payload []byte) {
		req, err := n.decodeForward(&kitpb.Forward{Kind: kind, RequestType: typ, Request: payload})
		if (req == nil) == (err == nil) {
			t.Fatalf("decode gave %v and %v", req, err)
		}
		if err == nil && req.ProtoReflect().Descriptor().FullName().Parent() != kitPackage {
			t.Fatalf("decoded a %s", req.ProtoReflect().Descriptor().FullName())
		}
	})
}

func TestRoutingTable(t *testing.T) {
	const p = partition.ID(3)
	type step struct {
		op       string // set, learn, forget
		addr     string
		term     uint64
		changed  bool
		wantAddr string // "" : unknown
		wantTerm uint64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"an empty table knows no leader", []step{{op: "forget", wantAddr: ""}}},
		{"set then a newer term replaces", []step{{"set", "x", 1, true, "x", 1}, {"set", "y", 2, true, "y", 2}}},
		{"an older term is refused", []step{{"set", "x", 5, true, "x", 5}, {"set", "y", 4, false, "x", 5}}},
		{"set accepts the same term again", []step{{"set", "x", 5, true, "x", 5}, {"set", "y", 5, true, "y", 5}}},
		{"learn needs a newer term", []step{{"set", "x", 5, true, "x", 5}, {"learn", "y", 5, false, "x", 5}, {"learn", "y", 6, true, "y", 6}}},
		{"forget keeps the term: an older answer cannot bring the old leader back", []step{
			{"set", "x", 5, true, "x", 5}, {op: "forget"}, {"learn", "x", 5, false, "", 0}, {"set", "w", 4, false, "", 0}, {"set", "y", 6, true, "y", 6}}},
		{"learning an empty leader leaves it unknown", []step{{"learn", "", 2, true, "", 0}, {"set", "x", 1, false, "", 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRoutingTable()
			for i, s := range tt.steps {
				var changed bool
				switch s.op {
				case "set":
					changed = rt.Set(p, s.addr, s.term)
				case "learn":
					changed = rt.Learn(p, Leader{s.addr, s.term})
				case "forget":
					rt.Forget(p)
					changed = s.changed
				}
				if changed != s.changed {
					t.Fatalf("step %d: changed %v, want %v", i, changed, s.changed)
				}
				l, ok := rt.Leader(p)
				if ok != (s.wantAddr != "") || ok && l != (Leader{s.wantAddr, s.wantTerm}) {
					t.Fatalf("step %d: leader %v %v, want %q in %d", i, l, ok, s.wantAddr, s.wantTerm)
				}
			}
		})
	}
}

func TestReplyCache(t *testing.T) {
	var now time.Time
	clock := func() time.Time { return now }
	reply := func(s string) proto.Message { return &kitpb.UserReply{User: &kitpb.User{Id: s}} }
	tests := []struct {
		name string
		run  func(t *testing.T, c *replyCache, runs *int)
	}{
		{"a repeated id gets the first answer without running", func(t *testing.T, c *replyCache, runs *int) {
			do(t, c, runs, "a", reply("1"), "1")
			do(t, c, runs, "a", reply("2"), "1")
			wantRuns(t, *runs, 1)
		}},
		{"an empty id always runs", func(t *testing.T, c *replyCache, runs *int) {
			do(t, c, runs, "", reply("1"), "1")
			do(t, c, runs, "", reply("2"), "2")
			wantRuns(t, *runs, 2)
		}},
		{"a Moved answer is not kept", func(t *testing.T, c *replyCache, runs *int) {
			do(t, c, runs, "a", &kitpb.Moved{}, "")
			do(t, c, runs, "a", reply("2"), "2")
			wantRuns(t, *runs, 2)
		}},
		{"the oldest id leaves when the cache is full", func(t *testing.T, c *replyCache, runs *int) {
			for _, id := range []string{"a", "b", "c", "d"} {
				do(t, c, runs, id, reply(id), id)
			}
			do(t, c, runs, "a", reply("again"), "again")
			do(t, c, runs, "d", reply("x"), "d")
			wantRuns(t, *runs, 5)
			if c.len() != 3 {
				t.Fatalf("%d entries, want 3", c.len())
			}
		}},
		{"the oldest answers leave when their bytes are over the bound", func(t *testing.T, _ *replyCache, runs *int) {
			big := func(id string) proto.Message {
				return &kitpb.UserReply{User: &kitpb.User{Id: id, DisplayName: strings.Repeat("x", 1000)}}
			}
			c := newReplyCache(100, 2500, 2*time.Minute, clock)
			for _, id := range []string{"a", "b", "c"} {
				do(t, c, runs, id, big(id), id)
			}
			do(t, c, runs, "a", reply("again"), "again")
			do(t, c, runs, "c", reply("x"), "c")
			wantRuns(t, *runs, 4)
			if c.bytes > 2500 {
				t.Fatalf("%d bytes kept, bound 2500", c.bytes)
			}
		}},
		{"an id older than its time is forgotten", func(t *testing.T, c *replyCache, runs *int) {
			do(t, c, runs, "a", reply("1"), "1")
			now = now.Add(time.Minute)
			do(t, c, runs, "a", reply("2"), "1")
			now = now.Add(time.Minute + time.Second)
			do(t, c, runs, "a", reply("3"), "3")
			wantRuns(t, *runs, 2)
		}},
		{"a retry waits for the first run's answer", func(t *testing.T, c *replyCache, runs *int) {
			started, finish := make(chan struct{}), make(chan struct{})
			go c.do(context.Background(), "a", func() (proto.Message, error) {
				close(started)
				<-finish
				return reply("first"), nil
			})
			<-started
			got := make(chan proto.Message)
			go func() {
				res, _ := c.do(context.Background(), "a", func() (proto.Message, error) { return reply("second"), nil })
				got <- res
			}()
			close(finish)
			if r := (<-got).(*kitpb.UserReply); r.User.Id != "first" {
				t.Fatalf("got %s, want the first run's answer", r.User.Id)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = time.Unix(1_800_000_000, 0)
			runs := 0
			tt.run(t, newReplyCache(3, 1<<20, 2*time.Minute, clock), &runs)
		})
	}
}

func do(t *testing.T, c *replyCache, runs *int, id string, res proto.Message, want string) {
	t.Helper()
	got, err := c.do(context.Background(), id, func() (proto.Message, error) { *runs++; return res, nil })
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := got.(*kitpb.UserReply); ok && r.User.Id != want || !ok && want != "" {
		t.Fatalf("got %v, want %q", got, want)
	}
}

func wantRuns(t *testing.T, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("%d runs, want %d", got, want)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
