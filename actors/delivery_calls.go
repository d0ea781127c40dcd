package actors

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/proto/kitpb"
)

// Calls among an installation's deliveries in flight (docs/deliveries.md
// "Member actions"): SPEC.md 6 counts slash commands and interactions
// with events in the "10 in flight per installation", and kitd counts
// tool calls with them. The call's node asks the delivery actor for a
// slot (TakeCallSlot), makes the call, and gives it back (GiveCallSlot).
// The slots are memory only: an activation that starts again, on this
// node or another, counts from none, and the calls of the one before end
// by their deadline, a few seconds at most.

// callLeaseMargin is how long past its deadline a call's slot stays held
// when its give-back does not come: the time for the notice to arrive.
// A node that dies mid-call thus holds its slot no longer than that.
const callLeaseMargin = time.Second

func (e *Env) callLeaseMargin() time.Duration {
	if e.testHookCallLeaseMargin > 0 {
		return e.testHookCallLeaseMargin
	}
	return callLeaseMargin
}

// maxCallsWaiting bounds the calls of one installation that wait for a
// slot; past it a call is refused at once, as at its deadline. Members'
// rate limits keep far fewer waiting.
const maxCallsWaiting = 100

// callSlots are the installation's calls in flight and those that wait
// for a slot, in the order they asked.
type callSlots struct {
	held    map[string]time.Time // by call: when its lease lapses
	waiting []*slotWait
	lapse   *time.Timer // sends callLeaseLapsed at the earliest lease's end
	lapseAt time.Time
}

// callLeaseLapsed: a held call's lease may have lapsed.
type callLeaseLapsed struct{}

// callGaveUp: a call that waited for a slot gave up at its deadline.
type callGaveUp struct{}

// Whether a waiting call got its slot.
const (
	slotWaiting int32 = iota
	slotGranted
	slotGivenUp
)

// slotWait is the answer to a TakeCallSlot that found no slot free: the
// caller awaits it (cluster.Pending) until its deadline, while the actor
// grants it a slot when one is given back. Whichever of the two moves
// state first wins, so a slot is never granted to a call that gave up.
type slotWait struct {
	call  string
	until time.Time
	lease time.Time
	state atomic.Int32
	done  chan struct{} // closed once granted
	// gaveUp tells the actor the call left: nothing else may reach it
	// before the next slot frees, and until then it would count the call
	// among those waiting (the gauge) and stay live for it.
	gaveUp func()
}

// Await is the caller's wait for the slot, until its deadline.
func (w *slotWait) Await() (any, error) {
	t := time.NewTimer(time.Until(w.until))
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		if w.state.CompareAndSwap(slotWaiting, slotGivenUp) {
			w.gaveUp()
		}
	}
	if w.state.Load() == slotGranted {
		return granted, nil
	}
	return &kitpb.CallSlotReply{}, nil
}

// end closes w with state: granted, or refused by an activation that stops.
func (w *slotWait) end(state int32) bool {
	if !w.state.CompareAndSwap(slotWaiting, state) {
		return false
	}
	close(w.done)
	return true
}

var granted = &kitpb.CallSlotReply{Granted: true} // shared: only read

// inUse is how many of the installation's slots events and calls hold.
func (a *deliveryActor) inUse() int { return a.q.inFlight + len(a.calls.held) }

// reservedForCalls is how many free slots the calls that wait are owed
// before any event: a member waits for a call, an event's receiver does
// not.
func (a *deliveryActor) reservedForCalls() int {
	n := 0
	for _, w := range a.calls.waiting {
		if w.state.Load() == slotWaiting {
			n++
		}
	}
	return n
}

// takeCallSlot answers a call's ask for a slot: granted at once when one
// is free and no call waits before it; else a slotWait its caller awaits.
func (a *deliveryActor) takeCallSlot(m *kitpb.TakeCallSlot) any {
	now := time.Now() // leases are real time: the service clock may jump in tests
	wait := time.Duration(m.WaitMs) * time.Millisecond
	lease := now.Add(wait + a.env.callLeaseMargin())
	a.grantWaiters() // drops those that gave up: they owe nothing
	if len(a.calls.waiting) == 0 && a.inUse() < MaxInFlightPerInstallation {
		a.hold(m.Call, lease)
		return granted
	}
	if wait <= 0 || len(a.calls.waiting) >= maxCallsWaiting {
		return &kitpb.CallSlotReply{}
	}
	root, self := a.root, a.self
	w := &slotWait{call: m.Call, until: now.Add(wait), lease: lease, done: make(chan struct{}),
		gaveUp: func() { root.Send(self, callGaveUp{}) }}
	a.calls.waiting = append(a.calls.waiting, w)
	return w
}

// hold notes call's slot, to lapse at lease.
func (a *deliveryActor) hold(call string, lease time.Time) {
	if a.calls.held == nil {
		a.calls.held = make(map[string]time.Time)
	}
	a.calls.held[call] = lease
	if !a.calls.lapseAt.IsZero() && !lease.Before(a.calls.lapseAt) {
		return // the timer is armed for an earlier lease
	}
	a.calls.lapseAt = lease
	if a.calls.lapse == nil {
		root, self := a.root, a.self
		a.calls.lapse = time.AfterFunc(time.Until(lease), func() { root.Send(self, callLeaseLapsed{}) })
		return
	}
	a.calls.lapse.Reset(time.Until(lease))
}

// grantWaiters gives the free slots to the calls that wait, in the order
// they asked, and forgets those that gave up.
func (a *deliveryActor) grantWaiters() {
	for len(a.calls.waiting) > 0 {
		w := a.calls.waiting[0]
		if w.state.Load() == slotWaiting && a.inUse() >= MaxInFlightPerInstallation {
			return
		}
		a.calls.waiting[0] = nil
		a.calls.waiting = a.calls.waiting[1:]
		if w.end(slotGranted) {
			a.hold(w.call, w.lease)
		}
	}
	a.calls.waiting = nil // lets the array go
}

// giveCallSlot ends a call's hold (GiveCallSlot, or its lease lapsed):
// the slot goes to a call that waits, else to the events.
func (a *deliveryActor) giveCallSlot(call string) {
	if _, ok := a.calls.held[call]; !ok {
		return // lapsed, or held by an activation before this one
	}
	delete(a.calls.held, call)
	a.slotFreed()
}

// slotFreed gives a slot freed by a call to a call that waits, or wakes
// the sender for the events that wait for one: a take that found every
// slot held by calls handed out nothing, and the pump may have retired.
func (a *deliveryActor) slotFreed() {
	a.grantWaiters()
	if a.inUse() < MaxInFlightPerInstallation && a.q.waiting() > a.q.inFlight && !a.paused() && a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id)
	}
}

// forgetGivenUp drops the calls that gave up waiting: they owe nothing.
func (a *deliveryActor) forgetGivenUp() {
	a.calls.waiting = slices.DeleteFunc(a.calls.waiting, func(w *slotWait) bool { return w.state.Load() != slotWaiting })
}

// leasesLapsed frees the slots of calls whose give-back did not come by
// their lease, and arms the timer for the next lease to lapse.
func (a *deliveryActor) leasesLapsed() {
	now := time.Now()
	var next time.Time
	freed := false
	for call, lease := range a.calls.held {
		if !lease.After(now) {
			delete(a.calls.held, call)
			freed = true
			continue
		}
		if next.IsZero() || lease.Before(next) {
			next = lease
		}
	}
	a.calls.lapseAt = next
	if !next.IsZero() {
		a.calls.lapse.Reset(time.Until(next))
	}
	if freed {
		a.slotFreed()
	}
}

// stopCallSlots ends the lease timer of a stopping activation, and
// refuses the calls that wait at once: it will grant them nothing.
func (a *deliveryActor) stopCallSlots() {
	if a.calls.lapse != nil {
		a.calls.lapse.Stop()
	}
	for _, w := range a.calls.waiting {
		w.end(slotGivenUp)
	}
	a.calls = callSlots{}
}
