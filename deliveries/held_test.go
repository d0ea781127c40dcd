package deliveries

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/proto/kitpb"
)

// docs/deliveries.md "A suspended Kit": only an attempt in flight when the
// suspension lands ends as it would. An event that still waits for one of
// its Kit's 50 slots on this node (the Kit's other installations hold
// them) has not been attempted: once it gets the slot it is not sent, and
// it is given up as a lost hand-out, which the held pump reclaims after the
// resume. It used to be posted to the suspended Kit after the operator's
// 200.
func TestAnEventWaitingForItsKitsSlotIsNotSentOnceTheKitIsSuspended(t *testing.T) {
	const secret = "kss_test-secret"
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	var suspended atomic.Bool
	q := newFakeQueue()
	node, err := cluster.Start(cluster.Config{}, &cluster.Kind{Name: actors.KindDelivery, New: func(string) actor.Actor { return q }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	s := New(Config{
		Node: node, Clock: clock.System(), Encode: func(*kitpb.Event, string) ([]byte, error) { return []byte(`{}`), nil },
		RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, Allow: []string{"127.0.0.1"},
		KitState: func(string) (actors.KitState, error) { return actors.KitState{Suspended: suspended.Load()}, nil },
	})
	t.Cleanup(s.Close)

	var held []func()
	for range MaxInFlightPerKit {
		held = append(held, s.kitSlot("kit"))
	}
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	p := &pump{wake: make(chan struct{}, 1)}
	p.inFlight.Add(1)
	p.chains.Add(1)
	ev := &kitpb.Event{Sequence: 1, Type: "installation.updated"}
	go s.chain("inst-1", target{kitID: "kit", endpoint: u, secrets: []string{secret}}, nil, ev, p)
	waiting(t, 1)
	suspended.Store(true)
	held[0]()
	held = held[1:]
	eventually.True(t, "the chain ended", func() bool { return p.chains.Load() == 0 })
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the Kit suspended while its event waited for a slot", n)
	}
	select {
	case rec := <-q.recorded:
		t.Fatalf("an attempt recorded (%q) for an event not attempted", rec.ErrorCode)
	default:
	}
	if !p.lost.Load() {
		t.Fatal("the event given up is not reclaimed: the pump was not told of a lost hand-out")
	}
}
