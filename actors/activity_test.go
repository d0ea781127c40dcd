package actors_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/proto/kitpb"
)

// actorCounts scrapes the node's actor families: activations,
// passivations and live actors of kind.
func actorCounts(t *testing.T, env *actors.Env, kind string) (act, pass, live float64) {
	t.Helper()
	var w metrics.Writer
	env.Collect(&w)
	mfs := metricstest.Parse(t, w.Bytes())
	value := func(family string) float64 { return metricstest.Value(mfs, family, "kind", kind) }
	return value("kitd_actor_activations_total"), value("kitd_actor_passivations_total"), value("kitd_actors_live")
}

// Activations and passivations are counted by kind, once each per actor,
// and live is their difference.
func TestActorActivity(t *testing.T) {
	var n *testNode // each rule's own, so that no other actor's passivation counts
	node := func(t *testing.T, idle time.Duration) {
		n = ownNode(t)
		n.env.IdleTimeout = idle
	}
	getWorkspace := func(id string) error {
		_, err := try[*kitpb.WorkspaceReply](n, actors.KindWorkspace, id, &kitpb.GetWorkspace{})
		return err
	}
	waitPassivations := func(t *testing.T, want float64) {
		t.Helper()
		eventually.NoError(t, "the passivations", func() error { // stopping is asynchronous
			if _, pass, _ := actorCounts(t, n.env, actors.KindWorkspace); pass < want {
				return fmt.Errorf("%v, want %v", pass, want)
			}
			return nil
		})
	}

	t.Run("an actor's activation counts once for its kind, however often it is asked", func(t *testing.T) {
		node(t, time.Hour) // no passivation in between, however slow the machine
		act0, _, _ := actorCounts(t, n.env, actors.KindWorkspace)
		w := n.workspace(t, 1)
		for range 3 {
			noErr(t, getWorkspace(w.id))
		}
		act, _, live := actorCounts(t, n.env, actors.KindWorkspace)
		if act != act0+1 || live < 1 {
			t.Fatalf("activations %v (before %v), live %v", act, act0, live)
		}
	})
	t.Run("an actor whose entity is absent activates, stops and is not live", func(t *testing.T) {
		node(t, time.Hour)
		act0, pass0, _ := actorCounts(t, n.env, actors.KindWorkspace)
		wantCode(t, getWorkspace(ids.New()), kiterr.NotFound)
		waitPassivations(t, pass0+1)
		act, _, _ := actorCounts(t, n.env, actors.KindWorkspace)
		if act != act0+1 {
			t.Fatalf("activations %v, want %v", act, act0+1)
		}
	})
	t.Run("an idle actor passivates and leaves live", func(t *testing.T) {
		node(t, 200*time.Millisecond)
		_, pass0, live0 := actorCounts(t, n.env, actors.KindWorkspace)
		n.workspace(t, 1) // one workspace actor activates
		waitPassivations(t, pass0+1)
		if _, _, live := actorCounts(t, n.env, actors.KindWorkspace); live != live0 {
			t.Fatalf("live %v, want %v as before it activated", live, live0)
		}
	})
}
