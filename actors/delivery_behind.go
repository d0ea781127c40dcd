package actors

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// A backlog past memory (docs/deliveries.md, "A backlog past memory"): a
// delivery actor keeps at most DeliveryQueueMax events queued
// (MaxQueuedInMemory unless configured), each source (a conversation) at
// most its share of them, and the node's delivery actors together at most
// DeliveryMemory bytes of queued events and held records, so that one
// Kit's endpoint down across thousands of installations costs disk, not
// the node. Past its share a source lags, past its bound the installation
// is behind: their notices are ignored and the events wait in the outbox,
// where their writes put them, durable and in their sources' order,
// without a sequence yet. As they drain to half, the actor reads them
// back from the outbox by range: the lagging source's own range, or every
// partition's from where the last read stopped.

// MaxQueuedInMemory bounds the events a delivery actor keeps queued.
const MaxQueuedInMemory = 10_000

// DefaultDeliveryMemory bounds the memory of a node's delivery queues.
const DefaultDeliveryMemory = 128 << 20

// queuedEventBytes is what a queued event costs its delivery actor in
// memory, about (TestQueuedEventMemory): its state, its place in its
// conversation's queue and in the age order, its taken record's count.
const queuedEventBytes = 160

// minQueued is what an installation may keep queued past the node's
// budget, so that installations whose endpoints are down, which hold
// their events until it returns, never stop the others from taking.
// These floors have a budget of their own, as large as the node's: past
// both, an installation keeps minQueuedPastFloors, so that a node with a
// hundred thousand installations behind holds 3 KB of events for each,
// not 16 (docs/deliveries.md, "A backlog past memory").
const minQueued = 100

// minQueuedPastFloors is the least floor: twice an installation's events
// in flight. Its queue is read back at half, which they may all be, so
// past both budgets its deliveries may wait for a read of the outbox.
const minQueuedPastFloors = 2 * MaxInFlightPerInstallation

// queueFloor is what an installation may keep queued whatever the node's
// room: minQueued until the floors spent a second budget, then
// minQueuedPastFloors.
func (e *Env) queueFloor() int {
	if e.deliveryMemory.used.Load() < 2*e.deliveryMemoryMax() {
		return minQueued
	}
	return minQueuedPastFloors
}

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
// within what the node has room for, but never less than its floor.
func (a *deliveryActor) queueBound() int {
	return min(a.env.deliveryQueueMax(), max(a.env.queueFloor(), a.q.waiting()+a.env.nodeRoom()))
}

// sourceShare is how many events of one source (a conversation) the queue
// may hold: they go one at a time, so more would only keep the other
// sources' events in the outbox. A queue held to its floor by the node's
// budget gives one source at most half of it: a source that filled it,
// its head failing, would keep every other one in the outbox, since a
// full queue reads none back.
func (a *deliveryActor) sourceShare() int {
	return max(minSourceShare, min(a.env.deliveryQueueMax()/64, a.queueBound()/2))
}

// minSourceShare is the least sourceShare, for small bounds.
const minSourceShare = 4

// leaves reports whether a notice of source leaves its event in the
// outbox, noting why: the queue is full (the installation is behind), or
// the source has its share queued (it lags).
func (a *deliveryActor) leaves(source string) bool {
	switch {
	case a.behind || a.lagging[source]:
	case a.queueFull():
		a.behind = true
	case len(a.q.bySource[source]) >= a.sourceShare():
		a.lag(source)
	default:
		return false
	}
	return true
}

// lag notes that source has events in the outbox past its share.
func (a *deliveryActor) lag(source string) {
	if a.lagging == nil {
		a.lagging = make(map[string]bool)
	}
	a.lagging[source] = true
}

// drainedOne notes that an event of source left the queue: a source that
// lags and is down to half its share is read again (catchUp).
func (a *deliveryActor) drainedOne(source string) {
	if a.lagging[source] && len(a.q.bySource[source]) <= a.sourceShare()/2 {
		if a.drained == nil {
			a.drained = make(map[string]bool)
		}
		a.drained[source] = true
	}
}

// catchUpLater has the outbox read for what waits there (catchUp), once
// the queue of an installation behind has drained to half its bound, or
// a source that lags to half its share. The read goes on a goroutine of
// its own (catchUpNow): it may wait for every partition's leader, and the
// message that started it may be a conversation's notice, which a
// delivery actor's inline mailbox runs on the conversation's goroutine.
// A read that failed is tried again only by its catchUpRetry.
func (a *deliveryActor) catchUpLater() {
	if a.catchUpQueued || a.retryPending || a.stopped || a.broken != nil || a.life.loadErr != nil || a.self == nil {
		return
	}
	behind := a.behind && a.q.waiting() <= a.queueBound()/2
	if !behind && (len(a.drained) == 0 || a.queueFull()) {
		return
	}
	a.catchUpQueued = true
	root, self := a.root, a.self
	go root.Send(self, catchUpNow{})
}

// catchUpNow reads the outbox for what waits there (catchUpLater);
// catchUpRetry lets a read that failed be tried again.
type (
	catchUpNow   struct{}
	catchUpRetry struct{}
)

// catchUp takes what waits in the outbox: the backlog of an installation
// behind, and the sources that lag. It wakes the sender for what it took;
// a read that fails is tried again a moment later (catchUpRetry), the
// events staying in the outbox meanwhile.
func (a *deliveryActor) catchUp(ctx actorContext) {
	a.catchUpQueued = false
	if a.stopped || a.broken != nil || a.life.loadErr != nil {
		return
	}
	var err error
	if a.behind && a.q.waiting() <= a.queueBound()/2 {
		err = a.takeBacklog()
	}
	if err == nil {
		err = a.takeDrained()
	}
	a.dropExpired()
	a.wakeSenderForNewHead() // for what it took before any failure
	if a.takes || a.batch.Batch != nil {
		a.flushLater(ctx)
	}
	if err != nil {
		if a.env.Logger != nil {
			a.env.Logger.Warn("take the outbox", "installation", a.id, "err", err, "retryIn", reactivateAfter)
		}
		// The retry goes to this activation itself: a wake-up through the
		// cluster may be dropped (a lapsed lease), and the flag would
		// then stop every catch-up for good.
		a.retryPending = true
		root, self := a.root, a.self
		time.AfterFunc(reactivateAfter, func() { root.Send(self, catchUpRetry{}) })
	}
}

// takeDrained reads the outbox of each source that lags and drained to
// half its share, from the first entry it has not taken, for as many as
// its share has room for: a source with none left past them no longer
// lags.
func (a *deliveryActor) takeDrained() error {
	for source := range a.drained {
		room := min(a.sourceShare()-len(a.q.bySource[source]), a.queueBound()-a.q.waiting())
		if room <= 0 {
			if a.queueFull() {
				return nil // the rest when the queue drains
			}
			delete(a.drained, source)
			continue
		}
		lower := outboxKey(a.id, source, a.taken[source]+1)
		upper := persistence.PrefixEnd(outboxSourcePrefix(a.id, source))
		took, more, through := 0, false, a.expiredThrough()
		err := a.env.Partition(partition.Of(source)).Scan(lower, upper, false, func(k, v []byte) bool {
			_, pos := outboxSource(k)
			if a.expires(source, pos, through) {
				return true
			}
			if more = took == room; more {
				return false // one past the room: the source still lags
			}
			a.take(source, pos, v)
			took++
			return true
		})
		if err != nil {
			return fmt.Errorf("read the outbox of %s from position %d: %w", source, a.taken[source]+1, err)
		}
		if !more {
			delete(a.lagging, source)
		}
		delete(a.drained, source)
	}
	return nil
}

// takeBacklog takes what the outbox holds past the queue, up to the
// queue's bound: first at most perSource of each source, from the cursor
// on around every partition, then, with room left, up to each source's
// share. A source past its share lags (takeDrained reads it); a pass that
// went all the way round and found nothing else left ends the backlog:
// notices are taken again. With no room (an activation whose stored queue
// is full) it only looks whether anything waits.
func (a *deliveryActor) takeBacklog() error {
	room := max(a.queueBound()-a.q.waiting(), 0)
	readers, err := a.env.everyPartition()
	if err != nil {
		return err
	}
	perSource := max(1, a.queueBound()/128)
	for pass := range 2 {
		if pass == 1 {
			perSource = 0 // no bound but the share
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
		if room == 0 {
			return nil
		}
	}
	return nil
}

// takeAround takes entries from the cursor on, round every partition back
// to it, until room runs out (the cursor then stays where it stopped),
// taking at most perSource (0: any) of each source. It reports whether it
// left any entry untaken but those of sources that lag.
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
// most perSource of each source (0: any) and none past a source's share,
// while room lasts. It returns the key of the first entry it could not
// take for want of room (nil: none), and whether it passed over any for
// perSource.
func (a *deliveryActor) takeRange(r PartitionReader, lower, upper []byte, room *int, perSource int) (stop []byte, left bool, err error) {
	took := make(map[string]int)
	share, through := a.sourceShare(), a.expiredThrough()
	for lower != nil {
		var skipTo []byte
		err := r.Scan(lower, upper, false, func(k, v []byte) bool {
			source, pos := outboxSource(k)
			switch taken := a.taken[source]; {
			case pos <= taken && taken-pos > readAheadEvents:
				skipTo = outboxKey(a.id, source, taken+1) // past what the queue refers to
				return false
			case pos <= taken:
				return true
			case a.expires(source, pos, through):
				return true // dropped (dropExpired), needing no room
			case *room == 0:
				stop = append([]byte(nil), k...) // where the next take starts
				return false
			case a.lagging[source] || len(a.q.bySource[source]) >= share:
				a.lag(source)
				skipTo = persistence.PrefixEnd(k[:len(k)-positionLen])
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
		if lower = skipTo; upper != nil && bytes.Compare(lower, upper) >= 0 {
			break // a skip past the range: another node refuses such a read
		}
	}
	return stop, left, nil
}
