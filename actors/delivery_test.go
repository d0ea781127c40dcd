package actors_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft/multirafttest"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestRetryWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attempt int32
		jitter  int64
		want    time.Duration
	}{
		{"the first retry after 10 s", 1, 500, 10 * time.Second},
		{"jitter takes off up to 20%", 1, 0, 8 * time.Second},
		{"jitter adds up to 20%", 1, 1000, 12 * time.Second},
		{"each retry doubles the wait", 3, 500, 40 * time.Second},
		{"the wait stops growing at 4 hours", 20, 500, 4 * time.Hour},
		{"a draw out of range counts as its bound", 1, 5000, 12 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := actors.RetryWait(tc.attempt, tc.jitter); got != tc.want {
				t.Fatalf("RetryWait(%d, %d) = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
			}
		})
	}
}

// deliveryFixture: an installation subscribed to message.posted with its
// bot in convs channels, and a poster.
func deliveryFixture(t *testing.T, n *testNode, convs int) (*eventsFixture, []string) {
	t.Helper()
	f := newEventsFixture(t, n, []string{"message.posted"})
	cs := []string{f.conv}
	for len(cs) < convs {
		c := n.channel(t, f.ws.id, f.ws.users...)
		n.addChannel(t, f.inst.Id, c)
		cs = append(cs, c)
	}
	return f, cs
}

func take(t *testing.T, n *testNode, inst string) *kitpb.DeliveriesReply {
	t.Helper()
	return ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, inst, &kitpb.TakeDeliveries{Max: 100})
}

func record(t *testing.T, n *testNode, inst string, seq uint64, delivered bool) {
	t.Helper()
	ask[*kitpb.Ok](t, n, actors.KindDelivery, inst, &kitpb.RecordAttempt{Sequence: seq, Delivered: delivered, ErrorCode: "http_error", HttpStatus: 500, JitterPermille: 500})
}

func eventTexts(evs []*kitpb.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Message.GetText()
	}
	return out
}

// The delivery actor's rules: one event in flight per conversation, in
// order; 10 per installation; a failed event waits for its retry on the
// service clock and holds up its conversation until delivered or dead.
func TestDeliveryQueueRules(t *testing.T) {
	n := ownNode(t)
	t.Run("one event per conversation at a time, in order", func(t *testing.T) {
		f, cs := deliveryFixture(t, n, 2)
		for i := range 3 {
			for _, c := range cs {
				n.post(t, f.user, c, postReq{text: fmt.Sprint(c[:4], i)})
			}
		}
		first := take(t, n, f.inst.Id)
		if len(first.Events) != 2 || take(t, n, f.inst.Id).Events != nil {
			t.Fatalf("took %q, then more; want one per conversation", eventTexts(first.Events))
		}
		for _, ev := range first.Events {
			record(t, n, f.inst.Id, ev.Sequence, true)
		}
		second := take(t, n, f.inst.Id)
		for _, ev := range second.Events {
			if want := ev.ConversationId[:4] + "1"; ev.Message.Text != want {
				t.Fatalf("after the first delivered: %q, want %q", ev.Message.Text, want)
			}
		}
	})
	t.Run("recording an attempt with take_next hands out what may go next", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		n.post(t, f.user, f.conv, postReq{text: "b"})
		ev := take(t, n, f.inst.Id).Events[0]
		r := ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: ev.Sequence, Delivered: true, TakeNext: 10})
		if got := eventTexts(r.Events); len(got) != 1 || got[0] != "b" || r.InFlight != 1 {
			t.Fatalf("after a was delivered: %q (in flight %d), want b in flight", got, r.InFlight)
		}
		r = ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: r.Events[0].Sequence, Delivered: true, TakeNext: 10})
		if len(r.Events) != 0 || r.InFlight != 0 {
			t.Fatalf("after b: %q (in flight %d), want nothing left", eventTexts(r.Events), r.InFlight)
		}
	})
	t.Run("at most 10 in flight per installation", func(t *testing.T) {
		f, cs := deliveryFixture(t, n, 12)
		for _, c := range cs {
			n.post(t, f.user, c, postReq{text: "x"})
		}
		if r := take(t, n, f.inst.Id); len(r.Events) != actors.MaxInFlightPerInstallation || r.InFlight != 10 {
			t.Fatalf("took %d (in flight %d), want 10", len(r.Events), r.InFlight)
		}
		if r := take(t, n, f.inst.Id); len(r.Events) != 0 {
			t.Fatalf("took %d more beyond the cap", len(r.Events))
		}
	})
	t.Run("a failed event is retried after its wait, with its attempt count", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		n.post(t, f.user, f.conv, postReq{text: "b"})
		ev := take(t, n, f.inst.Id).Events[0]
		record(t, n, f.inst.Id, ev.Sequence, false)
		r := take(t, n, f.inst.Id)
		if len(r.Events) != 0 || r.NextDue == 0 {
			t.Fatalf("before its wait: took %q, next due %d; want nothing, a due time (and b held back)", eventTexts(r.Events), r.NextDue)
		}
		n.clk.Advance(10 * time.Second)
		r = take(t, n, f.inst.Id)
		if len(r.Events) != 1 || r.Events[0].Message.Text != "a" || r.Events[0].Attempts != 1 || r.Events[0].RetryReason != "http_error" {
			t.Fatalf("after its wait: took %v", r.Events)
		}
	})
	t.Run("after 24 hours of failures an event is dead and its conversation goes on", func(t *testing.T) {
		// Another conversation's event is delivered meanwhile: the endpoint
		// is not failing 24 hours straight, so it is not paused.
		f, cs := deliveryFixture(t, n, 2)
		n.post(t, f.user, cs[0], postReq{text: "a"})
		n.post(t, f.user, cs[0], postReq{text: "b"})
		n.post(t, f.user, cs[1], postReq{text: "c"})
		evs := take(t, n, f.inst.Id).Events
		slices.SortFunc(evs, func(x, y *kitpb.Event) int { return strings.Compare(x.Message.Text, y.Message.Text) })
		record(t, n, f.inst.Id, evs[0].Sequence, false) // a, then c succeeds
		record(t, n, f.inst.Id, evs[1].Sequence, true)
		n.clk.Advance(actors.DeadAfter)
		ev := take(t, n, f.inst.Id).Events[0]
		record(t, n, f.inst.Id, ev.Sequence, false)
		r := take(t, n, f.inst.Id)
		if len(r.Events) != 1 || r.Events[0].Message.Text != "b" {
			t.Fatalf("after a dead letter: took %q, want b", eventTexts(r.Events))
		}
		if q := queued(t, n, f.inst.Id); len(q) != 1 {
			t.Fatalf("%d events queued, want b alone", len(q))
		}
	})
	t.Run("an event not sent for a missing scope is dead at once and holds up nothing", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		n.post(t, f.user, f.conv, postReq{text: "b"})
		ev := take(t, n, f.inst.Id).Events[0]
		ask[*kitpb.Ok](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: ev.Sequence, ErrorCode: actors.MissingScope, JitterPermille: 500})
		r := take(t, n, f.inst.Id)
		if len(r.Events) != 1 || r.Events[0].Message.Text != "b" || r.NextDue != 0 {
			t.Fatalf("after a missing scope: took %q, next due %d; want b, nothing due", eventTexts(r.Events), r.NextDue)
		}
		if q := queued(t, n, f.inst.Id); len(q) != 1 {
			t.Fatalf("%d events queued, want b alone", len(q))
		}
	})
}

// The outcomes of attempts wait for the actor's next flush, to share one
// write (docs/deliveries.md, "Cost"), and are in the store once the node
// stops: after a restart a delivered event reads delivered and a failed
// one retrying, and neither is sent again at once.
func TestAttemptOutcomesAreWrittenBeforeTheNodeStops(t *testing.T) {
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	f, cs := deliveryFixture(t, n, 2)
	n.post(t, f.user, cs[0], postReq{text: "delivered"})
	n.post(t, f.user, cs[1], postReq{text: "failed"})
	evs := take(t, n, f.inst.Id).Events
	if len(evs) != 2 {
		t.Fatalf("took %q, want both", eventTexts(evs))
	}
	for _, ev := range evs {
		record(t, n, f.inst.Id, ev.Sequence, ev.Message.Text == "delivered")
	}
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	got := map[string]string{}
	for _, d := range listDeliveries(t, n, f.inst.Id, 0, 10).Deliveries {
		got[d.Event.Message.GetText()] = d.State
	}
	if want := map[string]string{"delivered": actors.DeliverySucceeded, "failed": actors.DeliveryRetrying}; !maps.Equal(got, want) {
		t.Fatalf("after the restart: %v, want %v", got, want)
	}
	if r := take(t, n, f.inst.Id); len(r.Events) != 0 {
		t.Fatalf("after the restart took %q again at once, want nothing (one delivered, one waiting for its retry)", eventTexts(r.Events))
	}
}

// The sequencer queues a reference to the outbox entry rather than a copy
// of the event (docs/deliveries.md, "Outbox and sequencer"), named by its
// commit's taken record, with no queue record of its own: the entry stays
// until the event's delivery ends; a failed attempt writes the event
// itself, with its state, as its queue record and deletes the entry; a
// success keeps the reference in its delivered record, with the entry;
// the taken record goes with the last of its events' references.
func TestQueueRecordsReferToTheirOutboxEntries(t *testing.T) {
	n := ownNode(t)
	f, _ := deliveryFixture(t, n, 1)
	n.post(t, f.user, f.conv, postReq{text: "a"})
	n.post(t, f.user, f.conv, postReq{text: "b"})
	evs := queued(t, n, f.inst.Id) // commits what was taken
	if len(evs) != 2 || evs[0].Message.GetText() != "a" {
		t.Fatalf("queued %q, want a, b", eventTexts(evs))
	}
	stored := func(seq uint64) *kitpb.Event {
		v, err := n.store.Get(actors.QueuedEventKey(f.inst.Id, seq))
		if errors.Is(err, persistence.ErrNotFound) {
			return nil
		}
		noErr(t, err)
		ev := &kitpb.Event{}
		noErr(t, proto.Unmarshal(v, ev))
		return ev
	}
	outboxEntries := func() int {
		prefix := actors.OutboxSourcePrefix(f.inst.Id, f.conv)
		count := 0
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool { count++; return true }))
		return count
	}
	taken := func() (refs int) {
		prefix := actors.TakenEventsPrefix(f.inst.Id)
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
			refs += len(actors.DecodeTaken(t, v))
			return true
		}))
		return refs
	}
	for _, ev := range evs {
		if r := stored(ev.Sequence); r != nil {
			t.Fatalf("queue record %d: %v, want none: the taken record names the outbox entry", ev.Sequence, r)
		}
	}
	if got := taken(); got != 2 {
		t.Fatalf("taken records name %d events, want a and b", got)
	}
	if got := outboxEntries(); got != 2 {
		t.Fatalf("%d outbox entries, want the 2 the queue refers to", got)
	}
	ev := take(t, n, f.inst.Id).Events[0]
	if ev.OutboxSource != "" || ev.Message.GetText() != "a" || ev.Sequence != evs[0].Sequence {
		t.Fatalf("handed out %v, want event a with its sequence and no reference", ev)
	}
	record(t, n, f.inst.Id, ev.Sequence, false)
	queued(t, n, f.inst.Id) // flushes the outcome
	if r := stored(ev.Sequence); r == nil || r.OutboxSource != "" || r.Message.GetText() != "a" || r.Attempts != 1 || r.CopiedFromPos == 0 {
		t.Fatalf("after a failed attempt the queue record is %v, want the event itself with 1 attempt and its entry's position", r)
	}
	// The entry goes with the copy's delivery: deleting it with the failure
	// would have written two partitions, which a cluster may part.
	if got := outboxEntries(); got != 2 {
		t.Fatalf("%d outbox entries after a's failure, want a's, which its copy came from, and b's", got)
	}
	n.clk.Advance(actors.FirstRetryAfter * 2)
	ev = take(t, n, f.inst.Id).Events[0]
	record(t, n, f.inst.Id, ev.Sequence, true)
	ev = take(t, n, f.inst.Id).Events[0]
	record(t, n, f.inst.Id, ev.Sequence, true)
	if q := queued(t, n, f.inst.Id); len(q) != 0 || outboxEntries() != 1 {
		t.Fatalf("after both were delivered: %d queued, %d outbox entries; want none queued, b's entry kept", len(q), outboxEntries())
	}
	if r := stored(ev.Sequence); r != nil {
		t.Fatalf("b's queue record is %v after its delivery, want none", r)
	}
	if got := taken(); got != 0 {
		t.Fatalf("taken records name %d events after both left the queue, want none left", got)
	}
	v, err := n.store.Get(actors.DeliveredEventKey(f.inst.Id, ev.Sequence))
	noErr(t, err)
	r := &kitpb.Event{}
	noErr(t, proto.Unmarshal(v, r))
	if r.OutboxSource != f.conv || r.OutboxPos == 0 || r.Message != nil || r.Attempts != 1 || r.FinishedAt == 0 {
		t.Fatalf("b's delivered record is %v, want a reference with its outcome", r)
	}
	got := map[string]int32{}
	for _, d := range listDeliveries(t, n, f.inst.Id, 0, 10).Deliveries {
		got[d.Event.Message.GetText()] = d.Event.Attempts
	}
	if want := map[string]int32{"a": 2, "b": 1}; !maps.Equal(got, want) {
		t.Fatalf("listed %v (text: attempts), want %v", got, want)
	}
}

// A delivered record that refers to its outbox entry keeps it until the
// record is pruned, and the two go together; after a restart the entries
// kept are not taken again; a redelivery copies the event back into the
// queue, and the copy keeps the entry until it is delivered.
func TestDeliveredRecordsReferToTheirOutboxEntries(t *testing.T) {
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	f, _ := deliveryFixture(t, n, 1)
	outboxEntries := func(n *testNode) int {
		prefix := actors.OutboxSourcePrefix(f.inst.Id, f.conv)
		count := 0
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool { count++; return true }))
		return count
	}
	const total = actors.KeepDelivered + 101 // one past the pruning threshold
	for i := range total {
		n.post(t, f.user, f.conv, postReq{text: fmt.Sprint(i)})
		evs := take(t, n, f.inst.Id).Events
		if len(evs) != 1 {
			t.Fatalf("post %d: took %d events", i, len(evs))
		}
		record(t, n, f.inst.Id, evs[0].Sequence, true)
	}
	queued(t, n, f.inst.Id) // flushes the outcomes
	if got := outboxEntries(n); got != actors.KeepDelivered {
		t.Fatalf("%d outbox entries after pruning, want the %d the kept records refer to", got, actors.KeepDelivered)
	}
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	if q := queued(t, n, f.inst.Id); len(q) != 0 {
		t.Fatalf("after a restart %d events queued again, want none: the kept entries were delivered", len(q))
	}
	p := listDeliveries(t, n, f.inst.Id, 0, 1)
	if len(p.Deliveries) != 1 || p.Deliveries[0].Event.Message.GetText() != fmt.Sprint(total-1) || p.Deliveries[0].State != actors.DeliverySucceeded {
		t.Fatalf("the newest delivery reads %v, want the last post, succeeded", p.Deliveries)
	}
	last := p.Deliveries[0].Event
	if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: last.Id}); !slices.Equal(got, []uint64{last.Sequence}) {
		t.Fatalf("redelivered %v, want %d", got, last.Sequence)
	}
	if got := outboxEntries(n); got != actors.KeepDelivered {
		t.Fatalf("%d outbox entries after a redelivery, want %d: the copy keeps its entry", got, actors.KeepDelivered)
	}
	ev := take(t, n, f.inst.Id).Events
	if len(ev) != 1 || ev[0].Message.GetText() != fmt.Sprint(total-1) || !ev[0].Redelivery {
		t.Fatalf("took %v, want the redelivered last post", ev)
	}
	record(t, n, f.inst.Id, ev[0].Sequence, true)
	queued(t, n, f.inst.Id) // flushes the outcome
	if got := outboxEntries(n); got != actors.KeepDelivered-1 {
		t.Fatalf("%d outbox entries after the redelivery was delivered, want %d: its delivered record is a copy", got, actors.KeepDelivered-1)
	}
}

// After a restart the queue is what the taken records and the queue's own
// records say, under the same sequences and in order: one row per rule of
// loadTaken and of the records written before taken records existed.
func TestTakenRecordsSurviveARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes per row")
	}
	type state struct {
		n    *testNode
		f    *eventsFixture
		a, b string // two conversations
	}
	// posted: with notices lost, a1 and a2 into a, b1 into b, then a
	// restart whose activation takes all three in one commit: one taken
	// record naming a1, a2, b1 under sequences 1-3 (a's before or after
	// b's, by the outbox's key order of the two conversations).
	posted := func(t *testing.T, fs vfs.FS) *state {
		n, err := startNode(fs, nil)
		noErr(t, err)
		f, cs := deliveryFixture(t, n, 2)
		actors.DropNotices(n.env)
		n.post(t, f.user, cs[0], postReq{text: "a1"})
		n.post(t, f.user, cs[0], postReq{text: "a2"})
		n.post(t, f.user, cs[1], postReq{text: "b1"})
		noErr(t, n.stop())
		n, err = startNode(fs, n.clk)
		noErr(t, err)
		noErr(t, actors.WakeDeliveries(n.env))
		if q := queued(t, n, f.inst.Id); len(q) != 3 {
			t.Fatalf("queued %q, want a1, a2, b1", eventTexts(q))
		}
		return &state{n, f, cs[0], cs[1]}
	}
	seqOf := func(t *testing.T, s *state, text string) uint64 {
		for _, ev := range queued(t, s.n, s.f.inst.Id) {
			if ev.Message.GetText() == text {
				return ev.Sequence
			}
		}
		t.Fatalf("%s is not queued", text)
		return 0
	}
	// deliver takes what may go and records each named one delivered, the
	// others failed.
	deliver := func(t *testing.T, s *state, delivered ...string) {
		for _, ev := range take(t, s.n, s.f.inst.Id).Events {
			record(t, s.n, s.f.inst.Id, ev.Sequence, slices.Contains(delivered, ev.Message.GetText()))
		}
		queued(t, s.n, s.f.inst.Id) // flushes the outcomes
	}
	write := func(t *testing.T, s *state, fn func(b *persistence.Batch)) {
		b := s.n.store.NewBatch()
		fn(b)
		noErr(t, b.Commit())
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, s *state) // before the second restart
		want   []string                     // queued after it, sorted
	}{
		{"events still referred to are queued again under their sequences", func(t *testing.T, s *state) {}, []string{"a1", "a2", "b1"}},
		{"a delivered event is not queued again", func(t *testing.T, s *state) { deliver(t, s, "a1", "b1") }, []string{"a2"}},
		{"a failed event is queued as its own record, before the reference behind it", func(t *testing.T, s *state) { deliver(t, s) }, []string{"a1", "a2", "b1"}},
		{"an event delivered and pruned since is not queued again", func(t *testing.T, s *state) {
			seq := seqOf(t, s, "b1")
			deliver(t, s, "b1") // a1 fails: its record keeps a2's reference
			// What pruning b1 would do: its delivered record and its outbox
			// entry go.
			v, err := s.n.store.Get(actors.DeliveredEventKey(s.f.inst.Id, seq))
			noErr(t, err)
			ref := &kitpb.Event{}
			noErr(t, proto.Unmarshal(v, ref))
			write(t, s, func(b *persistence.Batch) {
				b.Delete(actors.DeliveredEventKey(s.f.inst.Id, seq))
				b.Delete(actors.OutboxKey(s.f.inst.Id, ref.OutboxSource, ref.OutboxPos))
			})
		}, []string{"a1", "a2"}},
		{"a queue record that refers to its outbox entry, as before taken records, is queued", func(t *testing.T, s *state) {
			// The layout before taken records: a reference per event in the
			// queue. Rewrite the taken record as such.
			prefix := actors.TakenEventsPrefix(s.f.inst.Id)
			write(t, s, func(b *persistence.Batch) {
				noErr(t, s.n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
					first := actors.DecodeSeq(k[len(prefix):])
					for i, r := range actors.DecodeTaken(t, v) {
						source, pos, _ := strings.Cut(r, "/")
						p, err := strconv.ParseUint(pos, 10, 64)
						noErr(t, err)
						seq := first + uint64(i)
						b.Set(actors.QueuedEventKey(s.f.inst.Id, seq), mustMarshal(t, &kitpb.Event{Sequence: seq, OutboxSource: source, OutboxPos: p}))
					}
					b.Delete(slices.Clone(k))
					return true
				}))
			})
		}, []string{"a1", "a2", "b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := posted(t, fs)
			seqs := map[string]uint64{}
			for _, ev := range queued(t, s.n, s.f.inst.Id) {
				seqs[ev.Message.GetText()] = ev.Sequence
			}
			tc.before(t, s)
			noErr(t, s.n.stop())
			n, err := startNode(fs, s.n.clk)
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			s.n = n
			q := queued(t, n, s.f.inst.Id) // in sequence order
			if got := slices.Sorted(slices.Values(eventTexts(q))); !slices.Equal(got, tc.want) {
				t.Fatalf("queued %q after the restart, want %q", got, tc.want)
			}
			for _, ev := range q {
				if ev.Sequence != seqs[ev.Message.GetText()] {
					t.Fatalf("%s has sequence %d after the restart, %d before", ev.Message.GetText(), ev.Sequence, seqs[ev.Message.GetText()])
				}
			}
			// Everything left goes, each once, and leaves nothing queued
			// or taken behind.
			n.clk.Advance(actors.FirstRetryAfter * 2)
			sent := map[string]int{}
			for range 3 {
				for _, ev := range take(t, n, s.f.inst.Id).Events {
					sent[ev.Message.GetText()]++
					record(t, n, s.f.inst.Id, ev.Sequence, true)
				}
			}
			for _, text := range tc.want {
				if sent[text] != 1 {
					t.Fatalf("after the restart sent %v, want each of %q once", sent, tc.want)
				}
			}
			if q := queued(t, n, s.f.inst.Id); len(q) != 0 {
				t.Fatalf("%q still queued after every event was delivered", eventTexts(q))
			}
			for _, prefix := range [][]byte{actors.TakenEventsPrefix(s.f.inst.Id), actors.QueuedEventsPrefix(s.f.inst.Id)} {
				noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
					t.Fatalf("record %q left after every event was delivered", k)
					return false
				}))
			}
		})
	}
}

// The takes of notices are written by the take that hands their events
// out, in one synced write with the outcomes recorded meanwhile, rather
// than one write a notice: nothing is written before the take, one taken
// record names every event after it, and a crash right after the take
// finds the events under the sequences they were sent with.
func TestTakesAreWrittenByTheTakeThatHandsThemOut(t *testing.T) {
	n, fs := crashableNode(t)
	n.env.DeliveryFlushAfter = time.Hour // no flush but the take's
	f, cs := deliveryFixture(t, n, 4)
	queued(t, n, f.inst.Id) // the delivery actor is active: only notices reach it
	takenRecords := func() (records, refs int) {
		prefix := actors.TakenEventsPrefix(f.inst.Id)
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
			records++
			refs += len(actors.DecodeTaken(t, v))
			return true
		}))
		return records, refs
	}
	for _, c := range cs {
		n.post(t, f.user, c, postReq{text: c})
	}
	if records, _ := takenRecords(); records != 0 {
		t.Fatalf("%d taken records before the take, want none: the take writes them", records)
	}
	sent := map[uint64]string{}
	for _, ev := range take(t, n, f.inst.Id).Events {
		sent[ev.Sequence] = ev.Id
	}
	if len(sent) != len(cs) {
		t.Fatalf("took %d events, want %d", len(sent), len(cs))
	}
	if records, refs := takenRecords(); records != 1 || refs != len(cs) {
		t.Fatalf("%d taken records naming %d events after the take, want one naming %d", records, refs, len(cs))
	}

	got := queuedAfterCrash(t, n, fs, f.inst.Id)
	if !maps.Equal(got, sent) {
		t.Fatalf("after a crash the queue is %v, want the events as sent: %v", got, sent)
	}
}

// Through the raft groups a commit returns once a quorum holds it on disk:
// a take that hands out events sequenced since the last commit waits for
// that commit alone, not for a sync of the node's own WAL as well.
func TestATakeThroughTheGroupsSyncsNoWALOfItsOwn(t *testing.T) {
	if !replicated {
		t.Skip("the actors' batches go through the raft groups with KITD_TEST_REPLICATED=1")
	}
	fs := &multirafttest.SyncCountingFS{FS: vfs.NewMem(), Except: "/raft/"}
	n, err := startNode(fs, nil)
	noErr(t, err)
	t.Cleanup(func() { _ = n.stop() })
	n.env.DeliveryFlushAfter = time.Hour // no commit but the take's
	f, cs := deliveryFixture(t, n, 4)
	queued(t, n, f.inst.Id) // the delivery actor is active: only notices reach it
	for _, c := range cs {
		n.post(t, f.user, c, postReq{text: c})
	}
	before := fs.WALSyncs()
	if got := len(take(t, n, f.inst.Id).Events); got != len(cs) {
		t.Fatalf("took %d events, want %d", got, len(cs))
	}
	if syncs := fs.WALSyncs() - before; syncs != 0 {
		t.Fatalf("the take synced the node's WAL %d times, want none: its commit through the groups is durable", syncs)
	}
}

// A backlog not held in memory (here: queued before a restart) is read a
// range of each conversation at a time, up to 16 events a read, and
// delivered in order.
func TestABacklogIsReadAConversationAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	f, _ := deliveryFixture(t, n, 1)
	const events = 20
	for i := range events {
		n.post(t, f.user, f.conv, postReq{text: fmt.Sprint(i)})
	}
	if q := queued(t, n, f.inst.Id); len(q) != events {
		t.Fatalf("queued %d events, want %d", len(q), events)
	}
	noErr(t, n.stop())
	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	noErr(t, actors.WakeDeliveries(n.env))

	var got []string
	r := take(t, n, f.inst.Id)
	for len(r.Events) > 0 {
		ev := r.Events[0]
		got = append(got, ev.Message.GetText())
		r = ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: ev.Sequence, Delivered: true, TakeNext: 10})
	}
	if len(got) != events {
		t.Fatalf("delivered %q, want the %d events", got, events)
	}
	for i, text := range got {
		if text != fmt.Sprint(i) {
			t.Fatalf("delivered %q, want 0 to %d in order", got, events-1)
		}
	}
	metricIs(t, n, 2, "kitd_delivery_queue_reads_total") // 16, then 4
}

// wakes counts the sender's wake-ups (actors.DeliveryNotifier).
type wakes struct{ n atomic.Int64 }

func (w *wakes) EventsQueued(string) { w.n.Add(1) }

// A notice wakes the sender only when a take may hand its event out now:
// an event behind its conversation's head goes when the head is done,
// with the record of the head's attempt.
func TestNoticesWakeTheSenderForANewHeadOnly(t *testing.T) {
	n := ownNode(t)
	w := &wakes{}
	n.env.Deliveries = w
	f, _ := deliveryFixture(t, n, 1)
	queued(t, n, f.inst.Id) // the delivery actor is active: only notices reach it
	w.n.Store(0)

	n.post(t, f.user, f.conv, postReq{text: "a"})
	eventually.Holds(eventually.Within, func() bool { return w.n.Load() == 1 })
	if got := w.n.Load(); got != 1 {
		t.Fatalf("%d wake-ups for the conversation's head, want 1", got)
	}
	a := take(t, n, f.inst.Id).Events[0]
	n.post(t, f.user, f.conv, postReq{text: "b"})
	eventually.Holds(eventually.Within, func() bool { return len(queued(t, n, f.inst.Id)) == 2 })
	if got := w.n.Load(); got != 1 {
		t.Fatalf("%d wake-ups after an event behind a head in flight, want still 1", got)
	}
	r := ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: a.Sequence, Delivered: true, TakeNext: 10})
	if got := eventTexts(r.Events); len(got) != 1 || got[0] != "b" {
		t.Fatalf("the record of a's attempt handed out %q, want b", got)
	}
}

// A take with reclaim puts back the events in flight that were handed to
// its sender, which has no attempt of them in progress: the answer that
// named them never reached it (docs/deliveries.md "Hand-outs whose answer
// is lost"). What another sender was handed (another node's, during a
// leadership move) stays in flight.
func TestAReclaimTakesBackOnlyItsSendersEvents(t *testing.T) {
	n := ownNode(t)
	f, cs := deliveryFixture(t, n, 3)
	postEach(t, n, f, cs, 1)
	takeAs := func(sender string, max int32, reclaim bool) []string {
		t.Helper()
		r := ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.TakeDeliveries{Max: max, Sender: sender, Reclaim: reclaim})
		return eventTexts(r.Events)
	}
	lost := takeAs("a", 1, false) // its answer lost on the way
	kept := takeAs("b", 1, false) // attempted by another node's sender
	again := takeAs("a", 10, true)
	if len(lost) != 1 || len(kept) != 1 || len(again) != 2 || !slices.Contains(again, lost[0]) || slices.Contains(again, kept[0]) {
		t.Fatalf("a reclaim by a handed out %q; want the %q handed to it before and the third event, not b's %q", again, lost, kept)
	}
	metricIs(t, n, 1, "kitd_delivery_reclaimed_total")
	if got := takeAs("b", 10, false); len(got) != 0 {
		t.Fatalf("b took %q with its event and a's two in flight, want nothing", got)
	}
}

// A reclaim starts a new round of its sender's requests. One of an earlier
// round that reaches the actor after it (forwarded on a worker of its
// own, the actor's leader elsewhere) was given up on by its sender: a take
// hands out nothing, which would be in flight with no attempt behind it,
// and a record writes nothing over the event's attempt of the new round.
func TestARequestOfARoundBeforeAReclaimChangesNothing(t *testing.T) {
	n := ownNode(t)
	f, cs := deliveryFixture(t, n, 3)
	postEach(t, n, f, cs, 1)
	takeIn := func(round uint64, max int32, reclaim bool) []*kitpb.Event {
		t.Helper()
		return ask[*kitpb.DeliveriesReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.TakeDeliveries{Max: max, Sender: "a", Reclaim: reclaim, Round: round}).Events
	}
	if lost := takeIn(0, 1, false); len(lost) != 1 {
		t.Fatalf("the first take handed out %d events, want 1", len(lost))
	}
	again := takeIn(1, 1, true)
	if len(again) != 1 {
		t.Fatalf("the reclaim handed out %d events, want 1", len(again))
	}
	if late := takeIn(0, 10, false); len(late) != 0 {
		t.Fatalf("a take of the round before the reclaim, arriving after it, handed out %q; want nothing", eventTexts(late))
	}
	ask[*kitpb.Ok](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: again[0].Sequence, Delivered: true, Sender: "a", Round: 0})
	if got := len(queued(t, n, f.inst.Id)); got != 3 {
		t.Fatalf("%d events queued after a record of the round before the reclaim, want the 3 still", got)
	}
	if rest := takeIn(1, 10, false); len(rest) != 2 {
		t.Fatalf("a take of the reclaim's round handed out %q, want the two events left", eventTexts(rest))
	}
	ask[*kitpb.Ok](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: again[0].Sequence, Delivered: true, Sender: "a", Round: 1})
	if got := len(queued(t, n, f.inst.Id)); got != 2 {
		t.Fatalf("%d events queued after a record of the reclaim's round, want 2", got)
	}
}
