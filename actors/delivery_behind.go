package actors

import (
	"fmt"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// A backlog past memory (docs/deliveries.md, "A backlog past memory"): a
// delivery actor keeps at most MaxQueuedInMemory events queued, about
// 160 bytes each. Past that the installation is behind: notices are
// ignored and the events wait in the outbox, where their writes put
// them, durable and in their sources' order, without a sequence yet. As
// the queue drains below half its bound, the actor takes more from the
// outbox, by range, a few of each source first, from where it stopped the
// last time, so that a conversation with a large backlog does not keep
// the others waiting until it is through. An endpoint down for a day with
// a busy workspace thus costs disk, not the node's memory.

// MaxQueuedInMemory bounds the events a delivery actor keeps queued.
const MaxQueuedInMemory = 10_000

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
func (a *deliveryActor) queueFull() bool { return a.q.waiting() >= a.env.deliveryQueueMax() }

// catchUpBehind takes more of the backlog once the queue of an actor behind
// has drained to half its bound, and wakes the sender for what it took. A
// read that fails is tried again a moment later (WakeDelivery): the
// events stay in the outbox meanwhile.
func (a *deliveryActor) catchUpBehind(ctx actorContext) {
	if !a.behind || a.stopped || a.broken != nil || a.life.loadErr != nil || a.q.waiting() > a.env.deliveryQueueMax()/2 {
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
	room := a.env.deliveryQueueMax() - a.q.waiting()
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
				stop = append([]byte(nil), k...)
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
