package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/internal/partition"
)

// A member gone past --down-timeout loses its replicas: the leaders remove
// it from their groups, and the two left commit alone. When it comes back
// on its directory it is added again, catches up on what was written while
// it was away, and every group has three voters again (docs/cluster.md "Goals").
func TestClusterRemovedNodeReturns(t *testing.T) {
	// --forget-after 1s: the returning node may forget a replica its
	// group removed before the group adds it back, or be added back
	// first; either way it ends with every group, filled again.
	c := startCluster(t, 3, "--down-timeout", "2s", "--forget-after", "1s")
	env := newBotEnv(t, c.nodes[0])
	want(t, c.nodes[0].api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "before"), nil), 201)

	c.nodes[2].kill()
	c.waitVoters(t, 2*partition.Count)
	want(t, c.nodes[1].api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "while away"), nil), 201)

	back := c.rejoin(t, 2, "--forget-after", "1s")
	c.waitVoters(t, 3*partition.Count)
	c.waitSettled(t, 3)
	c.waitMetricSum(t, "groups on the nodes", 3*partition.Count, "kitd_raft_groups")
	t.Logf("replicas forgotten: %v", c.metricSum(t, "kitd_raft_replicas_forgotten_total"))
	var texts []string
	for _, m := range walk(t, back, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 10) {
		texts = append(texts, fmt.Sprint(m["text"]))
	}
	if fmt.Sprint(texts) != "[while away before]" {
		t.Errorf("the returned node reads %v, want [while away before]", texts)
	}
}

// waitVoters waits until the groups' leaders count want voters in all, by
// their metrics.
func (c *testCluster) waitVoters(t *testing.T, want int) {
	t.Helper()
	c.waitMetricSum(t, "voters counted by the leaders", want, "kitd_raft_voters")
}

// waitLiveReplicas waits until the live nodes hold want replicas in all,
// by their metrics.
func (c *testCluster) waitLiveReplicas(t *testing.T, want int) {
	t.Helper()
	c.waitMetricSum(t, "replicas held by the live nodes", want, "kitd_raft_partitions", "role", "replica")
}

// waitMetricSum waits up to 60 s until a series summed over the live
// nodes' /metrics is want.
func (c *testCluster) waitMetricSum(t *testing.T, what string, want int, family string, labels ...string) {
	t.Helper()
	eventually.NoErrorWithin(t, 60*time.Second, what, func() error {
		got := 0.0
		for _, s := range c.live() {
			r, err := s.request("GET", "/metrics", c.op, nil, nil)
			if err != nil || r.Status != 200 {
				continue
			}
			got += metricstest.Value(metricstest.Parse(t, r.Body), family, labels...)
		}
		if got != float64(want) {
			return fmt.Errorf("%v, want %d", got, want)
		}
		return nil
	})
}

// metricSum is family's value summed over the live nodes now.
func (c *testCluster) metricSum(t *testing.T, family string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, s := range c.live() {
		r, err := s.request("GET", "/metrics", c.op, nil, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("/metrics: %v %v", err, r)
		}
		sum += metricstest.Value(metricstest.Parse(t, r.Body), family, labels...)
	}
	return sum
}

// rejoin starts node i again on its data directory, joining a live node.
func (c *testCluster) rejoin(t *testing.T, i int, args ...string) *Server {
	t.Helper()
	var join *Server
	for j, s := range c.nodes {
		if j != i && !s.exited() {
			join = s
			break
		}
	}
	a := []string{"--node-name", c.names[i], "--cluster-bind", "127.0.0.1:0", "--cluster-key", c.key, "--join", join.gossipAddr(t)}
	s := startServerOpts(t, ServerOpts{DataDir: c.dirs[i], OpToken: c.op, Limits: "off", Args: append(a, args...)})
	c.nodes[i] = s
	return s
}

// With more nodes than replicas, the replicas a dead member held are
// re-created on the others once it has been gone for --down-timeout:
// every partition is back on three live nodes, with three voters, and
// what was written before and after is read through every live node
// (docs/cluster.md "Goals": lost replicas are re-created elsewhere).
func TestClusterRecreatesLostReplicasElsewhere(t *testing.T) {
	c := startCluster(t, 4, "--down-timeout", "2s")
	env := newBotEnv(t, c.nodes[0])
	want(t, c.nodes[0].api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "before"), nil), 201)

	victim := c.busiest(t)
	c.nodes[victim].kill()
	c.waitLiveReplicas(t, 3*partition.Count)
	c.waitVoters(t, 3*partition.Count)

	var via *Server
	for _, s := range c.live() {
		via = s
	}
	want(t, via.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "after"), nil), 201)
	for _, s := range c.live() {
		var texts []string
		for _, m := range walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 10) {
			texts = append(texts, fmt.Sprint(m["text"]))
		}
		if fmt.Sprint(texts) != "[after before]" {
			t.Errorf("%s reads %v, want [after before]", s.Addr, texts)
		}
	}
}
