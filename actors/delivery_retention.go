package actors

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Retention (docs/deliveries.md, "Retention"): what the deliveries keep
// of an event no endpoint took goes after DeliveryRetention, as the
// developer log's entries do. That is the dead letters not redelivered,
// and the events that waited in the outbox past the queue's bound ("A
// backlog past memory") that long, which an endpoint paused for good
// would otherwise keep for ever: every post of the workspace adds one.
// The events queued stay until they are delivered or dead: at most the
// queue's bound, and they hold the installation's sequences, which go
// without gaps.

// DeliveryRetention is how long an event waits in the outbox, and a dead
// letter waits for a redelivery, before it is dropped.
const DeliveryRetention = LogRetention

// sweepEvery is how often a live delivery actor drops what its retention
// ended: at its activation, then at the first message an hour later.
const sweepEvery = time.Hour

// sweepNow drops what the retention ended (sweep).
type sweepNow struct{}

// sweepLater has the sweep run once it is due, on a goroutine of its own
// (sweepNow) for the reason catchUpLater gives.
func (a *deliveryActor) sweepLater() {
	if a.sweepQueued || a.stopped || a.broken != nil || a.life.loadErr != nil || a.self == nil {
		return
	}
	if nanos(a.env.Clock.Now()) < a.nextSweep {
		return
	}
	a.sweepQueued = true
	root, self := a.root, a.self
	go root.Send(self, sweepNow{})
}

// sweepMax bounds the dead letters one sweep deletes, each a key of the
// installation's own partition, so that the first sweep of a long
// history is a write of a bounded size (a raft entry on a cluster); one
// that reached it is followed by the next once its write is done. The
// outbox needs no such bound: its drops are one range deletion a source,
// spread over the sources' partitions.
const sweepMax = 4096

func (e *Env) sweepMax() int {
	if e.testHookSweepMax > 0 {
		return e.testHookSweepMax
	}
	return sweepMax
}

// sweep drops the dead letters and the events waiting in the outbox that
// are older than DeliveryRetention, and says how many in the developer
// log. A read that fails leaves the rest to the next sweep.
func (a *deliveryActor) sweep() {
	a.sweepQueued = false
	if a.stopped || a.broken != nil || a.life.loadErr != nil {
		return
	}
	now := a.env.Clock.Now()
	a.nextSweep = nanos(now.Add(sweepEvery))
	more, deadErr := a.dropDeadLetters(nanos(now.Add(-DeliveryRetention)))
	err := errors.Join(deadErr, a.expireWaiting())
	if err != nil && a.env.Logger != nil {
		a.env.Logger.Warn("drop what the deliveries' retention ended", "installation", a.id, "err", err, "retryIn", sweepEvery)
	}
	dropped := len(a.expiring) > 0
	a.dropExpired()
	// Written now, not at a flush that nothing may start: a paused
	// endpoint's installation may hear nothing else for hours.
	if dropped && a.settle() != nil {
		return // the actor stops (stopIfBroken); its next activation drops them again
	}
	if more {
		a.nextSweep = 0 // the next sweep at once (sweepLater), this one's writes done
	}
}

// dropDeadLetters deletes the dead letters that died at or before cutoff
// (now - DeliveryRetention: a dead letter lives while now < finishedAt +
// DeliveryRetention, as an outbox entry does, expiredThrough), at most
// sweepMax, and reports whether more may be left. It reads them all:
// they die in no order of their sequences (a conversation's events go one
// at a time, each with its own 24 hours; a redelivered one dies again
// under its old sequence). The deletions are a write of their own, as a
// redelivery's are, so that the next sweep reads them done, with the
// developer log entry that says how many.
func (a *deliveryActor) dropDeadLetters(cutoff int64) (more bool, err error) {
	b := a.env.newBatch()
	defer b.Close()
	dropped := 0
	err = a.scanEvents(deadEventsPrefix(a.id), func(k []byte, ev *kitpb.Event) bool {
		if ev.FinishedAt > cutoff {
			return true
		}
		if more = dropped == a.env.sweepMax(); more {
			return false
		}
		b.Delete(k)
		dropped++
		return true
	})
	if err == nil && dropped > 0 {
		if a.ep.KitId != "" {
			e := newLogEntry(a.env, LogSourceDelivery, LogLevelInfo, "dead_letters.expired", a.id)
			e.Status = strconv.Itoa(dropped) + " expired"
			a.env.putLog(b, partition.Of(a.id), a.ep.KitId, e)
		}
		err = b.Write()
	}
	if err != nil {
		return false, fmt.Errorf("drop the dead letters of %s: %w", a.id, err)
	}
	a.env.deliveryStats.expired[expiredDead].Add(uint64(dropped))
	return more, nil
}

// expiredSpan is a range of one source's outbox entries past the
// retention, first to last: the untaken entries in between are all older.
type expiredSpan struct {
	source      string
	first, last uint64
}

// expiredThrough is the last outbox position past the retention: outbox
// positions follow their source's clock (outbox.add: at least the unix
// nanoseconds of the write), so an entry at or below it was written at
// least DeliveryRetention ago.
func (a *deliveryActor) expiredThrough() uint64 {
	return uint64(max(nanos(a.env.Clock.Now().Add(-DeliveryRetention)), 0))
}

// expires reports whether the untaken entry at pos of source is past the
// retention (through: expiredThrough), and if so gathers it for
// dropExpired and counts it as taken, so that no notice or read of the
// outbox takes it: a read meets a source's entries oldest first, so what
// it gathers of a source is one range of untaken entries.
func (a *deliveryActor) expires(source string, pos, through uint64) bool {
	if pos > through {
		return false
	}
	if n := len(a.expiring); n > 0 && a.expiring[n-1].source == source && a.expiring[n-1].last == a.taken[source] {
		a.expiring[n-1].last = pos
	} else {
		a.expiring = append(a.expiring, expiredSpan{source, pos, pos})
	}
	a.taken[source] = pos
	a.expiredCount++
	return true
}

// dropExpired deletes the entries expires gathered, a range deletion a
// span, in the pending writes, which count them once written
// (sealed.expired), with the developer log entry that says how many.
func (a *deliveryActor) dropExpired() {
	if len(a.expiring) == 0 {
		return
	}
	for _, s := range a.expiring {
		a.dropsFor(a.pending()).DeleteRange(outboxKey(a.id, s.source, s.first), outboxKey(a.id, s.source, s.last+1))
	}
	a.expiredUnwritten += a.expiredCount
	if a.ep.KitId != "" {
		e := newLogEntry(a.env, LogSourceDelivery, LogLevelError, "events.expired", a.id)
		e.Status = strconv.Itoa(a.expiredCount) + " expired"
		a.env.putLog(a.pending(), partition.Of(a.id), a.ep.KitId, e)
	}
	a.expiring, a.expiredCount = nil, 0
}

// expireWaiting gathers the events waiting in the outbox past the
// retention (expires): every partition's range of an installation
// behind, else the ranges of the sources that lag. An installation or a
// source with nothing younger left waits no more.
func (a *deliveryActor) expireWaiting() error {
	through := a.expiredThrough()
	left := make(map[string]bool) // sources with younger entries
	if a.behind {
		readers, err := a.env.everyPartition()
		if err != nil {
			return err
		}
		for p := range partition.ID(partition.Count) {
			if err := a.expireRange(readers[p], outboxPrefix(p, a.id), through, left); err != nil {
				return err
			}
		}
		if len(left) == 0 {
			a.behind, a.cursor = false, outboxCursor{}
		}
	} else {
		for source := range a.lagging {
			if err := a.expireRange(a.env.Partition(partition.Of(source)), outboxSourcePrefix(a.id, source), through, left); err != nil {
				return err
			}
		}
	}
	for source := range a.lagging {
		if !left[source] {
			delete(a.lagging, source)
		}
	}
	return nil
}

// expireRange gathers the untaken entries under prefix past the
// retention, seeking past what was taken and what is younger, and notes
// in left the sources with younger entries.
func (a *deliveryActor) expireRange(r PartitionReader, prefix []byte, through uint64, left map[string]bool) error {
	lower, upper := prefix, persistence.PrefixEnd(prefix)
	for lower != nil {
		var skipTo []byte
		err := r.Scan(lower, upper, false, func(k, _ []byte) bool {
			source, pos := outboxSource(k)
			switch taken := a.taken[source]; {
			case pos <= taken:
				skipTo = outboxKey(a.id, source, taken+1)
				return false
			case a.expires(source, pos, through):
				return true
			}
			left[source] = true
			skipTo = persistence.PrefixEnd(k[:len(k)-positionLen]) // the next source
			return false
		})
		if err != nil {
			return fmt.Errorf("read the outbox of %s: %w", a.id, err)
		}
		if lower = skipTo; lower != nil && bytes.Compare(lower, upper) >= 0 {
			break // a skip past the range: another node refuses such a read
		}
	}
	return nil
}
