package membership

import (
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kitd/kitd/internal/eventually"
)

func TestWrongKeyCannotJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"a node with another cluster key stays alone", "another secret"},
		{"a node without a cluster key stays alone", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, 2, withKey("the secret"))
			stranger := startNode(t, "stranger", withKey(tc.key), joining(nodes[0].Addr()))
			// Start succeeded (a refused join looks like a seed that is
			// down); the node retries. Three refused tries are the proof.
			eventually.TrueWithin(t, convergeWithin, "the stranger tried to join three times", func() bool { return stranger.joinAttempts.Load() >= 3 })
			if stranger.Joined() {
				t.Fatal("the stranger counts itself joined")
			}
			if got := stranger.Nodes(); len(got) != 1 || got[0].Name != "stranger" {
				t.Fatalf("the stranger sees %v", got)
			}
			for _, n := range nodes {
				if _, ok := n.node("stranger"); ok || len(n.Nodes()) != 2 {
					t.Fatalf("%s lists %v", n.name, n.Nodes())
				}
			}
			if !stranger.log.contains("no seed answered") {
				t.Fatal("the stranger's log does not say its joins failed")
			}
		})
	}
}

func TestGarbageOnTheGossipPortChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []nodeOpt
	}{
		{"garbage to an encrypted cluster changes nothing", []nodeOpt{withKey("the secret")}},
		{"garbage to a plaintext cluster changes nothing", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, 3, tc.opts...)
			before := nodes[0].Nodes()
			target := nodes[0].Addr()
			junk := make([]byte, 512)
			udp, err := net.Dial("udp", target)
			if err != nil {
				t.Fatal(err)
			}
			defer udp.Close()
			// Every first byte (memberlist's message type) with random
			// bodies of every length class, over UDP and TCP.
			for typ := range 256 {
				_, _ = rand.Read(junk)
				junk[0] = byte(typ)
				for _, n := range []int{1, 2, 17, 64, 512} {
					_, _ = udp.Write(junk[:n])
				}
				tcp, err := net.DialTimeout("tcp", target, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = tcp.SetDeadline(time.Now().Add(time.Second))
				_, _ = tcp.Write(junk[:1+typ%len(junk)])
				_, _ = io.Copy(io.Discard, tcp) // until the node hangs up
				tcp.Close()
			}
			// Gossip still works: a change made after the garbage arrives.
			if err := nodes[1].UpdateMeta(func(m *Meta) { m.Led, m.Replicated = 1, 1 }); err != nil {
				t.Fatal(err)
			}
			eventually.TrueWithin(t, convergeWithin, "n0 sees n1's update made after the garbage", func() bool {
				mb, _ := nodes[0].node("n1")
				return mb.Meta.Led == 1
			})
			eventually.TrueWithin(t, convergeWithin, "n0 lists the same members, all alive", func() bool {
				after := nodes[0].Nodes()
				if len(after) != len(before) {
					return false
				}
				for i := range after {
					if after[i].Name != before[i].Name || after[i].Addr != before[i].Addr || after[i].Meta.SystemID != before[i].Meta.SystemID || after[i].State != StateAlive {
						return false
					}
				}
				return true
			})
		})
	}
}

// rawPeer is a memberlist node that is not a kitd: its metadata is not a
// Meta, and it sends messages kitd never sends.
type rawPeer struct{ meta []byte }

func (p rawPeer) NodeMeta(int) []byte               { return p.meta }
func (rawPeer) NotifyMsg([]byte)                    {}
func (rawPeer) GetBroadcasts(int, int) [][]byte     { return nil }
func (rawPeer) LocalState(bool) []byte              { return nil }
func (rawPeer) MergeRemoteState(buf []byte, _ bool) {}

func TestAPeerThatIsNotKitdIsIgnored(t *testing.T) {
	nodes := startCluster(t, 2)
	events := collect(nodes[0].Membership)
	good, _ := validMeta().encode()
	for i, tc := range []struct {
		name string
		meta []byte
		msg  []byte
	}{
		{"a peer whose meta is garbage is ignored", []byte("not a kitd meta"), []byte("hello")},
		{"a peer whose meta is truncated is ignored", good[:len(good)-1], append([]byte{goodbyeMsg}, "short"...)},
		{"a peer whose meta is empty is ignored", nil, append([]byte{goodbyeMsg}, make([]byte, systemIDLen)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := memberlist.DefaultLocalConfig()
			name := fmt.Sprint("raw", i)
			cfg.Name, cfg.BindAddr, cfg.BindPort = name, "127.0.0.1", 0
			cfg.Delegate = rawPeer{meta: tc.meta}
			cfg.Logger = log.New(io.Discard, "", 0)
			raw, err := memberlist.Create(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Shutdown()
			if _, err := raw.Join([]string{nodes[0].Addr()}); err != nil {
				t.Fatal(err)
			}
			// The kitd nodes by name: the raw peer of an earlier row may
			// still be listed, gone but not yet found dead.
			kitds := func() []*memberlist.Node {
				var out []*memberlist.Node
				for _, m := range raw.Members() {
					if slices.ContainsFunc(nodes, func(n *testNode) bool { return n.name == m.Name }) {
						out = append(out, m)
					}
				}
				return out
			}
			eventually.TrueWithin(t, convergeWithin, "the raw peer sees both nodes", func() bool { return len(kitds()) == len(nodes) })
			for _, n := range kitds() {
				if err := raw.SendReliable(n, tc.msg); err != nil {
					t.Fatal(err)
				}
			}
			eventually.TrueWithin(t, convergeWithin, "n0 logged the peer's meta and message as ignored", func() bool {
				return nodes[0].log.contains(`msg="membership: ignoring a member's meta" node=n0 member=`+name) &&
					nodes[0].log.count("ignoring an unknown gossip message") == i+1
			})
			if err := raw.Leave(time.Second); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if _, ok := n.node(name); ok {
					t.Fatalf("%s lists the raw peer", n.name)
				}
			}
			eventually.TrueWithin(t, convergeWithin, "n0 and n1 see each other alive", func() bool {
				a, _ := nodes[0].node("n1")
				b, _ := nodes[1].node("n0")
				return a.State == StateAlive && b.State == StateAlive
			})
			if events.saw(EventJoin, name, nil) || events.saw(EventFail, name, nil) || events.saw(EventLeave, name, nil) {
				t.Fatal("n0's consumer was told of the raw peer")
			}
		})
	}
}
