package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// What the developer API sees of an installation's deliveries and asks of
// them (docs/deliveries.md, "Replay and visibility").

// KeepDelivered is how many delivered events an installation keeps (the
// highest sequences) for the list and for redelivery; dead letters are
// kept until redelivered.
const KeepDelivered = 1000

// pruneDelivered is how many delivered records past KeepDelivered wait
// for one pruning scan, so that pruning is not a scan per delivery.
const pruneDelivered = 100

// Delivery states of the developer API.
const (
	DeliveryQueued    = "queued"
	DeliveryInFlight  = "in_flight"
	DeliveryRetrying  = "retrying"
	DeliverySucceeded = "succeeded"
	DeliveryDead      = "dead"
)

// outboxRef names the outbox entry of a delivered record that refers to
// it; pos 0: the record holds the event itself.
type outboxRef struct {
	source string
	pos    uint64
}

// loadDelivered reads the sequences of the delivered records kept, and
// the outbox entries they refer to, which count as taken.
func (a *deliveryActor) loadDelivered() error {
	prefix := deliveredEventsPrefix(a.id)
	a.delivered = a.delivered[:0]
	a.deliveredRefs = make(map[uint64]outboxRef)
	var decodeErr error
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		seq := decodeSeq(k[len(prefix):])
		a.delivered = append(a.delivered, seq)
		ref := &kitpb.Event{}
		if decodeErr = proto.Unmarshal(v, ref); decodeErr != nil {
			return false
		}
		if ref.OutboxSource != "" {
			a.deliveredRefs[seq] = outboxRef{ref.OutboxSource, ref.OutboxPos}
			a.taken[ref.OutboxSource] = max(a.taken[ref.OutboxSource], ref.OutboxPos)
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return err
}

// putDelivered writes the delivered record of ev, the event whose
// delivery d ended, in b. A record that still refers to its outbox entry
// (a first attempt's success, nearly every one) keeps referring to it:
// the record holds the outcome alone, and the entry stays until the
// record is pruned (keepRecent). Copying the event had written it a
// second time, which every flush and compaction then carried.
func (a *deliveryActor) putDelivered(b batch, ev *kitpb.Event, d *delivery) {
	var ref outboxRef
	if d.outboxPos != 0 {
		ref = outboxRef{d.source, d.outboxPos}
		d.outboxPos = 0 // the entry is the record's now
		// Merged after the entry's bytes (resolve), these fields make the
		// event as the copy would have been.
		ev = &kitpb.Event{
			Sequence: ev.Sequence, OutboxSource: ref.source, OutboxPos: ref.pos,
			Attempts: ev.Attempts, LastHttpStatus: ev.LastHttpStatus, FinishedAt: ev.FinishedAt,
		}
	}
	put(b, deliveredEventKey(a.id, ev.Sequence), ev)
	a.keepRecent(b, ev.Sequence, ref)
}

// keepRecent notes the delivered record seq written in b and, once
// pruneDelivered are past KeepDelivered, deletes the lowest sequences in b.
// The sequences kept are known (a.delivered), so pruning reads nothing: a
// scan would step over the tombstones of every record pruned before. The
// lowest sequences are the delivered records from the first up to the
// first kept, so one range deletion covers them: a point tombstone each
// had been a twentieth of what a delivered event wrote, carried through
// every flush and compaction (docs/deliveries.md, "Cost on the write
// path").
// The outbox entries the pruned records referred to go with them, before
// them on a cluster (dropsFor): a kill between leaves records without
// their entries, which the listings skip as pruned and the next pruning
// deletes, never entries that nothing refers to, which an activation
// would take again.
func (a *deliveryActor) keepRecent(b batch, seq uint64, ref outboxRef) {
	i, found := slices.BinarySearch(a.delivered, seq)
	if !found {
		a.delivered = slices.Insert(a.delivered, i, seq)
	}
	if ref.pos != 0 {
		a.deliveredRefs[seq] = ref
	}
	if len(a.delivered) <= KeepDelivered+pruneDelivered {
		return
	}
	n := len(a.delivered) - KeepDelivered
	b.DeleteRange(deliveredEventKey(a.id, a.delivered[0]), deliveredEventKey(a.id, a.delivered[n]))
	for _, s := range a.delivered[:n] {
		a.dropDeliveredRef(b, s)
	}
	a.delivered = slices.Delete(a.delivered, 0, n)
}

// dropDeliveredRef deletes in b the outbox entry the delivered record seq
// referred to, if it did.
func (a *deliveryActor) dropDeliveredRef(b batch, seq uint64) {
	if ref, ok := a.deliveredRefs[seq]; ok {
		a.dropsFor(b).Delete(outboxKey(a.id, ref.source, ref.pos))
		delete(a.deliveredRefs, seq)
	}
}

// forgetDelivered notes that the delivered record seq is deleted, and
// answers the position of the outbox entry it referred to (0: none), which
// its caller takes over.
func (a *deliveryActor) forgetDelivered(seq uint64) (pos uint64) {
	if i, found := slices.BinarySearch(a.delivered, seq); found {
		a.delivered = slices.Delete(a.delivered, i, i+1)
	}
	pos = a.deliveredRefs[seq].pos
	delete(a.deliveredRefs, seq)
	return pos
}

// listDeliveries answers the deliveries below m.BeforeSequence, highest
// sequence first: the queue, the delivered and the dead records merged.
func (a *deliveryActor) listDeliveries(m *kitpb.ListDeliveries) (proto.Message, error) {
	if err := a.settle(); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	var out []*kitpb.DeliveryState
	// The queue is in memory, its events partly references to the outbox
	// (taken records): highest first, one more than the page.
	queued := a.queuedSeqs(0, m.BeforeSequence, limit+1, true)
	for i := len(queued) - 1; i >= 0 && len(out) <= limit; i-- {
		seq := queued[i]
		rec, err := a.queuedRecordOf(seq, a.q.state[seq])
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, &kitpb.DeliveryState{Event: ev, State: a.queuedState(seq)})
	}
	for _, r := range []struct {
		prefix []byte
		at     func(uint64) []byte
		state  func(uint64) string
	}{
		{deliveredEventsPrefix(a.id), func(s uint64) []byte { return deliveredEventKey(a.id, s) }, func(uint64) string { return DeliverySucceeded }},
		{deadEventsPrefix(a.id), func(s uint64) []byte { return deadEventKey(a.id, s) }, func(uint64) string { return DeliveryDead }},
	} {
		upper := persistence.PrefixEnd(r.prefix)
		if m.BeforeSequence != 0 {
			upper = r.at(m.BeforeSequence)
		}
		n := 0
		var decodeErr error
		err := a.env.Store.Scan(r.prefix, upper, true, func(_, v []byte) bool {
			var ev *kitpb.Event
			if ev, decodeErr = a.decodeStored(v); decodeErr != nil {
				if errors.Is(decodeErr, errOutboxEntryGone) {
					decodeErr = nil
					return true // pruned (keepRecent)
				}
				return false
			}
			out = append(out, &kitpb.DeliveryState{Event: ev, State: r.state(ev.Sequence)})
			n++
			return n <= limit
		})
		if err == nil {
			err = decodeErr
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(x, y *kitpb.DeliveryState) int { return cmp.Compare(y.Event.Sequence, x.Event.Sequence) })
	reply := &kitpb.DeliveriesPage{Endpoint: proto.Clone(a.ep).(*kitpb.DeliveryEndpoint), WaitingInOutbox: a.behind || len(a.lagging) > 0}
	if len(out) > limit {
		out, reply.More = out[:limit], true
	}
	for _, d := range out {
		if d.Event.Message != nil {
			d.Event.Message.ConversationId = d.Event.ConversationId
		}
	}
	reply.Deliveries = out
	return reply, nil
}

func (a *deliveryActor) queuedState(seq uint64) string {
	d := a.q.state[seq]
	switch {
	case d == nil:
		return DeliveryQueued
	case d.inFlight:
		return DeliveryInFlight
	case d.attempts > 0:
		return DeliveryRetrying
	}
	return DeliveryQueued
}

// redeliver sends events again under their eventId and sequence: one by
// id (delivered, dead, or waiting: then at once), or the dead letters
// since a time, as many as the queue has room for (reply.More: ask
// again). A redelivered event goes back into its conversation's
// queue before the newer events waiting there, is sent even while the
// endpoint is paused, and starts a new 24 hours before it can die.
func (a *deliveryActor) redeliver(m *kitpb.Redeliver) (proto.Message, error) {
	if err := a.settle(); err != nil {
		return nil, err
	}
	b := a.env.newBatch()
	defer b.Close()
	reply := &kitpb.RedeliverReply{}
	// requeue queues again the delivered or dead event ev, whose record k
	// it deletes, as a copy. A delivered record that refers to its outbox
	// entry hands the entry to the copy, as its origin: deleting it here
	// would write two partitions, which a kill may part.
	requeue := func(k []byte, ev *kitpb.Event) {
		b.Delete(k)
		ev.Redelivery, ev.NextAttemptAt, ev.FirstAttemptAt, ev.FinishedAt = true, 0, 0, 0
		d := a.q.insert(queueOf(ev, a.id), ev.Sequence, nanos(a.env.Clock.Now()))
		d.attempts, d.asked = ev.Attempts, true
		d.origin = a.forgetDelivered(ev.Sequence)
		a.putCopy(b, queuedEventKey(a.id, ev.Sequence), ev, d)
		reply.Sequences = append(reply.Sequences, ev.Sequence)
	}
	found := true
	var err error
	if m.EventId == "" {
		// As many as the queue has room for (at least what may be in
		// flight, so that a full queue makes some progress), so that a
		// redelivery of a day's dead letters neither holds them all in
		// memory nor writes them in one batch: the caller asks again.
		room := max(a.queueBound()-a.q.waiting(), MaxInFlightPerInstallation)
		err = a.scanEvents(deadEventsPrefix(a.id), func(k []byte, ev *kitpb.Event) bool {
			if ev.FinishedAt < m.DeadSince {
				return true
			}
			if reply.More = len(reply.Sequences) == room; reply.More {
				return false
			}
			requeue(k, ev)
			return true
		})
	} else {
		found, err = a.redeliverOne(b, m.EventId, requeue, reply)
	}
	if err == nil && len(reply.Sequences) > 0 {
		// Durable before its 202: a redelivery lost in a crash would leave
		// the event delivered or dead, with nothing left to send it.
		err = b.Commit()
	}
	if err != nil {
		if len(reply.Sequences) > 0 {
			// The queue in memory holds what the store does not: start
			// again from the store (stopIfBroken).
			a.fail(err)
		}
		return nil, fmt.Errorf("redeliver events of %s: %w", a.id, err)
	}
	if !found {
		return nil, kiterr.Absent("event")
	}
	if len(reply.Sequences) == 0 {
		return reply, nil
	}
	if a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id)
	}
	return reply, nil
}

// redeliverOne finds the event id: waiting in the queue (made due at
// once, unless it is in flight already), delivered or dead (requeued).
func (a *deliveryActor) redeliverOne(b batch, id string, requeue func([]byte, *kitpb.Event), reply *kitpb.RedeliverReply) (bool, error) {
	found := false
	match := func(k []byte, ev *kitpb.Event) bool {
		if ev.Id != id {
			return true
		}
		found = true
		switch d := a.q.state[ev.Sequence]; {
		case d == nil:
			requeue(k, ev)
		case !d.inFlight:
			a.q.release(d)
			d.nextAt, d.firstAt, d.asked, d.rec = 0, 0, true, nil // its record changes
			ev.NextAttemptAt, ev.FirstAttemptAt, ev.Redelivery = 0, 0, true
			a.putCopy(b, k, ev, d) // the event itself, as after a failed attempt
			a.unref(b, d)
			reply.Sequences = append(reply.Sequences, ev.Sequence)
		}
		return false
	}
	for _, seq := range a.queuedSeqs(0, 0, 0, false) {
		rec, err := a.queuedRecordOf(seq, a.q.state[seq])
		if err != nil {
			return false, err
		}
		ev, err := decodeEvent(rec)
		if err != nil {
			return false, err
		}
		if !match(queuedEventKey(a.id, seq), ev) {
			return true, nil
		}
	}
	for _, prefix := range [][]byte{deadEventsPrefix(a.id), deliveredEventsPrefix(a.id)} {
		if err := a.scanEvents(prefix, match); err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// decodeStored decodes a queued, delivered or dead record, a queued
// reference with the outbox entry it refers to.
func (a *deliveryActor) decodeStored(v []byte) (*kitpb.Event, error) {
	rec, err := a.resolve(v)
	if err != nil {
		return nil, err
	}
	return decodeEvent(rec)
}

// scanEvents calls fn with each stored event under prefix, in sequence
// order, until it answers false.
func (a *deliveryActor) scanEvents(prefix []byte, fn func(k []byte, ev *kitpb.Event) bool) error {
	var decodeErr error
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		var ev *kitpb.Event
		if ev, decodeErr = a.decodeStored(v); decodeErr != nil {
			if errors.Is(decodeErr, errOutboxEntryGone) {
				decodeErr = nil
				return true // pruned (keepRecent)
			}
			return false
		}
		return fn(slices.Clone(k), ev)
	})
	if err == nil {
		err = decodeErr
	}
	return err
}

// queueTestEvent queues a test event of kind m.Type (kit trigger) like any
// event: the installation's next sequence, its own queue, the same sender
// and signing, the developer log. Like a redelivery it goes while the
// endpoint is paused, and its success resumes it. Its data is an example of the kind's
// resource, with fresh ids that name nothing stored.
func (a *deliveryActor) queueTestEvent(m *kitpb.QueueTestEvent) (proto.Message, error) {
	k, ok := eventKindOf(m.Type)
	if !ok {
		return nil, kiterr.Invalid("type", "is not an event kind")
	}
	if m.KitId != "" {
		a.ep.KitId = m.KitId
	}
	ev := testEvent(k, nanos(a.env.Clock.Now()), a.id, m.BotId)
	a.pending()
	a.takes = true
	a.last++
	ev.Sequence = a.last
	stored := proto.Clone(ev).(*kitpb.Event)
	if stored.Message != nil {
		stored.Message.ConversationId = "" // as every queued message (queued restores it)
	}
	put(a.batch, queuedEventKey(a.id, a.last), stored)
	d := a.q.push(queueOf(ev, a.id), a.last, nanos(a.env.Clock.Now()))
	d.asked = true // a developer tests the endpoint: even while paused
	d.stored = true
	if err := a.settle(); err != nil {
		return nil, err
	}
	// The answer hands out the event's id and sequence: it waits for the
	// commit that makes them durable, as a take's does, or a crash before
	// the next sync would lose the event and give its sequence to another.
	if a.last > a.durable {
		a.dur.inflight = a.durableBy(a.last)
	}
	if a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id)
	}
	return ev, nil
}

// testEvent is an example event of kind k; botID is the installation's
// bot, "" for a Kit without one.
func testEvent(k eventKind, now int64, inst, botID string) *kitpb.Event {
	conv := &kitpb.Conversation{Id: ids.New(), Kind: "channel", Visibility: "public", Name: proto.String("test-channel"), CreatedAt: now}
	// Every test event has a conversation of its own, so it never waits
	// behind the installation's real events.
	ev := &kitpb.Event{Id: ids.New(), Type: k.String(), OccurredAt: now, Test: true, ConversationId: conv.Id}
	author, authorID := "bot", botID
	if botID == "" {
		author, authorID = "user", ids.New() // a Kit without a bot
	}
	switch k {
	case eventMessagePosted, eventMessageEdited, eventMessageDeleted, eventBotMentioned:
		ev.Message = &kitpb.Message{Id: ids.New(), ConversationId: conv.Id, AuthorKind: author, AuthorId: authorID, Text: "A test event sent by kit trigger", CreatedAt: now}
		switch k {
		case eventMessageEdited:
			ev.Message.EditedAt = now
		case eventMessageDeleted:
			ev.Message.Text, ev.Message.DeletedAt = "", now // a tombstone
		}
	case eventReactionAdded, eventReactionRemoved:
		// Reactions are a member's (user tokens only), one of SPEC's values.
		ev.Reaction = &kitpb.EventReaction{MessageId: ids.New(), Reaction: "thumbs_up", UserId: ids.New()}
	case eventFileShared:
		ev.File = &kitpb.File{Id: ids.New(), ConversationId: conv.Id, Name: "test.txt", MimeType: "text/plain", SizeBytes: 4, UploadedByUserId: ids.New(), CreatedAt: now}
	case eventChannelMemberJoined, eventChannelMemberLeft:
		ev.Conversation, ev.Member = conv, &kitpb.Member{UserId: ids.New(), JoinedAt: now}
	case eventInstallationUpdated, eventInstallationUninstalled:
		ev.Installation = &kitpb.Installation{
			Id: inst, BotId: botID, CreatedAt: now, WorkspaceId: ids.New(), WorkspaceName: "Test workspace",
			KitSlug: "test-kit", KitVersion: "1.0.0", KitDisplayName: "Test Kit",
		}
		if botID != "" {
			// A bot's name makes the installation one with a bot (HasBot):
			// without it its botId is answered null.
			ev.Installation.BotDisplayName = "Test Kit"
		} else {
			ev.Installation.BotId = ""
		}
	case eventUserJoined, eventUserUpdated:
		ev.User = &kitpb.User{Id: ids.New(), DisplayName: "Test User", Role: "member"}
	default:
		ev.Conversation = conv
	}
	return ev
}
