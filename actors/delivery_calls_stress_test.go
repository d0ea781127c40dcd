package actors_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// pumpWakes is a sender's wake-up (actors.DeliveryNotifier) as a channel.
type pumpWakes chan struct{}

func (w pumpWakes) EventsQueued(string) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// inFlight counts, from outside the actor, what holds one of the
// installation's slots: a call from its grant to its give-back, an event
// from its take to its record. Both are counted after the actor counted
// them and let go before it does, so the count is never above the actor's:
// past 10 here, the actor let more than 10 go at once.
type inFlight struct {
	n, most atomic.Int32
}

func (f *inFlight) add(t *testing.T, what string) {
	n := f.n.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	if n > actors.MaxInFlightPerInstallation {
		t.Errorf("%d in flight as %s took a slot, at most %d", n, what, actors.MaxInFlightPerInstallation)
	}
}

func (f *inFlight) done() { f.n.Add(-1) }

// Calls and events share an installation's 10 slots under load: many
// calls ask, wait, give up and give back while a sender takes and records
// events and members post more. At no moment are more than 10 in flight;
// no call waits past its deadline; every event is delivered without a
// poll (a slot a call frees wakes the sender); and once all is done no
// slot stays held and the gauges say so.
func TestCallsAndEventsShareTheSlotsUnderLoad(t *testing.T) {
	n := ownNode(t)
	// Every call here gives its slot back: a lease that lapses (a second
	// past the call's deadline) while its caller is starved would let
	// another take the slot still counted in flight here.
	actors.SetCallLeaseMargin(n.env, eventually.Within)
	wake := make(pumpWakes, 1)
	n.env.Deliveries = wake
	f, cs := deliveryFixture(t, n, 12)
	inst := f.inst.Id
	var slots inFlight

	// Events: posted before and during the calls.
	const rounds = 4
	postEach(t, n, f, cs, 2)
	posted := atomic.Int32{}
	posted.Store(int32(2 * len(cs)))
	var posters sync.WaitGroup
	posters.Go(func() {
		for range rounds {
			postEach(t, n, f, cs, 1)
			posted.Add(int32(len(cs)))
		}
	})

	// The sender: a chain per event taken records it and sends what the
	// record hands back; with nothing in flight it waits for a wake-up.
	var delivered atomic.Int32
	var chains sync.WaitGroup
	chainEnded := make(chan struct{}, 1)
	var send func(ev *kitpb.Event)
	send = func(ev *kitpb.Event) {
		defer chains.Done()
		for ev != nil {
			slots.add(t, "an event")
			if rand.IntN(2) == 0 {
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // the Kit answering
			}
			slots.done()
			r, err := try[*kitpb.DeliveriesReply](n, actors.KindDelivery, inst, &kitpb.RecordAttempt{Sequence: ev.Sequence, Delivered: true, TakeNext: 10, Sender: "s"})
			if err != nil {
				t.Errorf("record: %v", err)
				return
			}
			delivered.Add(1)
			ev = nil
			if len(r.Events) > 0 {
				for _, next := range r.Events[1:] {
					chains.Add(1)
					go send(next)
				}
				ev = r.Events[0]
			}
		}
		select {
		case chainEnded <- struct{}{}:
		default:
		}
	}
	stop := make(chan struct{})
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		for {
			r, err := try[*kitpb.DeliveriesReply](n, actors.KindDelivery, inst, &kitpb.TakeDeliveries{Max: 10, Sender: "s"})
			if err != nil {
				t.Errorf("take: %v", err)
				return
			}
			for _, ev := range r.Events {
				chains.Add(1)
				go send(ev)
			}
			select {
			case <-wake:
			case <-chainEnded:
			case <-stop:
				return
			}
		}
	}()

	// The calls.
	const callers, callsEach = 16, 40
	var late atomic.Int32
	var callsWg sync.WaitGroup
	for c := range callers {
		callsWg.Go(func() {
			for i := range callsEach {
				call := fmt.Sprintf("call-%d-%d", c, i)
				wait := time.Duration(rand.IntN(30)) * time.Millisecond
				start := time.Now()
				r, err := try[*kitpb.CallSlotReply](n, actors.KindDelivery, inst, &kitpb.TakeCallSlot{Call: call, WaitMs: wait.Milliseconds()})
				if err != nil {
					t.Errorf("take a call slot: %v", err)
					return
				}
				// A bound for a call that waits on after its deadline (a
				// lost wake-up), not a speed: a starved race build may take
				// seconds to answer.
				if took := time.Since(start); took > wait+eventually.Within/4 {
					late.Add(1)
					t.Errorf("a call of %v waited %v for its slot", wait, took)
				}
				if !r.Granted {
					continue
				}
				slots.add(t, "a call")
				if rand.IntN(2) == 0 {
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // the Kit answering
				}
				slots.done()
				giveCallSlot(n, inst, call)
			}
		})
	}
	callsWg.Wait()
	posters.Wait()

	eventually.True(t, "every event delivered, with no poll of the sender", func() bool {
		return delivered.Load() == posted.Load()
	})
	close(stop)
	<-pumpDone
	chains.Wait()
	if slots.most.Load() < actors.MaxInFlightPerInstallation {
		t.Logf("at most %d in flight at once", slots.most.Load())
	}
	metricIs(t, n, 0, "kitd_delivery_calls_in_flight")
	metricIs(t, n, 0, "kitd_delivery_calls_waiting")
	// Nothing leaked: the ten slots are free for ten calls at once.
	holdEveryCallSlot(t, n, inst, 0)
	if callSlotOf(t, n, inst, "eleventh", 0) {
		t.Fatal("an eleventh call took a slot")
	}
}

// A leadership move stops the activation: the calls that wait on it are
// refused at once (not at their deadline), and the activation on the new
// leader counts from none (docs/deliveries.md "Member actions").
func TestCallsWaitingOnAnActivationThatStopsAreRefused(t *testing.T) {
	n := ownNode(t)
	f, _ := deliveryFixture(t, n, 1)
	holdEveryCallSlot(t, n, f.inst.Id, time.Minute)
	waits := callSlotLater(t, n, f.inst.Id, "member", time.Hour)
	metricIs(t, n, 1, "kitd_delivery_calls_waiting")
	p := partition.Of(f.inst.Id)
	n.node.Release(p)
	if answered(t, waits) {
		t.Fatal("a call waiting on an activation that stopped got a slot")
	}
	n.node.Host(p)
	if !callSlotOf(t, n, f.inst.Id, "after", 0) {
		t.Fatal("the new activation counted the slots of the one that stopped")
	}
	metricIs(t, n, 1, "kitd_delivery_calls_in_flight")
	metricIs(t, n, 0, "kitd_delivery_calls_waiting")
}
