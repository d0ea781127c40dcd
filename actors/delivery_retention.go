package actors

import (
	"bytes"
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

// sweep drops the dead letters and the events waiting in the outbox that
// are older than DeliveryRetention, and says how many in the developer
// log. A read that fails leaves the rest to the next sweep.
func (a *deliveryActor) sweep(ctx actorContext) {
	a.sweepQueued = false
	if a.stopped || a.broken != nil || a.life.loadErr != nil {
		return
	}
	now := a.env.Clock.Now()
	a.nextSweep = nanos(now.Add(sweepEvery))
	cutoff := nanos(now.Add(-DeliveryRetention))
	dead, err := a.dropDeadLetters(cutoff)
	waiting := 0
	if err == nil {
		waiting, err = a.expireWaiting(uint64(max(cutoff, 0)))
	}
	if err != nil && a.env.Logger != nil {
		a.env.Logger.Warn("drop what the deliveries' retention ended", "installation", a.id, "err", err, "retryIn", sweepEvery)
	}
	a.env.deliveryStats.expired[expiredDead].Add(uint64(dead))
	a.env.deliveryStats.expired[expiredWaiting].Add(uint64(waiting))
	if waiting > 0 && a.ep.KitId != "" {
		e := newLogEntry(a.env, LogSourceDelivery, LogLevelError, "events.expired", a.id)
		e.Status = strconv.Itoa(waiting) + " expired"
		a.env.putLog(a.pending(), partition.Of(a.id), a.ep.KitId, e)
	}
	if a.batch.Batch != nil {
		a.flushLater(ctx)
	}
}

// dropDeadLetters deletes the dead letters that died before cutoff, in
// the order of their sequences, up to the first that did not: dead
// letters die nearly in that order (each 24 hours after its first
// attempt), so one that died out of it goes at a later sweep, and a sweep
// reads no more than it deletes.
func (a *deliveryActor) dropDeadLetters(cutoff int64) (int, error) {
	dropped := 0
	err := a.scanEvents(deadEventsPrefix(a.id), func(k []byte, ev *kitpb.Event) bool {
		if ev.FinishedAt >= cutoff {
			return false
		}
		a.pending().Delete(k)
		dropped++
		return true
	})
	if err != nil {
		return dropped, fmt.Errorf("read the dead letters of %s: %w", a.id, err)
	}
	return dropped, nil
}

// expireWaiting drops the events waiting in the outbox, not taken, at or
// below position through: outbox positions follow their source's clock
// (outbox.add), so those were written at or before it. It reads what
// waits: every partition's range of an installation behind, else the
// ranges of the sources that lag. An installation or a source with
// nothing younger left waits no more.
func (a *deliveryActor) expireWaiting(through uint64) (int, error) {
	left := make(map[string]bool) // sources with younger entries
	expired := 0
	if a.behind {
		readers, err := a.env.everyPartition()
		if err != nil {
			return 0, err
		}
		for p := range partition.ID(partition.Count) {
			n, err := a.expireRange(readers[p], outboxPrefix(p, a.id), through, left)
			if expired += n; err != nil {
				return expired, err
			}
		}
		if len(left) == 0 {
			a.behind, a.cursor = false, outboxCursor{}
		}
	} else {
		for source := range a.lagging {
			n, err := a.expireRange(a.env.Partition(partition.Of(source)), outboxSourcePrefix(a.id, source), through, left)
			if expired += n; err != nil {
				return expired, err
			}
		}
	}
	for source := range a.lagging {
		if !left[source] {
			delete(a.lagging, source)
		}
	}
	return expired, nil
}

// expireRange drops the untaken entries under prefix at or below position
// through: each source's with one range deletion, after which they count
// as taken, so that no notice or read takes them. It counts them as it
// reads them, seeking past what was taken and what is younger, and notes
// in left the sources with younger entries.
func (a *deliveryActor) expireRange(r PartitionReader, prefix []byte, through uint64, left map[string]bool) (int, error) {
	type span struct {
		source      string
		first, last uint64
	}
	var spans []span
	lower, upper := prefix, persistence.PrefixEnd(prefix)
	count := 0
	for lower != nil {
		var skipTo []byte
		err := r.Scan(lower, upper, false, func(k, _ []byte) bool {
			source, pos := outboxSource(k)
			switch taken := a.taken[source]; {
			case pos <= taken:
				skipTo = outboxKey(a.id, source, taken+1)
				return false
			case pos > through:
				left[source] = true
				skipTo = persistence.PrefixEnd(k[:len(k)-positionLen]) // the next source
				return false
			}
			if n := len(spans); n > 0 && spans[n-1].source == source {
				spans[n-1].last = pos
			} else {
				spans = append(spans, span{source, pos, pos})
			}
			count++
			return true
		})
		if err != nil {
			return 0, fmt.Errorf("read the outbox of %s: %w", a.id, err)
		}
		if lower = skipTo; lower != nil && bytes.Compare(lower, upper) >= 0 {
			break // a skip past the range: another node refuses such a read
		}
	}
	for _, s := range spans {
		a.dropsFor(a.pending()).DeleteRange(outboxKey(a.id, s.source, s.first), outboxKey(a.id, s.source, s.last+1))
		a.taken[s.source] = s.last
	}
	return count, nil
}
