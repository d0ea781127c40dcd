package e2e

import (
	"testing"
	"time"

	"github.com/kitd/kitd/e2e/jepsen"
)

// The Jepsen-style runs of issue 15 on a cluster of three: 16 writers
// through every node, a fault while they write, then every conversation
// read back through every node and checked (jepsen.Check).

// clusterJepsen puts a proxy in front of each node of a three-node
// cluster, so that a node restarted on another port keeps its address.
func clusterJepsen(t *testing.T) (*testCluster, []*jepsenNode) {
	t.Helper()
	c := startCluster(t, 3)
	var nodes []*jepsenNode
	for _, s := range c.nodes {
		front, err := jepsen.NewProxy(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { front.Close() })
		nodes = append(nodes, &jepsenNode{t: t, srv: s, front: front})
	}
	return c, nodes
}

// restart starts node i again on its data directory (rejoin), behind its
// proxy.
func (c *testCluster) restart(t *testing.T, i int, n *jepsenNode) {
	t.Helper()
	s := c.rejoin(t, i)
	n.srv = s
	n.front.SetUpstream(s.Addr)
}

// busiest is the index of the node that leads the most partitions.
func (c *testCluster) busiest(t *testing.T) int {
	t.Helper()
	v, err := c.view(t, c.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	best, most := 0, -1
	for _, m := range v.Members {
		for i, name := range c.names {
			if m.Name == name && len(m.Led) > most {
				best, most = i, len(m.Led)
			}
		}
	}
	return best
}

// runClusterFault is runFault over a cluster of three.
func runClusterFault(t *testing.T, attemptTimeout time.Duration, fault func(c *testCluster, env *jepsenEnv)) jepsen.Outage {
	t.Helper()
	c, nodes := clusterJepsen(t)
	env := newJepsenEnv(t, nodes...)
	return runFault(t, env, 100*time.Second, attemptTimeout, func() { fault(c, env) })
}

// kill -9 of the node leading the most partitions, in the middle of the
// writes; the other two take its partitions over (issue 15's target: writes
// to an affected conversation fail for under 3 s); it comes back on its
// directory and rejoins.
func TestClusterJepsenKill9(t *testing.T) {
	var killed time.Time
	o := runClusterFault(t, 0, func(c *testCluster, env *jepsenEnv) {
		i := c.busiest(t)
		killed = time.Now()
		env.nodes[i].kill9()
		c.waitSettledAfterLoss(t, c.names[i])
		t.Logf("the other two lead every partition %v after the kill", time.Since(killed).Round(time.Millisecond))
		c.restart(t, i, env.nodes[i])
	})
	wantRecovered(t, "kill -9 of the busiest leader", o)
	t.Logf("issue 15's target for this window is 3 s")
}

// waitSettledAfterLoss waits until the live nodes, all but lost, lead
// every partition.
func (c *testCluster) waitSettledAfterLoss(t *testing.T, lost string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var ask *Server
	for _, s := range c.live() {
		if c.names[c.index(s)] != lost {
			ask = s
			break
		}
	}
	for {
		v, err := c.view(t, ask)
		if err == nil {
			led := map[int]bool{}
			for _, m := range v.Members {
				if m.State == "alive" && m.Name != lost {
					for _, p := range m.Led {
						led[p] = true
					}
				}
			}
			if len(led) == 64 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live nodes did not take every partition over in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SIGSTOP of the busiest leader for 3 s, well past its leases (under a
// second) and an election: the others take its partitions over; when it
// resumes, it answers nothing from its stale memory (its activations
// check their lease on every request) and follows the new leaders.
func TestClusterJepsenPausePastTheLease(t *testing.T) {
	o := runClusterFault(t, time.Second, func(c *testCluster, env *jepsenEnv) {
		i := c.busiest(t)
		env.nodes[i].pause()
		c.waitSettledAfterLoss(t, c.names[i])
		time.Sleep(time.Second) // the rest of the pause: its length, not a wait for anything
		env.nodes[i].resume()
	})
	wantRecovered(t, "SIGSTOP of the busiest leader for 3 s", o)
}

// A fourth node joins while the writers write (it gets a replica of every
// partition and a share of the leaderships), then one of the first three
// leaves by SIGTERM (it hands its leaderships over first); the checker
// reads everything back through the nodes that remain, the new one
// included.
func TestClusterJepsenJoinAndLeave(t *testing.T) {
	runClusterFault(t, 0, func(c *testCluster, env *jepsenEnv) {
		s := c.add(t)
		front, err := jepsen.NewProxy(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { front.Close() })
		c.waitSettled(t, 4)
		t.Logf("a fourth node joined and took a share of the leaderships")
		leaving := c.busiest(t)
		if !c.nodes[leaving].stopClean(t) {
			return
		}
		env.nodes = append(append([]*jepsenNode(nil), env.nodes[:leaving]...), env.nodes[leaving+1:]...)
		env.nodes = append(env.nodes, &jepsenNode{t: t, srv: s, front: front})
		c.waitSettledAfterLoss(t, c.names[leaving])
	})
}

// index is the position of node s.
func (c *testCluster) index(s *Server) int {
	for i, n := range c.nodes {
		if n == s {
			return i
		}
	}
	return -1
}
