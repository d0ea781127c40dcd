package membership

import (
	"testing"

	"github.com/kitd/kitd/internal/eventually"
)

// freeAddr returns a loopback gossip address no node holds now: one that
// a node bound with port 0 and gave back.
func freeAddr(t *testing.T) string {
	t.Helper()
	n := startNode(t, "placeholder")
	addr := n.Addr()
	n.Shutdown()
	return addr
}

func TestJoinWithSeedsDown(t *testing.T) {
	t.Run("a node whose seeds are all down starts alone and joins when one comes up", func(t *testing.T) {
		seed, self := freeAddr(t), freeAddr(t)
		// Listed in its own --join, as when every node gets the same
		// list: joining itself must not count as joining the cluster.
		first := startNode(t, "first", withBind(self), joining(self, seed))
		if got := first.Nodes(); len(got) != 1 || got[0].Name != "first" || got[0].State != StateAlive {
			t.Fatalf("a node with its seeds down lists %v", got)
		}
		eventually.TrueWithin(t, convergeWithin, "the node retried its seeds", func() bool { return first.joinAttempts.Load() >= 2 })
		if first.Joined() {
			t.Fatal("a node that joined only itself counts itself joined")
		}
		second := startNode(t, "second", withBind(seed)) // the seed comes back, joining nobody
		eventually.TrueWithin(t, convergeWithin, "the two found each other", func() bool {
			a, _ := first.node("second")
			b, _ := second.node("first")
			return a.State == StateAlive && b.State == StateAlive && first.Joined()
		})
	})
	t.Run("a node joined by another stops retrying its seeds", func(t *testing.T) {
		lonely := startNode(t, "lonely", joining(freeAddr(t)))
		other := startNode(t, "other", joining(lonely.Addr()))
		eventually.TrueWithin(t, convergeWithin, "lonely sees other", func() bool { mb, _ := lonely.node("other"); return mb.State == StateAlive })
		eventually.TrueWithin(t, convergeWithin, "lonely counts itself joined", lonely.Joined)
		attempts := lonely.joinAttempts.Load()
		eventually.TrueWithin(t, convergeWithin, "other sees lonely", func() bool { mb, _ := other.node("lonely"); return mb.State == StateAlive })
		if !other.Joined() || lonely.joinAttempts.Load() > attempts+1 {
			t.Fatalf("joined %v; lonely kept trying its seed: %d tries, then %d", other.Joined(), attempts, lonely.joinAttempts.Load())
		}
	})
}

func TestStartListsTheNodeItself(t *testing.T) {
	n := startNode(t, "solo")
	got := n.Nodes()
	if len(got) != 1 || got[0].Name != "solo" || got[0].State != StateAlive || got[0].Meta != n.Local() || got[0].Addr != n.Addr() || !n.Joined() {
		t.Fatalf("right after Start: members %+v, joined %v", got, n.Joined())
	}
}
