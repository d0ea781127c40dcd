package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/e2e/clusterview"
	"github.com/kitd/kitd/e2e/jepsen"
	"github.com/kitd/kitd/internal/eventually"
)

// A cluster of real kitd processes on loopback: the first node founds it,
// the others join it by its gossip address (printed on start).
type testCluster struct {
	nodes []*Server
	key   string
	op    string
	dirs  []string
	names []string
	// In a cluster that can be partitioned (cuttable): the proxy in
	// front of each node's node-to-node listener, which it advertises.
	cuttable bool
	peers    []*jepsen.Proxy
	// replicas is the --replicas the nodes run with, which waitSettled
	// waits for; 0: kitd's default, 3.
	replicas int
	// bins are the binaries of the nodes by index, for a cluster of mixed
	// builds (a rolling upgrade); "" or none: the binary under test.
	bins []string
}

var clusterLine = regexp.MustCompile(`kitd cluster: gossip on (\S+), node-to-node on (\S+)`)

// gossipAddr is the gossip address a node printed.
func (s *Server) gossipAddr(t testing.TB) string {
	t.Helper()
	return s.clusterAddr(t, 1)
}

// clusterAddr is the address a node printed on its cluster line: 1 for
// gossip, 2 for node-to-node.
func (s *Server) clusterAddr(t testing.TB, which int) string {
	t.Helper()
	var m [][]byte
	if !eventually.Holds(eventually.Within, func() bool {
		s.out.mu.Lock()
		defer s.out.mu.Unlock()
		m = clusterLine.FindSubmatch(s.out.buf)
		return m != nil
	}) {
		t.Fatalf("kitd printed no cluster line; output:\n%s", s.tail(4<<10))
	}
	return string(m[which])
}

// startCluster starts n nodes, and waits until every partition has
// min(3, n) replicas and every node leads some.
func startCluster(t *testing.T, n int, args ...string) *testCluster {
	t.Helper()
	c := newTestCluster()
	for i := 0; i < n; i++ {
		c.add(t, args...)
	}
	c.waitSettled(t, n)
	return c
}

func newTestCluster() *testCluster {
	var k [32]byte
	_, _ = rand.Read(k[:])
	return &testCluster{key: hex.EncodeToString(k[:]), op: "op_" + randToken()}
}

// startPartitionableCluster is startCluster for n nodes that a test can
// cut off from each other (cutOff). Node i has a loopback address of its
// own, 127.0.0.(11+i), for gossip and node-to-node traffic; its peer
// transport listens there and dials from there. The others reach it
// through a proxy, which it advertises (--peer-advertise). So every
// connection between two nodes crosses the proxy of the node it was
// dialed to, which tells the dialer by its source address.
func startPartitionableCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c := newTestCluster()
	c.cuttable = true
	for i := 0; i < n; i++ {
		c.add(t)
	}
	c.waitSettled(t, n)
	return c
}

// host is node i's own loopback address in a cluster that can be
// partitioned: none of the 127.0.0.1 that everything else uses, so that a
// partition from a node's address holds nothing but that node's traffic.
func (c *testCluster) host(i int) string { return fmt.Sprintf("127.0.0.%d", 11+i) }

// cutOff partitions node i from every other node, both ways: its own
// proxy holds every connection to it, and the others' proxies hold the
// connections it dialed. Gossip is not cut (it decides nothing: raft
// does), nor are clients.
func (c *testCluster) cutOff(i int) {
	for j, p := range c.peers {
		if j == i {
			p.Partition()
		} else {
			p.Partition(c.host(i))
		}
	}
}

// peerTraffic is, for each node's proxy, the bytes it passed by source
// host.
func (c *testCluster) peerTraffic() []map[string]int64 {
	var out []map[string]int64
	for _, p := range c.peers {
		out = append(out, p.Passed())
	}
	return out
}

// wantCutOff checks the node-to-node traffic between two peerTraffic
// snapshots taken while node i was cut off: nothing reached i, and the
// others' proxies passed only the connections of the nodes that were not
// cut off (some, since they talk). A node whose connections did not leave
// from its own address would show here as a host that is no node's.
func (c *testCluster) wantCutOff(t *testing.T, i int, before, after []map[string]int64) {
	t.Helper()
	others := map[string]bool{}
	for j := range c.peers {
		if j != i {
			others[c.host(j)] = true
		}
	}
	var between int64
	for j := range c.peers {
		for host, n := range after[j] {
			n -= before[j][host]
			switch {
			case n == 0:
			case j == i:
				t.Errorf("%d bytes from %s reached %s while it was cut off", n, host, c.names[i])
			case !others[host]:
				t.Errorf("%d bytes from %s, no node that was left connected, reached %s", n, host, c.names[j])
			default:
				between += n
			}
		}
	}
	if between == 0 {
		t.Errorf("the nodes left connected exchanged nothing while %s was cut off", c.names[i])
	}
	t.Logf("while %s was cut off, the others exchanged %d bytes node to node, and nothing crossed to or from it", c.names[i], between)
}

// heal ends every partition; what it held is delivered.
func (c *testCluster) heal() {
	for _, p := range c.peers {
		p.Heal()
	}
}

// add starts one more node, joining the first.
func (c *testCluster) add(t *testing.T, args ...string) *Server {
	t.Helper()
	i := len(c.nodes)
	name := fmt.Sprintf("n%d", i+1)
	dir := t.TempDir()
	c.dirs, c.names = append(c.dirs, dir), append(c.names, name)
	if c.cuttable {
		p, err := jepsen.NewProxy("") // its node's port is known once it runs
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		c.peers = append(c.peers, p)
	}
	s := c.start(t, i, dir, name, args...)
	c.nodes = append(c.nodes, s)
	return s
}

// start runs node i on dir (a restart passes the dir of a node that ran).
func (c *testCluster) start(t *testing.T, i int, dir, name string, args ...string) *Server {
	t.Helper()
	bind := "127.0.0.1:0"
	if c.cuttable {
		bind = c.host(i) + ":0"
		args = append([]string{"--peer-advertise", c.peers[i].Addr()}, args...)
	}
	a := []string{"--node-name", name, "--cluster-bind", bind, "--cluster-key", c.key}
	if i > 0 {
		a = append(a, "--join", c.nodes[0].gossipAddr(t))
	}
	bin := ""
	if i < len(c.bins) {
		bin = c.bins[i]
	}
	s := startServerOpts(t, ServerOpts{DataDir: dir, OpToken: c.op, Limits: "off", Bin: bin, Args: append(a, args...)})
	if c.cuttable {
		c.peers[i].SetUpstream(s.clusterAddr(t, 2))
	}
	return s
}

// clusterView is GET /ops/v1/cluster of a node.
type clusterView = clusterview.View

func (c *testCluster) view(t testing.TB, s *Server) (clusterView, error) {
	r, err := s.request("GET", "/ops/v1/cluster", c.op, nil, nil)
	if err != nil {
		return clusterView{}, err
	}
	var v clusterView
	if r.Status != 200 {
		return v, fmt.Errorf("GET /ops/v1/cluster: %d %s", r.Status, r.Body)
	}
	return v, json.Unmarshal(r.Body, &v)
}

// waitSettled waits until the live nodes (want of them) are alive, every
// partition is replicated on min(3, want) of them and led by one, and
// each leads at least one.
// ledBy is the partitions the member name leads, as node via sees them.
func (c *testCluster) ledBy(t *testing.T, via *Server, name string) map[int]bool {
	t.Helper()
	v, err := c.view(t, via)
	if err != nil {
		t.Fatal(err)
	}
	led := map[int]bool{}
	for _, m := range v.Members {
		if m.Name == name {
			for _, p := range m.Led {
				led[p] = true
			}
		}
	}
	return led
}

func (c *testCluster) waitSettled(t *testing.T, want int) {
	t.Helper()
	eventually.NoErrorWithin(t, 60*time.Second, "the cluster settles", func() error {
		if why := c.settled(t, want); why != "" {
			return errors.New(why)
		}
		return nil
	})
}

func (c *testCluster) settled(t *testing.T, want int) string {
	replicas := 3
	if c.replicas > 0 {
		replicas = c.replicas
	}
	for _, s := range c.live() {
		v, err := c.view(t, s)
		if err != nil {
			return err.Error()
		}
		if why := v.UnsettledOn(want, replicas); why != "" {
			return why
		}
	}
	return ""
}

// waitStable waits until node 1's view of who leads what stays the same
// for a second: after a heal, leaderships move back for a while, and a
// write that meets a move is a (legitimate) 503 that a test's set-up does
// not expect.
func (c *testCluster) waitStable(t *testing.T) {
	t.Helper()
	var last string
	since := time.Now()
	eventually.TrueWithin(t, 30*time.Second, "the leaderships stay put for a second", func() bool {
		v, err := c.view(t, c.nodes[0])
		if err != nil {
			last, since = "", time.Now()
			return false
		}
		var led []string
		for _, m := range v.Members {
			led = append(led, fmt.Sprint(m.Name, m.Led))
		}
		if now := strings.Join(led, ";"); now != last {
			last, since = now, time.Now()
			return false
		}
		return time.Since(since) >= time.Second
	})
}

// live lists the nodes that run.
func (c *testCluster) live() []*Server {
	var out []*Server
	for _, s := range c.nodes {
		if !s.exited() {
			out = append(out, s)
		}
	}
	return out
}

func (c *testCluster) String() string { return strings.Join(c.names, ",") }
