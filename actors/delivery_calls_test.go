package actors_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/proto/kitpb"
)

// callSlotOf asks inst's delivery actor for a slot for call, waiting at
// most wait, and says whether it got one.
func callSlotOf(t *testing.T, n *testNode, inst, call string, wait time.Duration) bool {
	t.Helper()
	return ask[*kitpb.CallSlotReply](t, n, actors.KindDelivery, inst, &kitpb.TakeCallSlot{Call: call, WaitMs: wait.Milliseconds()}).Granted
}

// callSlotLater is callSlotOf in a goroutine of its own: its answer comes
// on the channel.
func callSlotLater(t *testing.T, n *testNode, inst, call string, wait time.Duration) <-chan bool {
	got := make(chan bool, 1)
	go func() {
		r, err := try[*kitpb.CallSlotReply](n, actors.KindDelivery, inst, &kitpb.TakeCallSlot{Call: call, WaitMs: wait.Milliseconds()})
		got <- err == nil && r.Granted
	}()
	return got
}

func giveCallSlot(n *testNode, inst, call string) {
	n.env.Host.Send(actors.KindDelivery, inst, &kitpb.GiveCallSlot{Call: call})
}

// holdEveryCallSlot has calls c0 to c9 hold the installation's slots.
func holdEveryCallSlot(t *testing.T, n *testNode, inst string, lease time.Duration) {
	t.Helper()
	for i := range actors.MaxInFlightPerInstallation {
		if !callSlotOf(t, n, inst, fmt.Sprint("c", i), lease) {
			t.Fatalf("call %d of %d refused a slot", i+1, actors.MaxInFlightPerInstallation)
		}
	}
}

// answered waits for a call's answer.
func answered(t *testing.T, got <-chan bool) bool {
	t.Helper()
	select {
	case ok := <-got:
		return ok
	case <-time.After(eventually.Within):
		t.Fatal("a call's ask for a slot was not answered")
		return false
	}
}

// SPEC.md 6 counts slash commands and interactions with events in the
// "10 in flight per installation" (docs/deliveries.md "Member actions"):
// a call holds one of the installation's slots from its ask to its
// give-back, waiting for one no later than its deadline; calls that wait
// go before events, as a member waits for a call.
func TestCallsCountAmongTheInstallationsDeliveries(t *testing.T) {
	t.Run("ten calls hold every slot: the eleventh is refused at its deadline", func(t *testing.T) {
		n := ownNode(t)
		f, _ := deliveryFixture(t, n, 1)
		holdEveryCallSlot(t, n, f.inst.Id, time.Minute)
		if callSlotOf(t, n, f.inst.Id, "late", 30*time.Millisecond) {
			t.Fatal("an eleventh call took a slot")
		}
		if callSlotOf(t, n, f.inst.Id, "now", 0) {
			t.Fatal("a call that cannot wait took a slot none gave back")
		}
	})
	t.Run("a call that gave up waits no more in the gauge", func(t *testing.T) {
		n := ownNode(t)
		f, _ := deliveryFixture(t, n, 1)
		holdEveryCallSlot(t, n, f.inst.Id, time.Minute)
		gaveUp := callSlotLater(t, n, f.inst.Id, "impatient", 20*time.Millisecond)
		if answered(t, gaveUp) {
			t.Fatal("a call took a slot none gave back")
		}
		metricIs(t, n, 0, "kitd_delivery_calls_waiting")
		metricIs(t, n, float64(actors.MaxInFlightPerInstallation), "kitd_delivery_calls_in_flight")
	})
	t.Run("a slot given back goes to the call that waits", func(t *testing.T) {
		n := ownNode(t)
		f, _ := deliveryFixture(t, n, 1)
		holdEveryCallSlot(t, n, f.inst.Id, time.Minute)
		gaveUp := callSlotLater(t, n, f.inst.Id, "impatient", 20*time.Millisecond)
		waits := callSlotLater(t, n, f.inst.Id, "patient", time.Minute)
		if answered(t, gaveUp) {
			t.Fatal("a call took a slot none gave back")
		}
		giveCallSlot(n, f.inst.Id, "c0")
		if !answered(t, waits) {
			t.Fatal("the call that waited got no slot given back")
		}
		if callSlotOf(t, n, f.inst.Id, "next", 0) {
			t.Fatal("the call that gave up left its slot to another: ten held, an eleventh took one")
		}
	})
	t.Run("calls held leave the events the rest", func(t *testing.T) {
		n := ownNode(t)
		f, cs := deliveryFixture(t, n, 12)
		postEach(t, n, f, cs, 1)
		for i := range 4 {
			callSlotOf(t, n, f.inst.Id, fmt.Sprint("c", i), time.Minute)
		}
		if got := len(take(t, n, f.inst.Id).Events); got != actors.MaxInFlightPerInstallation-4 {
			t.Fatalf("with 4 calls in flight a take handed out %d events, want %d", got, actors.MaxInFlightPerInstallation-4)
		}
		if callSlotOf(t, n, f.inst.Id, "c4", 0) {
			t.Fatal("a call took a slot with 4 calls and 6 events in flight")
		}
	})
	t.Run("a call that waits goes before the events", func(t *testing.T) {
		n := ownNode(t)
		f, cs := deliveryFixture(t, n, 12)
		postEach(t, n, f, cs, 1)
		evs := take(t, n, f.inst.Id).Events
		if len(evs) != actors.MaxInFlightPerInstallation {
			t.Fatalf("took %d events, want %d", len(evs), actors.MaxInFlightPerInstallation)
		}
		waits := callSlotLater(t, n, f.inst.Id, "member", time.Minute)
		metricIs(t, n, 1, "kitd_delivery_calls_waiting")
		r := ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: evs[0].Sequence, Delivered: true, TakeNext: 10})
		if len(r.Events) != 0 {
			t.Fatalf("the slot an event freed went to %d events, with a call waiting", len(r.Events))
		}
		if !answered(t, waits) {
			t.Fatal("the call that waited got no slot")
		}
		metricIs(t, n, 1, "kitd_delivery_calls_in_flight")
		metricIs(t, n, 0, "kitd_delivery_calls_waiting")
	})
	t.Run("events wait while calls hold every slot, and the sender is woken when one is given back", func(t *testing.T) {
		n := ownNode(t)
		w := &wakes{}
		n.env.Deliveries = w
		f, _ := deliveryFixture(t, n, 1)
		holdEveryCallSlot(t, n, f.inst.Id, time.Minute)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		eventually.Holds(eventually.Within, func() bool { return len(queued(t, n, f.inst.Id)) == 1 })
		if r := take(t, n, f.inst.Id); len(r.Events) != 0 || r.InFlight != 0 {
			t.Fatalf("with every slot held by calls a take handed out %q (in flight %d)", eventTexts(r.Events), r.InFlight)
		}
		if got := w.n.Load(); got != 0 {
			t.Fatalf("%d wake-ups for an event with no slot free, want none", got)
		}
		giveCallSlot(n, f.inst.Id, "c3")
		eventually.Holds(eventually.Within, func() bool { return w.n.Load() == 1 })
		if got := w.n.Load(); got != 1 {
			t.Fatalf("%d wake-ups once a call gave its slot back, want 1", got)
		}
		if got := eventTexts(take(t, n, f.inst.Id).Events); len(got) != 1 || got[0] != "a" {
			t.Fatalf("after a call gave its slot back a take handed out %q, want a", got)
		}
	})
	t.Run("a slot whose give-back never comes lapses after the call's deadline", func(t *testing.T) {
		n := ownNode(t)
		f, _ := deliveryFixture(t, n, 1)
		holdEveryCallSlot(t, n, f.inst.Id, 10*time.Millisecond) // their node died mid-call
		if !answered(t, callSlotLater(t, n, f.inst.Id, "after", time.Minute)) {
			t.Fatal("the slots of calls past their deadline never lapsed")
		}
	})
}
