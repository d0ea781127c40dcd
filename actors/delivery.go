package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// deliveryActor is the sequencer of one installation's events
// (docs/deliveries.md): it takes events out of the installation's outbox
// (outboxKey, written by the actors whose writes cause them), gives each
// the installation's next sequence and queues it (queuedEventKey) in one
// synced batch, so that sequences have no gaps and an event is queued
// exactly once. Its identity is the installation id. It never talks HTTP:
// the sender of deliveries reads its queue.
type deliveryActor struct {
	env  *Env
	life lifecycle

	id   string
	last uint64 // the last sequence given out

	// taken is, by source, the last outbox position taken in this
	// activation; every entry of the source at or below it was taken.
	// Sources write positions in increasing order (outbox.add), so a
	// notice at or below it names an event taken already: by the
	// activation's scan, which may run before the notices of what it took,
	// or by the read of a gap (takeNotice).
	taken map[string]uint64
	// batch is what was written since the last flush (none: nil Batch):
	// what notices took, and the outcomes of attempts, which share one
	// write (docs/deliveries.md, "Cost").
	batch batch
	// drops are the outbox entries to delete, on a cluster, in a step of
	// their own before the batch's other writes (dropsFor).
	drops batch
	takes bool // batch holds takes: commit before handing out events
	// newHead: a notice's take queued an event at the head of its
	// conversation's queue, which a take may hand out now. An event
	// behind others goes when they are done, which the record of their
	// attempts (take_next) or the end of the chain that made them (a
	// wake-up of the pump) sees to, and so do the attempts in flight when
	// all 10 are: only a new head with a slot free wakes the sender.
	newHead    bool
	flushQueue bool        // a flushOutbox is on its way (flushTimer)
	flushTimer *time.Timer // sends flushOutbox (flushLater)

	// behind: the outbox holds events past the queue's bound, which wait
	// there for room (delivery_behind.go); cursor is where the last take
	// of them stopped.
	behind bool
	cursor outboxCursor
	// lagging are the sources with events in the outbox past their share
	// of the queue (sourceShare); drained those of them down to half of
	// it, to be read again (catchUp).
	lagging, drained map[string]bool
	// catchUpQueued: a catchUpNow is on its way; retryPending: a read of
	// the outbox failed, and its catchUpRetry is.
	catchUpQueued, retryPending bool
	// nextSweep is when the retention's next sweep is due (service clock,
	// unix ns; delivery_retention.go); sweepQueued: a sweepNow is on its way.
	nextSweep   int64
	sweepQueued bool
	// expiring are the outbox entries a read found past the retention, to
	// delete (expires, dropExpired); expiredCount how many;
	// expiredUnwritten how many of the pending writes' deletions are
	// the retention's (sealed.expired).
	expiring         []expiredSpan
	expiredCount     int
	expiredUnwritten int
	// charged is what the actor counts for in the node's deliveryMemory.
	charged int64

	tk takenRecords  // what the sequencer took, by commit (delivery_taken.go)
	q  deliveryQueue // what waits to be delivered (delivery_queue.go)
	// handedTo is the sender each head in flight was handed to, by
	// sequence: a sender that lost the answer of a take reclaims its own.
	handedTo map[uint64]string
	// rounds are the senders' rounds, by sender: the round of the last
	// reclaim each asked. Their requests of an earlier round were given up
	// on (TakeDeliveries.round).
	rounds    map[string]uint64
	durable   uint64                  // the last sequence a commit made durable for sure
	ep        *kitpb.DeliveryEndpoint // the endpoint's health (delivery_endpoint.go)
	delivered []uint64                // sequences of the delivered records kept, sorted (keepRecent)
	// deliveredRefs are, by sequence, the outbox entries that delivered
	// records refer to (keepRecent): each is deleted with its record.
	deliveredRefs map[uint64]outboxRef

	calls callSlots // the calls among the deliveries in flight (delivery_calls.go)

	gauge   *deliveryGauge // what the metrics read of the queue (delivery_metrics.go)
	stopped bool

	// Commits in the background (delivery_commits.go): the one in
	// flight, the one replies wait for after it, and what binds a reply
	// to either.
	inflight, next *commitGroup
	dur            durability
	broken         error // a commit failed: the actor stops
	stopping       bool  // stopIfBroken stopped it
	root           *actor.RootContext
	self           *actor.PID
}

// flushOutbox commits what the notices and attempts before it wrote: all
// that reached the mailbox before it share one write.
type flushOutbox struct{}

func (a *deliveryActor) Receive(ctx actorContext) {
	defer a.publish()
	defer a.stopIfBroken(ctx)
	defer a.catchUpLater()
	defer a.sweepLater()
	a.rememberSelf(ctx)
	// Notices and wakes come without a sender (cluster.Host.Send): they are
	// not requests, but they are activity.
	switch m := ctx.Message().(type) {
	case *kitpb.OutboxNotice:
		a.life.asked++
		if a.life.loadErr != nil || a.broken != nil {
			return // the outbox keeps the event; the next activation takes it
		}
		err := a.takeNotice(m)
		a.dropExpired()
		if err != nil {
			a.activateAgainLater(ctx, "take outbox entries", err)
			return
		}
		a.wakeSenderForNewHead()
		a.flushLater(ctx)
		return
	case flushOutbox:
		a.flushQueue = false
		a.flush()
		return
	case committed:
		a.ended(ctx, m.g)
		return
	case *kitpb.WakeDelivery:
		a.life.asked++ // activation took the outbox already
		return
	case *kitpb.TakeCallSlot:
		if ctx.Sender() != nil && a.life.loadErr == nil && a.broken == nil {
			a.life.asked++
			// Not bound to a write: a slot is memory only.
			ctx.Respond(a.takeCallSlot(m))
			return
		}
	case *kitpb.GiveCallSlot:
		a.life.asked++
		a.giveCallSlot(m.Call)
		return
	case callLeaseLapsed:
		a.leasesLapsed()
		return
	case callGaveUp:
		a.forgetGivenUp()
		return
	case catchUpNow:
		a.catchUp(ctx)
		return
	case catchUpRetry:
		a.retryPending = false // catchUpLater starts it again
		return
	case sweepNow:
		a.sweep()
		return
	case *kitpb.ResumeDeliveries:
		a.life.asked++
		if a.life.loadErr == nil {
			a.resumeForNewVersion(ctx, m)
		}
		return
	case *actor.Stopping:
		// What waits for a flush is written, after the commit in flight.
		if a.flushTimer != nil {
			a.flushTimer.Stop()
		}
		a.stopCallSlots()
		_ = a.settle() // a failure wakes the actor again (stopIfBroken)
		// receiveDurable's release then gives back its memory and gauge.
	}
	a.dur.inflight = nil // a take binds its reply (takeDeliveries)
	receiveDurable(a, &a.life, a.env, &a.dur, ctx)
	if _, started := ctx.Message().(*actor.Started); started && a.life.loadErr != nil {
		a.activateAgainLater(ctx, "load deliveries", a.life.loadErr)
		return
	}
	if a.batch.Batch != nil {
		a.flushLater(ctx) // an attempt's outcome
	}
}

// wakeSenderForNewHead tells the sender when a take queued an event at the
// head of its conversation's queue with a slot free (newHead). The
// sender's take writes the takes (takeDeliveries).
func (a *deliveryActor) wakeSenderForNewHead() {
	if a.newHead && a.inUse()+a.reservedForCalls() < MaxInFlightPerInstallation && !a.paused() && a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id)
	}
	a.newHead = false
}

// stopIfBroken stops an actor one of whose commits failed
// (delivery_commits.go), to start again from the store.
func (a *deliveryActor) stopIfBroken(ctx actorContext) {
	if a.broken != nil && !a.stopping {
		a.stopping = true
		a.activateAgainLater(ctx, "commit deliveries", a.broken)
	}
}

// reactivateAfter is how long a delivery actor that could not read its
// state waits before it starts again.
const reactivateAfter = 500 * time.Millisecond

// activateAgainLater stops the actor, which could not read its state or
// the outbox (in a cluster, a partition without a leader for a moment
// fails the catch-up of a read), and wakes it again a moment later: the
// outbox keeps what it did not take, and the next activation takes it,
// but the notice that started this one is spent and no other may come.
func (a *deliveryActor) activateAgainLater(ctx actorContext, what string, err error) {
	if a.env.Logger != nil {
		a.env.Logger.Warn(what, "installation", a.life.identity, "err", err, "retryIn", reactivateAfter)
	}
	ctx.Stop(ctx.Self())
	host, id := a.env.Host, a.life.identity
	time.AfterFunc(reactivateAfter, func() { host.Send(KindDelivery, id, &kitpb.WakeDelivery{}) })
}

// flushAfter is how long the takes of notices and the outcomes of
// attempts may wait for a write: the sender's next take writes them all
// at once (takeDeliveries), usually well before; this bounds how much a
// crash may undo, which it may undo anyway until the next WAL sync.
const flushAfter = 20 * time.Millisecond

// flushLater has the pending writes committed within flushAfter, so that
// the takes and outcomes in between share one write: a flush at the end
// of the mailbox's burst had been one write a notice and one an outcome,
// since a mailbox run inline on its sender rarely holds more than one
// message.
func (a *deliveryActor) flushLater(ctx actorContext) {
	if a.flushQueue {
		return
	}
	a.flushQueue = true
	if a.flushTimer == nil {
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.flushTimer = time.AfterFunc(a.env.deliveryFlushAfter(), func() { root.Send(self, flushOutbox{}) })
		return
	}
	a.flushTimer.Reset(a.env.deliveryFlushAfter())
}

// pending is the batch of writes waiting for the next flush.
func (a *deliveryActor) pending() batch {
	if a.batch.Batch == nil {
		a.batch = a.env.newBatch()
	}
	return a.batch
}

// exists: a delivery actor is asked only by the node itself, for
// installations it knows.
func (a *deliveryActor) exists() bool { return true }

func (a *deliveryActor) activate(identity string) error {
	a.id = identity
	a.taken = make(map[string]uint64)
	a.ep = &kitpb.DeliveryEndpoint{}
	if _, err := load(a.env.Store, deliveryEndpointKey(a.id), a.ep); err != nil {
		return err
	}
	// The delivered records first: a taken record's event that has one is
	// no longer queued.
	if err := a.loadDelivered(); err != nil {
		return err
	}
	if err := a.q.load(a.env.Store, a.id, a.ep.ResumedAt, nanos(a.env.Clock.Now()), a.loadTaken); err != nil {
		return err
	}
	for _, d := range a.q.state {
		if pos := max(d.outboxPos, d.origin); pos > a.taken[d.source] {
			a.taken[d.source] = pos
		}
	}
	v, err := a.env.Store.Get(eventSequenceKey(a.id))
	switch {
	case errors.Is(err, persistence.ErrNotFound):
	case err != nil:
		return err
	default:
		a.last = decodeSeq(v)
	}
	a.durable = a.last // read back from the store: a restart synced it
	// What lost notices named (a crash's, or a notice that reached an
	// activation as it stopped) is in the outbox, with any backlog past
	// the queue's bound.
	a.behind = true
	if err := a.takeBacklog(); err != nil {
		a.discard()
		return err
	}
	a.dropExpired()
	if err := a.settle(); err != nil {
		return err
	}
	if a.q.waiting() > 0 && a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id) // after a restart
	}
	a.newHead = false
	return nil
}

// discard drops what was taken and not committed: an activation takes the
// outbox in one write or not at all, and the next one takes the same
// entries again under the same sequences.
func (a *deliveryActor) discard() {
	closeAll([]batch{a.batch, a.drops})
	a.batch, a.drops, a.takes = batch{}, batch{}, false
	a.expiring, a.expiredCount, a.expiredUnwritten = nil, 0, 0
}

// dropsFor is where the deletion of an outbox entry goes, which the
// writes of b let go: b itself on a node alone, whose batches the store
// applies whole. On a cluster the entry lives in its source's partition,
// and a batch that spans partitions is one raft entry a partition, which
// a kill can part: the deletions are a step of their own, committed
// before the rest (sealed.commit), so that a parted commit leaves the
// event where it was (a queued copy, sent again) rather than nowhere
// (docs/deliveries.md, "Writes that span partitions").
func (a *deliveryActor) dropsFor(b batch) batch {
	if !a.replicated() {
		return b
	}
	a.pending() // what flushes and seals look at
	if a.drops.Batch == nil {
		a.drops = a.env.newBatch()
	}
	return a.drops
}

// takeNotice takes the event a notice names, after the entries of its
// source it has not taken yet: those of a notice that was lost, or that
// travels behind this one (notices between nodes go apart). The notice
// says that its source wrote nothing for this installation between After
// and its position, so only a notice whose After lies past what was
// taken costs a read of the outbox, of that range alone.
func (a *deliveryActor) takeNotice(m *kitpb.OutboxNotice) error {
	taken := a.taken[m.Source]
	if m.Pos <= taken {
		return nil
	}
	if a.leaves(m.Source) {
		return nil // the event waits in the outbox (catchUp)
	}
	if m.After > taken {
		a.env.deliveryStats.gapReads.Inc()
		lower, upper := outboxKey(a.id, m.Source, taken+1), outboxKey(a.id, m.Source, m.Pos)
		through := a.expiredThrough()
		err := a.env.Partition(partition.Of(m.Source)).Scan(lower, upper, false, func(k, v []byte) bool {
			if _, pos := outboxSource(k); !a.expires(m.Source, pos, through) {
				a.take(m.Source, pos, v)
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("read the outbox of %s before position %d: %w", m.Source, m.Pos, err)
		}
	}
	a.take(m.Source, m.Pos, m.Event)
	return nil
}

// take queues the outbox record rec, at position pos of source, under the
// next sequence. The event is queued as a reference to its outbox entry,
// named by the commit's taken record (delivery_taken.go) rather than a
// record of its own: the entry stays until the event's delivery ends
// (docs/deliveries.md, "Outbox and sequencer").
func (a *deliveryActor) take(source string, pos uint64, rec []byte) {
	b := a.pending()
	a.takes = true
	a.last++
	a.taken[source] = pos
	d := a.q.push(source, a.last, nanos(a.env.Clock.Now()))
	a.newHead = a.newHead || len(a.q.bySource[source]) == 1
	d.outboxPos = pos
	d.takenBy = a.tk.add(b, a.id, a.last, outboxRef{source, pos})
	a.q.hold(d, withSequence(rec, a.last), a.env.nodeRoom() > 0)
	a.charge() // at once: a take from the outbox takes many in one message
}

// sealed is one commit of the actor: the outbox entries it deletes
// (dropsFor), then the rest. expired is how many of those deletions are
// the retention's, counted once they are written: a commit that fails
// stops the actor, whose next activation drops them again.
type sealed struct {
	drops, rest batch
	expired     int
}

func (s sealed) commit(env *Env) error {
	if s.drops.Batch == nil {
		return s.written(env, s.rest.Commit())
	}
	return s.written(env, env.commitInSteps(s.drops, s.rest))
}

// write writes s without a sync of its own, on a node alone, whose
// batches the store applies whole (dropsFor: no drops apart).
func (s sealed) write(env *Env) error { return s.written(env, s.rest.Write()) }

func (s sealed) written(env *Env, err error) error {
	if err == nil && s.expired > 0 {
		env.deliveryStats.expired[expiredWaiting].Add(uint64(s.expired))
	}
	return err
}

// seal takes the pending writes with what the sequencer must write with
// its takes: the taken record and the last sequence.
func (a *deliveryActor) seal() sealed {
	s, takes := sealed{a.drops, a.batch, a.expiredUnwritten}, a.takes
	a.batch, a.drops, a.takes, a.expiredUnwritten = batch{}, batch{}, false, 0
	if takes {
		a.tk.put(s.rest, a.id)
		s.rest.Set(eventSequenceKey(a.id), persistence.AppendUint64(nil, a.last))
	}
	return s
}

func (a *deliveryActor) handle(msg proto.Message) (proto.Message, error) {
	if a.broken != nil {
		return nil, fmt.Errorf("deliveries of %s: %w", a.id, a.broken)
	}
	switch m := msg.(type) {
	case *kitpb.ListQueuedEvents:
		return a.listQueued(m)
	case *kitpb.TakeDeliveries:
		return a.takeDeliveries(m)
	case *kitpb.RecordAttempt:
		return a.recordAttempt(m)
	case *kitpb.ListDeliveries:
		return a.listDeliveries(m)
	case *kitpb.Redeliver:
		return a.redeliver(m)
	case *kitpb.QueueTestEvent:
		return a.queueTestEvent(m)
	}
	return nil, unknownRequest(KindDelivery, msg)
}

// listQueued answers queued events after a sequence, in order.
func (a *deliveryActor) listQueued(m *kitpb.ListQueuedEvents) (proto.Message, error) {
	// What notices took must be visible to the reader first.
	if err := a.settle(); err != nil {
		return nil, err
	}
	reply := &kitpb.QueuedEventsReply{LastSequence: a.last}
	for _, seq := range a.queuedSeqs(m.AfterSequence+1, 0, int(m.Limit), false) {
		rec, err := a.queuedRecordOf(seq, a.q.state[seq])
		if err != nil {
			return reply, err
		}
		ev, err := decodeQueued(rec)
		if err != nil {
			return reply, err
		}
		reply.Events = append(reply.Events, ev)
	}
	return reply, nil
}

// WakeDeliveries activates the delivery actor of every installation with
// delivery records (events queued, to be sent) or whose outbox holds events
// (their notices were lost with the previous process). Package server calls it
// once the node has joined.
func WakeDeliveries(env *Env) error {
	for p := range partition.ID(partition.Count) {
		if err := WakeDeliveriesIn(env, p); err != nil {
			return err
		}
	}
	return nil
}

// WakeDeliveriesIn wakes the delivery actors of partition p's
// installations that have events to sequence or send: what a node that
// starts to lead p must do (the previous leader's queues are its state now).
// It wakes too the uninstalled installations of p whose purge is not done
// (installation_purge.go): their activation goes on with it.
//
// It reads this node's replica of p, which it leads: a node that no
// longer hosts p (it lost the lead before the wake ran, as in a whole
// cluster's stop) wakes nothing, its replica being no longer its to
// read, and the next leader wakes them.
func WakeDeliveriesIn(env *Env, p partition.ID) error {
	wake := func(inst string) { env.Host.Send(KindDelivery, inst, &kitpb.WakeDelivery{}) }
	outboxOf := func(inst string) []byte { return outboxPrefix(p, inst) }
	purging := func(inst string) { env.Host.Send(KindInstallation, inst, &kitpb.WakeDelivery{}) }
	for _, scan := range []func() error{
		func() error {
			return eachInstallation(env.Store, deliveriesPrefix(p), deliveryInstallation, deliveryPrefix, wake)
		},
		func() error {
			return eachInstallation(env.Store, outboxesPrefix(p), outboxInstallation, outboxOf, wake)
		},
		func() error {
			return eachInstallation(env.Store, purgesPrefix(p), purgeInstallation, purgeKey, purging)
		},
	} {
		if env.Host != nil && !env.Host.Hosts(p) {
			return nil
		}
		if err := scan(); err != nil {
			return err
		}
	}
	return nil
}

// eachInstallation calls fn with each installation that has keys under
// prefix, found by one seek per installation: instOf names a key's
// installation, instPrefix covers all of an installation's keys.
func eachInstallation(store *persistence.Store, prefix []byte, instOf func([]byte) string, instPrefix func(string) []byte, fn func(string)) error {
	lower, upper := prefix, persistence.PrefixEnd(prefix)
	for {
		var inst string
		err := store.Scan(lower, upper, false, func(k, _ []byte) bool {
			inst = instOf(k)
			return false
		})
		if err != nil || inst == "" {
			return err
		}
		fn(inst)
		lower = persistence.PrefixEnd(instPrefix(inst))
	}
}
