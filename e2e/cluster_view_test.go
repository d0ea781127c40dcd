package e2e

import "testing"

// GET /ops/v1/cluster (OPERATIONS.md section 7) on a single node: the node
// by the name it was given, the one member alive at its HTTP address,
// hosting every partition.
func TestClusterViewOfASingleNode(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Args: []string{"--node-name", "n1"}})
	w := newWorkspace(t, s)
	w.channel(t, "public", w.members()...) // some activations

	r := s.ops(t, "GET", "/ops/v1/cluster", nil)
	want(t, r, 200)
	for _, tc := range []struct {
		rule string
		ok   bool
	}{
		{"the node is named by --node-name", r.Str("node") == "n1"},
		{"there is one member", len(jarr(r.JSON, "members")) == 1},
		{"the member is the node", r.Str("members.0.name") == "n1"},
		{"the member is alive", r.Str("members.0.state") == "alive"},
		{"the member's httpAddr is where it listens", r.Str("members.0.httpAddr") == s.Addr},
		{"a single node leads every partition", len(jarr(r.JSON, "members.0.partitionsLed")) == 64 && r.Get("partitions") == float64(64)},
		{"the member counts its activations", r.Get("members.0.activations").(float64) > 0},
	} {
		if !tc.ok {
			t.Errorf("%s%s", tc.rule, r)
		}
	}
	t.Run("the view needs the operator token", func(t *testing.T) {
		want(t, s.do(t, "GET", "/ops/v1/cluster", "", nil, nil), 401)
	})
}
