package clusternode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/cluster/membership"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
	"github.com/kitd/kitd/replica"
)

// nothingHosted is replica.Hosts for a replica whose partitions nobody
// serves.
type nothingHosted struct{}

func (nothingHosted) Host(partition.ID)    {}
func (nothingHosted) Release(partition.ID) {}

// A node whose groups run serves none of its partitions until it is
// opened: until then its actors would commit outside the groups.
func TestANodeServesNoPartitionUntilOpened(t *testing.T) {
	s, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := replica.Start(ctx, replica.Config{Store: s, Hosts: nothingHosted{}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	m := &Node{}
	m.started.Store(rep)
	const p = partition.ID(3)
	if !rep.LeaseValid(p) {
		t.Fatal("the replica alone holds no lease: nothing to gate")
	}
	if m.leaseValid(p) {
		t.Error("a node serves a partition before it is opened")
	}
	m.Open()
	if !m.leaseValid(p) {
		t.Error("an opened node does not serve the partition it leads")
	}
}

// A proposal sent to a leader that took it and then went down (its
// reply lost with the connection, its port refusing the retry) may be in
// its log: it is not dropped, which Log would send to the next leader,
// where it would apply a second time, after whatever came meanwhile.
func TestAProposalWhoseReplyWasLostIsNotDropped(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	var received atomic.Int64
	block := make(chan struct{})
	leader, err := peer.Listen(peer.Config{NodeName: "leader", ListenAddr: "127.0.0.1:0", ClusterKey: []byte(key), Registry: registry(),
		Handler: func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
			received.Add(1)
			<-block
			return &kitpb.Ok{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(block); leader.Close() }()
	px := peertest.NewProxy(t, leader.Addr())
	sender, err := peer.Listen(peer.Config{NodeName: "sender", ListenAddr: "127.0.0.1:0", ClusterKey: []byte(key), Registry: registry()})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	m := &Node{pt: sender}
	dir := map[uint64]string{7: px.Addr()}
	m.dir.Store(&dir)
	m.reqs.prefix = randomPrefix()

	done := make(chan error, 1)
	go func() { done <- m.remotePropose(context.Background(), 7, 3, []byte("entry")) }()
	eventually.True(t, "the leader to receive the entry", func() bool { return received.Load() == 1 })
	px.Kill()
	err = <-done
	if err == nil || errors.Is(err, multiraft.ErrProposalDropped) {
		t.Fatalf("a proposal the leader received, then lost with it: %v; want an outcome unknown, never dropped", err)
	}
}

// startMember starts a gossip member that says it carries raft id at
// the node-to-node address peerAddr.
func startMember(t *testing.T, name string, raftID uint64, peerAddr string, join ...string) *membership.Membership {
	t.Helper()
	m, err := membership.Start(membership.Config{
		NodeName: name, BindAddr: "127.0.0.1:0", Join: join, ClusterKey: "0123456789abcdef0123456789abcdef",
		Meta: membership.Meta{HTTPAddr: "127.0.0.1:1", PeerAddr: peerAddr, RaftID: raftID, State: membership.StateAlive},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)
	return m
}

// A node restarted on its data directory keeps its raft id, but may come
// back under another name (--node-name defaults to the host name, which
// a container changes at every start) and address: its raft id leads to
// its new address, whichever name gossip sorts first.
func TestARaftIDLeadsToTheMemberThatCarriesItNow(t *testing.T) {
	for _, tc := range []struct{ name, before, after, addr string }{
		{"the new name sorts first", "web-7f9c", "web-2ab1", "127.0.0.1:7107"},
		{"the new name sorts last", "web-2ab1", "web-7f9c", "127.0.0.1:7107"},
		{"the former life's address again", "web-2ab1", "web-7f9c", "127.0.0.1:7007"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			observer := startMember(t, "observer", 1, "127.0.0.1:7001")
			m := &Node{ms: observer}
			before := startMember(t, tc.before, 7, "127.0.0.1:7007", observer.Addr())
			eventually.True(t, "the first life a member", func() bool { m.refreshDirectory(); return m.isMember(7) })
			before.Shutdown() // a crash
			eventually.True(t, "the first life dead", func() bool { m.refreshDirectory(); return !m.isMember(7) })
			startMember(t, tc.after, 7, tc.addr, observer.Addr())
			eventually.True(t, "the second life a member", func() bool { m.refreshDirectory(); return m.isMember(7) })
			if got, want := m.hasDeparted("127.0.0.1:7007"), tc.addr != "127.0.0.1:7007"; got != want {
				t.Fatalf("the first life's address departed: %v, want %v", got, want)
			}
			if a, _ := m.addr(7); a != tc.addr {
				t.Fatalf("raft id 7 leads to %s, want the second life's %s", a, tc.addr)
			}
		})
	}
}

// The cluster view (GET /ops/v1/cluster) says a dead member leads
// nothing: its gossip is its last word, and the partitions it led have
// other leaders, each partition led once in the view.
func TestADeadMemberLeadsNothingInTheView(t *testing.T) {
	observer := startMember(t, "observer", 1, "127.0.0.1:7001")
	m := &Node{ms: observer, cfg: Config{NodeName: "viewer"}}
	gone, err := membership.Start(membership.Config{
		NodeName: "gone", BindAddr: "127.0.0.1:0", Join: []string{observer.Addr()}, ClusterKey: "0123456789abcdef0123456789abcdef",
		Meta: membership.Meta{HTTPAddr: "127.0.0.1:1", PeerAddr: "127.0.0.1:7007", RaftID: 7, State: membership.StateAlive, Led: 0b110, Replicated: 0b111},
	})
	if err != nil {
		t.Fatal(err)
	}
	viewOf := func(name string) (cluster.NodeView, bool) {
		for _, v := range m.Nodes() {
			if v.Name == name {
				return v, true
			}
		}
		return cluster.NodeView{}, false
	}
	eventually.True(t, "the member leading two partitions in the view", func() bool {
		v, ok := viewOf("gone")
		return ok && v.State == "alive" && len(v.Led) == 2
	})
	gone.Shutdown() // a crash: no goodbye
	eventually.True(t, "the member dead in the view", func() bool {
		v, ok := viewOf("gone")
		return ok && v.State == "dead"
	})
	if v, _ := viewOf("gone"); len(v.Led) != 0 {
		t.Fatalf("a dead member leads %v in the view, want nothing", v.Led)
	}
}
