package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/proto/kitpb"
)

// panicking is a handler with a bug: every request panics.
type panicking struct{}

func (panicking) activate(string) error                       { return nil }
func (panicking) handle(proto.Message) (proto.Message, error) { panic("a bug in a handler") }
func (panicking) exists() bool                                { return true }

type panickingActor struct {
	env  *Env
	life lifecycle
}

func (a *panickingActor) Receive(ctx actor.Context) { receive(panicking{}, &a.life, a.env, ctx) }

// docs/decisions.md "Metrics": kitd_actors_live{kind} is the actors live
// now. An actor that panics is started again by protoactor's supervisor
// (docs/decisions.md "Logs"): it is still one actor, live once, restarted
// once and stopped never.
func TestAnActorStartedAgainAfterAPanicIsLiveOnce(t *testing.T) {
	env := &Env{Clock: clock.NewTest(), History: history.NewBudget(history.Options{Bytes: 1 << 20})}
	n, err := cluster.Start(cluster.Config{RequestTimeout: 200 * time.Millisecond},
		&cluster.Kind{Name: KindWorkspace, New: func(id string) actor.Actor {
			return &panickingActor{env: env, life: lifecycle{identity: id, kind: env.activity.of(KindWorkspace)}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	env.Host = n
	if _, err := cluster.Call[*kitpb.UserReply](n, KindWorkspace, "w", &kitpb.GetUser{UserId: "u"}); err == nil {
		t.Fatal("a handler that panicked answered")
	}
	// The restart's Started comes after its Restarting, in the same
	// mailbox: once counted, the first incarnation's end is too.
	eventually.True(t, "the actor started again", func() bool {
		return env.activity.of(KindWorkspace).activations.Load() >= 2
	})
	var w metrics.Writer
	env.Collect(&w)
	mfs := metricstest.Parse(t, w.Bytes())
	for _, m := range []struct {
		name string
		want float64
	}{{"kitd_actors_live", 1}, {"kitd_actor_restarts_total", 1}, {"kitd_actor_passivations_total", 0}} {
		if got := metricstest.Value(mfs, m.name, "kind", KindWorkspace); got != m.want {
			t.Errorf("%s{kind=%q} = %v after one actor panicked and was started again, want %v", m.name, KindWorkspace, got, m.want)
		}
	}
}
