package actors

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// A backlog past memory (docs/deliveries.md, "A backlog past memory"): a
// delivery actor keeps at most DeliveryQueueMax events queued
// (MaxQueuedInMemory unless configured), and the node's delivery actors
// together at most DeliveryMemory bytes of queued events and held
// records, so that one Kit's endpoint down across thousands of
// installations costs disk, not the node. Past either bound the
// installation is behind: notices are ignored and the events wait in the
// outbox, where their writes put them, durable and in their sources'
// order, without a sequence yet. As the queue drains below half its bound
// the actor takes more from the outbox, by range, a few of each source
// first, from where it stopped the last time, so that a conversation with
// a large backlog does not keep the others waiting until it is through.

// MaxQueuedInMemory bounds the events a delivery actor keeps queued.
const MaxQueuedInMemory = 10_000

// DefaultDeliveryMemory bounds the memory of a node's delivery queues.
const DefaultDeliveryMemory = 128 << 20

// queuedEventBytes is what a queued event costs its delivery actor in
// memory, about (TestQueuedEventMemory): its state, its place in its
// conversation's queue and in the age order, its taken record's count.
const queuedEventBytes = 160

// minQueued is what an installation may keep queued whatever the node's
// budget, so that installations whose endpoints are down, which hold
// their events until it returns, never stop the others from taking.
const minQueued = 100

// deliveryMemory is the node's account of its delivery queues: the bytes
// every delivery actor charges after each message it handles (charge).
// The zero value is ready.
type deliveryMemory struct{ used atomic.Int64 }

func (e *Env) deliveryMemoryMax() int64 {
	if e.DeliveryMemory > 0 {
		return e.DeliveryMemory
	}
	return DefaultDeliveryMemory
}

// nodeRoom is how many more events the node's budget leaves room for.
func (e *Env) nodeRoom() int {
	return int(max(e.deliveryMemoryMax()-e.deliveryMemory.used.Load(), 0) / queuedEventBytes)
}

// charge tells the node's account what the actor holds now.
func (a *deliveryActor) charge() {
	own := int64(a.q.waiting())*queuedEventBytes + int64(a.q.held)
	a.env.deliveryMemory.used.Add(own - a.charged)
	a.charged = own
}

// release gives the actor's memory back as it stops, or restarts after a
// panic (a new instance starts from the store).
func (a *deliveryActor) release() {
	a.env.deliveryMemory.used.Add(-a.charged)
	a.charged = 0
	a.unpublish()
}

// outboxCursor is where the last take of a backlog stopped: partition p,
// from key on (nil: from its first entry).
type outboxCursor struct {
	p   partition.ID
	key []byte
}

func (e *Env) deliveryQueueMax() int {
	if e.DeliveryQueueMax > 0 {
		return e.DeliveryQueueMax
	}
	return MaxQueuedInMemory
}

// queueFull reports whether the queue holds as many events as it may:
// what the outbox holds past it waits there.
func (a *deliveryActor) queueFull() bool { return a.q.waiting() >= a.queueBound() }

// queueBound is how many events the queue may hold now: its own bound,
// within what the node has room for, but never less than minQueued.
func (a *deliveryActor) queueBound() int {
	return min(a.env.deliveryQueueMax(), max(minQueued, a.q.waiting()+a.env.nodeRoom()))
}

// catchUpBehind takes more of the backlog once the queue of an actor
// behind has drained to half its bound (queueBound), and wakes the sender
// for what it took. A read that fails is tried again a moment later
// (WakeDelivery): the events stay in the outbox meanwhile.
func (a *deliveryActor) catchUpBehind(ctx actorContext) {
	if !a.behind || a.stopped || a.broken != nil || a.life.loadErr != nil || a.q.waiting() > a.queueBound()/2 {
		return
	}
	err := a.takeBacklog()
	a.wakeSenderForNewHead() // for what it took before any failure
	if a.takes {
		a.flushLater(ctx)
	}
	if err != nil {
		if a.env.Logger != nil {
			a.env.Logger.Warn("take the outbox", "installation", a.id, "err", err, "retryIn", reactivateAfter)
		}
		host, id := a.env.Host, a.id
		time.AfterFunc(reactivateAfter, func() { host.Send(KindDelivery, id, &kitpb.WakeDelivery{}) })
	}
}

// takeBacklog takes what the outbox holds past the queue, up to the
// queue's bound: first at most perSource of each source, from the cursor
// on around every partition, then, with room left, as the entries come.
// A pass that went all the way round without finding more than it took
// ends the backlog: notices are taken again.
func (a *deliveryActor) takeBacklog() error {
	room := a.queueBound() - a.q.waiting()
	if room <= 0 {
		return nil
	}
	readers, err := a.env.everyPartition()
	if err != nil {
		return err
	}
	perSource := max(1, a.env.deliveryQueueMax()/128)
	for pass := 0; pass < 2 && room > 0; pass++ {
		if pass == 1 {
			perSource = 0 // no bound
		}
		more, err := a.takeAround(readers, &room, perSource)
		if err != nil {
			return err
		}
		if !more {
			a.behind = false
			a.cursor = outboxCursor{}
			return nil
		}
	}
	return nil
}

// takeAround takes entries from the cursor on, round every partition back
// to it, until room runs out (the cursor then stays at the first entry it
// left), taking at most perSource (0: any) of each source. It reports
// whether it left any entry untaken.
func (a *deliveryActor) takeAround(readers *[partition.Count]PartitionReader, room *int, perSource int) (more bool, err error) {
	start := a.cursor
	for i := range partition.Count + 1 {
		p := (start.p + partition.ID(i)) % partition.Count
		prefix := outboxPrefix(p, a.id)
		lower, upper := prefix, persistence.PrefixEnd(prefix)
		switch {
		case i == 0 && start.key != nil:
			lower = start.key
		case i == partition.Count && start.key == nil:
			return more, nil // the first partition was read whole
		case i == partition.Count:
			upper = start.key
		}
		stop, left, err := a.takeRange(readers[p], lower, upper, room, perSource)
		if err != nil {
			return false, err
		}
		more = more || left
		if stop != nil {
			a.cursor = outboxCursor{p, stop}
			return true, nil
		}
	}
	return more, nil
}

// takeRange takes the untaken entries of [lower, upper) in key order, at
// most perSource of each source (0: any), while room lasts. It returns the
// key of the first entry it could not take for want of room (nil: none),
// and whether it passed over any for perSource.
func (a *deliveryActor) takeRange(r PartitionReader, lower, upper []byte, room *int, perSource int) (stop []byte, left bool, err error) {
	took := make(map[string]int)
	for lower != nil {
		var skipTo []byte
		err := r.Scan(lower, upper, false, func(k, v []byte) bool {
			source, pos := outboxSource(k)
			switch {
			case pos <= a.taken[source]:
				return true
			case *room == 0:
				// The next take starts here, or at the next source if
				// this one had its turn.
				stop = append([]byte(nil), k...)
				if took[source] > 0 {
					stop = persistence.PrefixEnd(stop[:len(stop)-positionLen])
				}
				return false
			case perSource > 0 && took[source] == perSource:
				left = true
				skipTo = persistence.PrefixEnd(k[:len(k)-positionLen])
				return false
			}
			a.take(source, pos, v)
			took[source]++
			*room--
			return true
		})
		if err != nil {
			return nil, false, fmt.Errorf("read the outbox of %s: %w", a.id, err)
		}
		lower = skipTo
	}
	return stop, left, nil
}
