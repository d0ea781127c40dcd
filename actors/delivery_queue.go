package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Delivery policy (docs/deliveries.md, "Delivery").
const (
	// MaxInFlightPerInstallation is the delivery limit of docs/api.md "Limits" per
	// installation (the 50 per Kit are the sender's), as internal/limits
	// holds it.
	MaxInFlightPerInstallation = limits.EventsInFlight
	// FirstRetryAfter is the wait after a first failed attempt; each later
	// one doubles it, up to MaxRetryWait, with ±20% jitter.
	FirstRetryAfter = 10 * time.Second
	MaxRetryWait    = 4 * time.Hour
	// DeadAfter: an event still failing this long after its first failure
	// is dead-lettered, and stops holding up its conversation.
	DeadAfter = 24 * time.Hour
)

// MissingScope is the outcome of an event the sender did not send because
// the Kit bot no longer holds the scope its kind needs (a later version
// dropped it): it is dead-lettered at once, as no retry within the day
// would find the scope back without an update, and it is no failure of
// the endpoint (docs/deliveries.md "Events need their scope when sent").
const MissingScope = "missing_scope"

// deliveryQueue is what waits to be delivered, in memory: the queued
// sequences of each source (a conversation, or the installation itself),
// whose head alone may be in flight, so that a source's events arrive in
// order while sources go in parallel.
type deliveryQueue struct {
	bySource map[string][]uint64
	state    map[uint64]*delivery
	inFlight int
	held     int // bytes of the waiting records kept (delivery.rec)

	// order is every queued event with the time it was queued, in the
	// order queued (so in time order), from head on: the oldest still
	// waiting is the first whose entry is still in state (oldest), for
	// the metrics. Entries of events that left are skipped lazily and
	// dropped when they outnumber the live ones.
	order []queuedAt
	head  int
}

type queuedAt struct {
	seq uint64
	d   *delivery
	at  int64 // service clock, unix nanoseconds
}

type delivery struct {
	source   string
	inFlight bool
	asked    bool // a redelivery or a test event: goes even while the endpoint is paused
	attempts int32
	nextAt   int64 // service clock, unix nanoseconds
	firstAt  int64
	// outboxPos is the position in its source's outbox of the entry the
	// event is queued as (by its taken record or, before those, a queue
	// record that refers to it); 0: the queue record holds the event
	// itself.
	outboxPos uint64
	// origin is the position in its source's outbox of the entry a queue
	// record of its own (stored) was copied from, which stays until the
	// event leaves the queue; 0: none, or gone. Deleting the entry with
	// the copy's write had been a write across two partitions, which a
	// cluster does not commit atomically: a kill between its parts lost
	// the event (docs/deliveries.md, "Writes that span partitions").
	origin uint64
	// takenBy is the taken record (its first sequence) that queues the
	// event as a reference; 0: none (delivery_taken.go).
	takenBy uint64
	// stored: the queue holds a record of the event's own
	// (queuedEventKey), to be deleted when it leaves.
	stored bool
	// rec is the queued record: from the notice that queued it until its
	// first attempt (within heldBudget), so that a take need not read it
	// back, and while in flight, so that the outcome need not read it
	// again. nil: read it from the store.
	rec []byte
}

// heldBudget bounds the bytes of queued records a delivery actor keeps in
// memory while they wait (delivery.rec): a backlog beyond it, an endpoint
// down with a busy workspace, is read back from the store instead.
const heldBudget = 4 << 20

// queueOf is the source of ev for installation inst, which names its
// queue: the actor that wrote it (the outbox source of the notice that
// queued it), told by the event's data since the queue records do not
// keep the source. Its conversation; the workspace for user.* events; the
// installation for its own.
func queueOf(ev *kitpb.Event, inst string) string {
	switch {
	case ev.ConversationId != "":
		return ev.ConversationId
	case ev.User != nil:
		return ev.User.WorkspaceId
	}
	return inst
}

func (q *deliveryQueue) init() {
	if q.bySource == nil {
		q.bySource = make(map[string][]uint64)
		q.state = make(map[uint64]*delivery)
	}
}

// push queues seq at the end of its source's queue; at is now.
func (q *deliveryQueue) push(source string, seq uint64, at int64) *delivery {
	q.init()
	q.bySource[source] = append(q.bySource[source], seq)
	d := &delivery{source: source}
	q.state[seq] = d
	q.stamp(seq, d, at)
	return d
}

// stamp notes that seq (d) was queued at at.
func (q *deliveryQueue) stamp(seq uint64, d *delivery, at int64) {
	if n := len(q.order) - q.head; n > 2*len(q.state)+64 || q.head > 64 && q.head > len(q.order)/2 {
		live := q.order[:0]
		for _, o := range q.order[q.head:] {
			if q.state[o.seq] == o.d {
				live = append(live, o)
			}
		}
		clear(q.order[len(live):])
		q.order, q.head = live, 0
	}
	q.order = append(q.order, queuedAt{seq, d, at})
}

// oldest is when the oldest event still waiting was queued; 0: none.
func (q *deliveryQueue) oldest() int64 {
	for q.head < len(q.order) {
		if o := q.order[q.head]; q.state[o.seq] == o.d {
			return o.at
		}
		q.order[q.head] = queuedAt{}
		q.head++
	}
	q.order, q.head = q.order[:0], 0
	return 0
}

// hold keeps rec, d's queued record, while it waits, if the budget allows
// and the node has room (deliveryMemory).
func (q *deliveryQueue) hold(d *delivery, rec []byte, nodeRoom bool) {
	if nodeRoom && q.held+len(rec) <= heldBudget {
		d.rec = rec
		q.held += len(rec)
	}
}

// release stops counting d's record against the budget: it leaves for its
// attempt (or the queue).
func (q *deliveryQueue) release(d *delivery) {
	if d.rec != nil && !d.inFlight {
		q.held -= len(d.rec)
	}
}

// putBack undoes the hand-out of d, in flight, whose take failed: it
// waits again, its record held.
func (q *deliveryQueue) putBack(d *delivery) {
	d.inFlight = false
	q.inFlight--
	if d.rec != nil {
		q.held += len(d.rec)
	}
}

func (q *deliveryQueue) waiting() int { return len(q.state) }

// pop removes seq, the head of its source's queue.
func (q *deliveryQueue) pop(seq uint64) {
	d := q.state[seq]
	q.release(d)
	delete(q.state, seq)
	s := q.bySource[d.source]
	if len(s) > 0 && s[0] == seq {
		s = s[1:]
	}
	if len(s) == 0 {
		delete(q.bySource, d.source)
	} else {
		q.bySource[d.source] = s
	}
}

// insert queues seq into its source's queue in sequence order, but never
// before a head in flight (only a head is ever in flight): a redelivered
// event goes before its conversation's newer events.
func (q *deliveryQueue) insert(source string, seq uint64, at int64) *delivery {
	q.init()
	s := q.bySource[source]
	i, _ := slices.BinarySearch(s, seq)
	if i == 0 && len(s) > 0 && q.state[s[0]].inFlight {
		i = 1
	}
	q.bySource[source] = slices.Insert(s, i, seq)
	d := &delivery{source: source}
	q.state[seq] = d
	q.stamp(seq, d, at)
	return d
}

// load reads the queue of inst: its own records (queuedEventKey) and the
// references of its taken records (taken, given the sequences that have a
// record of their own), merged in sequence order, so each source's events
// too. An event that failed before the endpoint last resumed (resumedAt)
// starts its 24 hours again, at once.
func (q *deliveryQueue) load(store *persistence.Store, inst string, resumedAt, now int64, taken func(stored map[uint64]bool) ([]takenRef, error)) error {
	q.init()
	type own struct {
		seq uint64
		ev  *kitpb.Event
	}
	var owns []own
	stored := make(map[uint64]bool)
	prefix := queuedEventsPrefix(inst)
	var decodeErr error
	err := store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		ev := &kitpb.Event{}
		if decodeErr = proto.Unmarshal(v, ev); decodeErr != nil {
			return false
		}
		seq := decodeSeq(k[len(prefix):])
		owns = append(owns, own{seq, ev})
		stored[seq] = true
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return err
	}
	refs, err := taken(stored)
	if err != nil {
		return err
	}
	for len(owns) > 0 || len(refs) > 0 {
		if len(owns) == 0 || len(refs) > 0 && refs[0].seq < owns[0].seq {
			t := refs[0]
			refs = refs[1:]
			d := q.push(t.ref.source, t.seq, now)
			d.outboxPos, d.takenBy = t.ref.pos, t.record
			continue
		}
		seq, ev := owns[0].seq, owns[0].ev
		owns = owns[1:]
		if ev.OutboxSource != "" {
			// A reference written before taken records: the source names
			// the queue.
			d := q.push(ev.OutboxSource, seq, now)
			d.outboxPos, d.stored = ev.OutboxPos, true
			continue
		}
		d := q.push(queueOf(ev, inst), seq, now)
		d.stored, d.origin = true, ev.CopiedFromPos
		d.attempts, d.nextAt, d.firstAt, d.asked = ev.Attempts, ev.NextAttemptAt, ev.FirstAttemptAt, ev.Redelivery || ev.Test
		if d.firstAt != 0 && d.firstAt < resumedAt {
			d.nextAt, d.firstAt = 0, 0
		}
	}
	return nil
}

// takeDeliveries hands the sender the events it may send now.
func (a *deliveryActor) takeDeliveries(m *kitpb.TakeDeliveries) (proto.Message, error) {
	reply := &kitpb.DeliveriesReply{}
	if a.givenUp(m.Sender, m.Round) {
		reply.InFlight = int32(a.q.inFlight)
		return reply, nil
	}
	if m.Reclaim {
		if a.rounds == nil {
			a.rounds = make(map[string]uint64)
		}
		a.rounds[m.Sender] = m.Round
		a.reclaim(m.Sender)
	}
	a.grantWaiters() // a slot freed since goes to a call that waits first
	room := MaxInFlightPerInstallation - a.inUse() - a.reservedForCalls()
	now := nanos(a.env.Clock.Now())
	var heads []*delivery
	var seqs []uint64
	var newest uint64
	for _, queue := range a.q.bySource {
		// Full: no need to look further. NextDue is for a pump with nothing
		// in flight, and what is in flight wakes the pump when it ends. A
		// backlog over many conversations thus costs a few lookups a take,
		// not one per conversation.
		if len(heads) >= room || len(heads) >= int(m.Max) {
			break
		}
		d := a.q.state[queue[0]]
		switch {
		case d.inFlight, a.paused() && !d.asked:
			continue
		case d.nextAt > now:
			if reply.NextDue == 0 || d.nextAt < reply.NextDue {
				reply.NextDue = d.nextAt
			}
			continue
		}
		heads, seqs = append(heads, d), append(seqs, queue[0])
		newest = max(newest, queue[0])
	}
	// No event leaves the node before its sequence is durable: a crash
	// could otherwise give the sequence to another event. The takes of
	// notices wait for this write (deliveryActor.take): what notices took
	// since the last take, and the outcomes recorded meanwhile, go in one
	// durable commit, in the background, which the reply waits for
	// (durableBy). Only sequencing needs it: what an attempt's record or a
	// redelivery wrote may be lost (the event is sent again), and a sync
	// for each would cost one per delivered event. A backlog's heads were
	// mostly durable long ago.
	if newest > a.durable {
		a.dur.inflight = a.durableBy(newest)
	}
	for i, d := range heads {
		ev, rec, err := a.headEvent(d, seqs[i])
		if err != nil {
			// The sender hands out nothing of a take that failed: the
			// heads this one marked would be in flight for good.
			for j, took := range heads[:i] {
				a.q.putBack(took)
				delete(a.handedTo, seqs[j])
			}
			a.grantWaiters()
			return nil, err
		}
		a.q.release(d)
		d.inFlight, d.rec = true, rec
		a.q.inFlight++
		a.handOut(seqs[i], m.Sender)
		reply.Events = append(reply.Events, ev)
	}
	reply.InFlight = int32(a.q.inFlight)
	return reply, nil
}

// handOut notes that the head seq went to sender.
func (a *deliveryActor) handOut(seq uint64, sender string) {
	if a.handedTo == nil {
		a.handedTo = make(map[uint64]string)
	}
	a.handedTo[seq] = sender
}

// givenUp reports whether a request of sender's round was given up on by
// its sender: it has asked a reclaim of a later round since, and a late
// request, forwarded on a worker of its own, may reach the actor after
// it. What such a take would hand out, or such a record write, reaches no
// one: the reclaim put back what the sender was handed, and the record's
// event went again (or goes) under the new round.
func (a *deliveryActor) givenUp(sender string, round uint64) bool {
	return sender != "" && round < a.rounds[sender]
}

// reclaim puts back the heads in flight handed to sender, which has no
// attempt in progress: a take or record it gave up on (its request timed
// out) was done later, and what it handed out reached no one. Another
// sender's stay (during a leadership move two nodes may send).
func (a *deliveryActor) reclaim(sender string) {
	for seq, to := range a.handedTo {
		d := a.q.state[seq]
		switch {
		case d == nil || !d.inFlight:
			delete(a.handedTo, seq) // ended otherwise
		case to == sender:
			a.q.putBack(d)
			delete(a.handedTo, seq)
			a.env.deliveryStats.reclaimed.Inc()
		}
	}
}

// headEvent reads the event of d, the head seq of its conversation's
// queue, and its record, from memory when it is held.
func (a *deliveryActor) headEvent(d *delivery, seq uint64) (*kitpb.Event, []byte, error) {
	rec := d.rec
	if rec == nil {
		// The store must hold what outcomes wrote (a failed attempt's
		// state) before the record is read back.
		if err := a.settle(); err != nil {
			return nil, nil, err
		}
		if err := a.readAhead(d); err != nil {
			return nil, nil, err
		}
		if rec = d.rec; rec == nil {
			a.env.deliveryStats.queueReads.Inc()
			var err error
			if rec, err = a.queuedRecordOf(seq, d); err != nil {
				return nil, nil, err
			}
		}
	}
	ev, err := decodeQueued(rec)
	return ev, rec, err
}

// readAheadEvents is how many events of a conversation one read of its
// outbox takes into memory (readAhead).
const readAheadEvents = 16

// readAhead reads head, the head of its conversation's queue whose record
// is not held, and the next events of that queue, up to readAheadEvents
// references, in one scan of the conversation's outbox, and holds their
// records. A backlog past heldBudget (an endpoint that was down) or after a
// restart is thus read a range of each conversation at a time: a point
// read for each event had cost a seek, and the memtable's range
// deletions (pruned delivered records) fragmented again for each. The
// records held go past heldBudget by at most readAheadEvents records of
// each conversation with a head going out.
func (a *deliveryActor) readAhead(head *delivery) error {
	if head.stored || head.outboxPos == 0 {
		return nil // a record of its own: a retry, read alone
	}
	var want []*delivery
	var seqs []uint64
	for _, seq := range a.q.bySource[head.source] {
		d := a.q.state[seq]
		if d.stored || d.outboxPos == 0 || d.rec != nil || d.inFlight {
			continue
		}
		want, seqs = append(want, d), append(seqs, seq)
		if len(want) == readAheadEvents {
			break
		}
	}
	if len(want) == 0 || want[0] != head {
		return nil
	}
	a.env.deliveryStats.queueReads.Inc()
	lower := outboxKey(a.id, head.source, head.outboxPos)
	upper := outboxKey(a.id, head.source, want[len(want)-1].outboxPos+1)
	i := 0
	err := a.env.Partition(partition.Of(head.source)).Scan(lower, upper, false, func(k, v []byte) bool {
		pos := decodeSeq(k[len(k)-positionLen:])
		for i < len(want) && want[i].outboxPos < pos {
			i++ // its entry is missing: its own read says so
		}
		if i < len(want) && want[i].outboxPos == pos {
			want[i].rec = withSequence(v, seqs[i])
			a.q.held += len(want[i].rec)
			i++
		}
		return i < len(want)
	})
	if err != nil {
		return fmt.Errorf("read the outbox of %s from position %d: %w", head.source, head.outboxPos, err)
	}
	return nil
}

// queuedRecord reads the record of the queued event seq, the outbox
// entry it refers to merged in.
func (a *deliveryActor) queuedRecord(seq uint64) ([]byte, error) {
	rec, err := a.env.Store.Get(queuedEventKey(a.id, seq))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, fmt.Errorf("delivery %s: queued event %d is missing", a.id, seq)
	}
	if err != nil {
		return nil, err
	}
	return a.resolve(rec)
}

// errOutboxEntryGone: a record refers to an outbox entry that is gone. A
// queued event's entry stays until the event leaves the queue, so there
// it is a fault; a delivered record's goes first when the record is
// pruned, so there it is a pruning that a kill parted.
var errOutboxEntryGone = errors.New("the outbox entry it refers to is gone")

// resolve is the queue record rec with the outbox entry it refers to, if
// it is a reference: protobuf merges records written one after the other,
// so the entry's event followed by the reference's sequence is the event
// with its sequence.
func (a *deliveryActor) resolve(rec []byte) ([]byte, error) {
	ref := &kitpb.Event{}
	if err := proto.Unmarshal(rec, ref); err != nil {
		return nil, fmt.Errorf("decode queued event: %w", err)
	}
	if ref.OutboxSource == "" {
		return rec, nil
	}
	k := outboxKey(a.id, ref.OutboxSource, ref.OutboxPos)
	ev, err := a.env.Partition(partition.Of(ref.OutboxSource)).Get(k)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, fmt.Errorf("delivery %s: event %d: %w", a.id, ref.Sequence, errOutboxEntryGone)
	}
	if err != nil {
		return nil, err
	}
	return append(ev, rec...), nil
}

// decodeEvent decodes a resolved record as stored: without the reference,
// the message without its conversation.
func decodeEvent(rec []byte) (*kitpb.Event, error) {
	ev := &kitpb.Event{}
	if err := proto.Unmarshal(rec, ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	ev.OutboxSource, ev.OutboxPos, ev.CopiedFromPos = "", 0, 0
	return ev, nil
}

// decodeQueued decodes a queued record, the message with its conversation.
func decodeQueued(rec []byte) (*kitpb.Event, error) {
	ev, err := decodeEvent(rec)
	if err != nil {
		return nil, err
	}
	if ev.Message != nil {
		ev.Message.ConversationId = ev.ConversationId
	}
	return ev, nil
}

// recordAttempt writes an attempt's outcome with its developer log entry:
// a delivered event leaves the queue (kept among the recent deliveries); a
// failed one waits for its retry, or after DeadAfter is dead-lettered,
// which lets its source's next event go. The outcome also moves the
// endpoint's health (delivery_endpoint.go): a failure may pause it, a
// success resumes it.
func (a *deliveryActor) recordAttempt(m *kitpb.RecordAttempt) (proto.Message, error) {
	d := a.q.state[m.Sequence]
	if d == nil || !d.inFlight || a.givenUp(m.Sender, m.Round) {
		if m.TakeNext > 0 {
			return &kitpb.DeliveriesReply{InFlight: int32(a.q.inFlight)}, nil
		}
		return &kitpb.Ok{}, nil
	}
	rec := d.rec
	d.inFlight, d.rec = false, nil
	a.q.inFlight--
	a.grantWaiters()
	delete(a.handedTo, m.Sequence)
	if m.KitId != "" {
		a.ep.KitId = m.KitId
	}
	now := a.env.Clock.Now()
	b := a.pending() // written by the next flush, with what else comes meanwhile
	e := newLogEntry(a.env, LogSourceDelivery, LogLevelInfo, "event.delivery", a.id)
	e.Attempt = proto.Int32(d.attempts + 1)
	e.DurationMs = proto.Int64(m.DurationMs)
	if m.HttpStatus != 0 {
		e.HttpStatus = proto.Int32(m.HttpStatus)
	}
	k := queuedEventKey(a.id, m.Sequence)
	// A success of an event queued as a reference writes the outcome
	// alone (putDelivered): no need to decode the event.
	ev := &kitpb.Event{Sequence: m.Sequence}
	if !m.Delivered || d.outboxPos == 0 {
		var err error
		if ev, err = decodeQueued(rec); err != nil {
			return nil, err
		}
		if ev.Message != nil {
			ev.Message.ConversationId = "" // stored without it, as in the outbox
		}
	}
	d.attempts++
	d.asked = false // a redelivery or test event that failed waits like any event
	// Whatever the outcome, the event is no longer queued as a reference:
	// its delivered record refers to the entry, or its dead letter or
	// queue record holds the event.
	a.unref(b, d)
	ev.Attempts, ev.LastHttpStatus, ev.Redelivery = d.attempts, m.HttpStatus, false
	var endpointLog *kitpb.DevLogEntry
	switch {
	case m.Delivered:
		e.Status = "delivered"
		ev.NextAttemptAt, ev.FinishedAt = 0, nanos(now)
		a.dropQueued(b, k, d)
		a.putDelivered(b, ev, d)
		a.dropOutboxEntry(b, d) // a copy's origin: a reference's is the record's now
		endpointLog = a.endpointSucceeded(b, now)
	default:
		e.Level, e.ErrorCode = LogLevelError, m.ErrorCode
		ev.RetryReason = m.ErrorCode
		dead := m.ErrorCode == MissingScope
		if !dead {
			a.sinceKitResumed(b, d, m.KitResumedAt)
			if d.firstAt == 0 {
				d.firstAt = nanos(now)
			}
			// An endpoint failing 24 hours straight is paused rather than
			// its events dead-lettered: they stay queued for its return.
			endpointLog = a.endpointFailed(b, now)
			dead = !a.paused() && nanos(now)-d.firstAt >= int64(DeadAfter)
		}
		if dead {
			e.Status = "dead_lettered"
			ev.FinishedAt = nanos(now)
			a.dropQueued(b, k, d)
			a.dropOutboxEntry(b, d)
			put(b, deadEventKey(a.id, m.Sequence), ev) // a copy, which needs no entry
			break
		}
		e.Status = "retry_scheduled"
		if a.ep.PausedAt != 0 {
			e.Status = "paused"
		}
		d.nextAt = nanos(now.Add(retryWait(d.attempts, m.JitterPermille)))
		ev.NextAttemptAt, ev.FirstAttemptAt = d.nextAt, d.firstAt
		a.putCopy(b, k, ev, d) // the event itself from now on, with its state
	}
	if a.ep.KitId != "" {
		a.env.putLog(b, partition.Of(a.id), a.ep.KitId, e)
		if endpointLog != nil {
			a.env.putLog(b, partition.Of(a.id), a.ep.KitId, endpointLog)
		}
	}
	// Written by the next flush, with no sync of its own, as for
	// sequencing: a crash before the next WAL sync forgets the outcome, so
	// the event is sent again (at least once) or retried sooner, and its
	// log entry is lost with it. A failed flush stops the actor, whose
	// next activation reads the queue as stored.
	if e.Status == "delivered" || e.Status == "dead_lettered" {
		a.q.pop(m.Sequence)
		a.drainedOne(d.source)
	}
	a.env.deliveryStats.count(e.Status)
	if m.TakeNext > 0 {
		return a.takeDeliveries(&kitpb.TakeDeliveries{Max: m.TakeNext, Sender: m.Sender, Round: m.Round})
	}
	return &kitpb.Ok{}, nil
}

// dropQueued deletes in b the queue record k of d, if it has one.
func (a *deliveryActor) dropQueued(b batch, k []byte, d *delivery) {
	if d.stored {
		b.Delete(k)
		d.stored = false
	}
}

// putCopy writes ev, the event d itself with its state, as its queue
// record k in b. A reference becomes a copy whose origin is the outbox
// entry it referred to: the entry stays, so that b writes the
// installation's partition alone, and goes with the write in which the
// event leaves the queue (dropOutboxEntry).
func (a *deliveryActor) putCopy(b batch, k []byte, ev *kitpb.Event, d *delivery) {
	if d.outboxPos != 0 {
		d.origin, d.outboxPos = d.outboxPos, 0
	}
	ev.CopiedFromPos = d.origin
	put(b, k, ev)
	d.stored = true
}

// dropOutboxEntry deletes in b the outbox entry of d, which leaves the
// queue in b's other writes: the entry its record referred to, or the
// one its copy was made from. The deletion goes first on a cluster
// (dropsFor), so a kill between them leaves the copy queued, to be sent
// again, never an event in neither place.
func (a *deliveryActor) dropOutboxEntry(b batch, d *delivery) {
	if pos := max(d.outboxPos, d.origin); pos != 0 {
		a.dropsFor(b).Delete(outboxKey(a.id, d.source, pos))
		d.outboxPos, d.origin = 0, 0
	}
}

// retryWait is the wait after the n-th failed attempt: FirstRetryAfter
// doubled n-1 times, at most MaxRetryWait, times 0.8-1.2 by the sender's
// draw (0-1000), so that failures of many events do not retry in step.
func retryWait(n int32, jitterPermille int64) time.Duration {
	w := FirstRetryAfter
	for i := int32(1); i < n && w < MaxRetryWait; i++ {
		w *= 2
	}
	w = min(w, MaxRetryWait)
	return w * time.Duration(800+min(max(jitterPermille, 0), 1000)*400/1000) / 1000
}

// Jitter draws a RecordAttempt's jitter_permille.
func Jitter() int64 { return rand.Int64N(1001) }
