package actors_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func listDeliveries(t *testing.T, n *testNode, inst string, before uint64, limit int32) *kitpb.DeliveriesPage {
	t.Helper()
	return ask[*kitpb.DeliveriesPage](t, n, actors.KindDelivery, inst, &kitpb.ListDeliveries{BeforeSequence: before, Limit: limit})
}

func states(p *kitpb.DeliveriesPage) []string {
	out := make([]string, len(p.Deliveries))
	for i, d := range p.Deliveries {
		out[i] = d.Event.Message.GetText() + ":" + d.State
	}
	return out
}

func redeliver(t *testing.T, n *testNode, inst string, m *kitpb.Redeliver) []uint64 {
	t.Helper()
	return ask[*kitpb.RedeliverReply](t, n, actors.KindDelivery, inst, m).Sequences
}

// recordAs is record by the fixture's Kit, whose developer log gets it.
func recordAs(t *testing.T, n *testNode, f *eventsFixture, seq uint64, delivered bool) {
	t.Helper()
	ask[*kitpb.Ok](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{
		Sequence: seq, Delivered: delivered, ErrorCode: "http_error", HttpStatus: 500, JitterPermille: 500, KitId: f.kitID})
}

// failAll takes what may go and fails it; it answers what it took.
func failAll(t *testing.T, n *testNode, f *eventsFixture) []*kitpb.Event {
	t.Helper()
	evs := take(t, n, f.inst.Id).Events
	for _, ev := range evs {
		recordAs(t, n, f, ev.Sequence, false)
	}
	return evs
}

func deliveryLogEvents(t *testing.T, n *testNode, kitID string) []string {
	t.Helper()
	entries, _, err := actors.ReadDevLog(n.env, kitID, "", 100, nil)
	noErr(t, err)
	var out []string
	for _, e := range entries {
		if e.Source == actors.LogSourceDelivery && e.Event != "event.delivery" {
			out = append(out, e.Event)
		}
	}
	return out
}

// The list of an installation's deliveries: every state, newest sequence
// first, in pages.
func TestDeliveryList(t *testing.T) {
	n := ownNode(t)
	f, cs := deliveryFixture(t, n, 4)
	for i, text := range []string{"succeeded", "dead", "retrying", "in_flight"} {
		n.post(t, f.user, cs[i], postReq{text: text})
	}
	n.post(t, f.user, cs[3], postReq{text: "queued"})
	byText := map[string]*kitpb.Event{}
	for _, ev := range take(t, n, f.inst.Id).Events {
		byText[ev.Message.Text] = ev
	}
	// Failures, then a success: the endpoint is not failing straight, so
	// it is not paused a day later.
	record(t, n, f.inst.Id, byText["dead"].Sequence, false)
	record(t, n, f.inst.Id, byText["retrying"].Sequence, false)
	record(t, n, f.inst.Id, byText["succeeded"].Sequence, true)
	t.Run("a failed event waiting is retrying with its last answer", func(t *testing.T) {
		d := listDeliveries(t, n, f.inst.Id, byText["retrying"].Sequence+1, 1).Deliveries[0]
		if d.State != actors.DeliveryRetrying || d.Event.Attempts != 1 || d.Event.LastHttpStatus != 500 || d.Event.RetryReason != "http_error" {
			t.Fatalf("got %s attempts %d status %d reason %q", d.State, d.Event.Attempts, d.Event.LastHttpStatus, d.Event.RetryReason)
		}
	})
	n.clk.Advance(actors.DeadAfter)
	ev := take(t, n, f.inst.Id)
	for _, e := range ev.Events {
		if e.Message.Text == "dead" {
			record(t, n, f.inst.Id, e.Sequence, false)
		}
	}
	for _, tc := range []struct {
		name   string
		before uint64
		limit  int32
		want   []string
		more   bool
	}{
		{"every state, newest first", 0, 10, []string{"queued:queued", "in_flight:in_flight", "retrying:in_flight", "dead:dead", "succeeded:succeeded"}, false},
		{"a page ends with more", 0, 2, []string{"queued:queued", "in_flight:in_flight"}, true},
		{"the next page starts below the cursor", byText["in_flight"].Sequence, 2, []string{"retrying:in_flight", "dead:dead"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := listDeliveries(t, n, f.inst.Id, tc.before, tc.limit)
			if got := states(p); !slices.Equal(got, tc.want) || p.More != tc.more {
				t.Fatalf("got %q more %v, want %q more %v", got, p.More, tc.want, tc.more)
			}
		})
	}
}

// Redelivery keeps an event's eventId and sequence, marks it as one, and
// puts it before its conversation's newer events.
func TestRedelivery(t *testing.T) {
	n := ownNode(t)
	t.Run("a delivered event is sent again as a redelivery", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		ev := take(t, n, f.inst.Id).Events[0]
		record(t, n, f.inst.Id, ev.Sequence, true)
		if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: ev.Id}); !slices.Equal(got, []uint64{ev.Sequence}) {
			t.Fatalf("redelivered %v", got)
		}
		again := take(t, n, f.inst.Id).Events
		if len(again) != 1 || again[0].Id != ev.Id || again[0].Sequence != ev.Sequence || !again[0].Redelivery || again[0].Attempts != 1 || again[0].Message.Text != "a" {
			t.Fatalf("took %v", again)
		}
	})
	t.Run("a dead event goes before its conversation's newer events", func(t *testing.T) {
		f, cs := deliveryFixture(t, n, 2)
		n.post(t, f.user, cs[0], postReq{text: "old"})
		n.post(t, f.user, cs[1], postReq{text: "other"})
		var old *kitpb.Event
		evs := take(t, n, f.inst.Id).Events
		slices.SortFunc(evs, func(x, y *kitpb.Event) int { return strings.Compare(x.Message.Text, y.Message.Text) })
		old = evs[0]
		record(t, n, f.inst.Id, old.Sequence, false)
		record(t, n, f.inst.Id, evs[1].Sequence, true) // keeps the endpoint from a pause
		n.clk.Advance(actors.DeadAfter)
		failAll(t, n, f) // old is dead
		n.post(t, f.user, cs[0], postReq{text: "new"})
		redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: old.Id})
		r := take(t, n, f.inst.Id).Events
		if len(r) != 1 || r[0].Id != old.Id || !r[0].Redelivery {
			t.Fatalf("took %q, want old alone", eventTexts(r))
		}
		record(t, n, f.inst.Id, r[0].Sequence, true)
		if r = take(t, n, f.inst.Id).Events; len(r) != 1 || r[0].Message.Text != "new" {
			t.Fatalf("then took %q, want new", eventTexts(r))
		}
	})
	t.Run("dead since a time takes what the queue has room for, and says more remain", func(t *testing.T) {
		n := ownNode(t)
		n.env.DeliveryQueueMax = 20
		f, cs := deliveryFixture(t, n, 6)
		dying, healthy := cs[:5], cs[5]
		since := n.clk.Now().UnixNano()
		// 25 dead letters, 5 a day, within the retention (a dead letter is
		// kept 7 days); a success each day keeps the endpoint from a pause.
		for i := range 5 {
			for _, c := range dying {
				n.post(t, f.user, c, postReq{text: fmt.Sprint(i)})
			}
			n.post(t, f.user, healthy, postReq{text: fmt.Sprint(i)})
			evs := take(t, n, f.inst.Id).Events
			slices.SortFunc(evs, func(x, y *kitpb.Event) int { // the failure first, then the success
				return strings.Compare(strconv.FormatBool(x.ConversationId == healthy), strconv.FormatBool(y.ConversationId == healthy))
			})
			for _, ev := range evs {
				record(t, n, f.inst.Id, ev.Sequence, ev.ConversationId == healthy)
			}
			n.clk.Advance(actors.DeadAfter)
			for _, ev := range take(t, n, f.inst.Id).Events {
				record(t, n, f.inst.Id, ev.Sequence, false) // dead
			}
		}
		r := ask[*kitpb.RedeliverReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.Redeliver{DeadSince: since})
		if len(r.Sequences) != 20 || !r.More {
			t.Fatalf("redelivered %d (more %v) of 25 dead letters into an empty queue of 20, want 20 and more", len(r.Sequences), r.More)
		}
		for delivered := 0; delivered < 20; {
			for _, ev := range take(t, n, f.inst.Id).Events {
				record(t, n, f.inst.Id, ev.Sequence, true)
				delivered++
			}
		}
		r = ask[*kitpb.RedeliverReply](t, n, actors.KindDelivery, f.inst.Id, &kitpb.Redeliver{DeadSince: since})
		if len(r.Sequences) != 5 || r.More {
			t.Fatalf("asked again: redelivered %d (more %v), want the other 5 and no more", len(r.Sequences), r.More)
		}
	})
	t.Run("dead since a time takes the dead letters from then on", func(t *testing.T) {
		f, cs := deliveryFixture(t, n, 3)
		for _, c := range cs {
			n.post(t, f.user, c, postReq{text: c})
		}
		evs := take(t, n, f.inst.Id).Events
		record(t, n, f.inst.Id, evs[1].Sequence, false)
		record(t, n, f.inst.Id, evs[2].Sequence, false)
		record(t, n, f.inst.Id, evs[0].Sequence, true) // keeps the endpoint from a pause
		n.clk.Advance(actors.DeadAfter)
		due := take(t, n, f.inst.Id).Events
		record(t, n, f.inst.Id, due[0].Sequence, false) // the first dead
		n.clk.Advance(time.Hour)
		since := n.clk.Now()
		record(t, n, f.inst.Id, due[1].Sequence, false) // the second dead, an hour later
		got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{DeadSince: since.UnixNano()})
		if len(got) != 1 {
			t.Fatalf("redelivered %v, want the one dead since", got)
		}
		if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{DeadSince: since.Add(time.Minute).UnixNano()}); len(got) != 0 {
			t.Fatalf("redelivered %v dead after the last one", got)
		}
	})
	t.Run("a waiting retry goes at once", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		n.post(t, f.user, f.conv, postReq{text: "a"})
		ev := failAll(t, n, f)[0]
		redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: ev.Id})
		if r := take(t, n, f.inst.Id).Events; len(r) != 1 || !r[0].Redelivery || r[0].Attempts != 1 {
			t.Fatalf("took %v before the retry's wait", r)
		}
	})
	t.Run("a redelivery that fails half way leaves the queue as stored", func(t *testing.T) {
		f, cs := deliveryFixture(t, n, 2)
		n.post(t, f.user, cs[0], postReq{text: "a"})
		n.post(t, f.user, cs[1], postReq{text: "b"})
		evs := take(t, n, f.inst.Id).Events
		ev := evs[0]
		record(t, n, f.inst.Id, ev.Sequence, false)
		record(t, n, f.inst.Id, evs[1].Sequence, true) // keeps the endpoint from a pause
		n.clk.Advance(actors.DeadAfter)
		record(t, n, f.inst.Id, take(t, n, f.inst.Id).Events[0].Sequence, false) // dead
		if q := queued(t, n, f.inst.Id); len(q) != 0 {
			t.Fatalf("queued %q, want none: a is dead", eventTexts(q))
		}
		// A dead letter after it that cannot be read: the redelivery of
		// every dead letter requeues the first, then fails.
		b := n.store.NewBatch()
		b.Set(actors.DeadEventKey(f.inst.Id, ev.Sequence+1), []byte{0xff})
		noErr(t, b.Commit())
		if _, err := try[*kitpb.RedeliverReply](n, actors.KindDelivery, f.inst.Id, &kitpb.Redeliver{}); err == nil {
			t.Fatal("a redelivery over an unreadable dead letter succeeded")
		}
		eventually.NoError(t, "the queue read again from the store", func() error {
			q, err := try[*kitpb.QueuedEventsReply](n, actors.KindDelivery, f.inst.Id, &kitpb.ListQueuedEvents{})
			if err != nil {
				return err
			}
			if len(q.Events) != 0 {
				return fmt.Errorf("queued %q, which no write queued", eventTexts(q.Events))
			}
			return nil
		})
	})
	t.Run("an unknown event is not found", func(t *testing.T) {
		f, _ := deliveryFixture(t, n, 1)
		_, err := try[*kitpb.RedeliverReply](n, actors.KindDelivery, f.inst.Id, &kitpb.Redeliver{EventId: f.kitID})
		wantCode(t, err, kiterr.NotFound)
	})
}

// An endpoint failing 24 hours straight is paused: no more attempts, its
// events stay queued; a successful redelivery or a new version resumes it.
func TestDeliveryEndpointPause(t *testing.T) {
	n := ownNode(t)
	// paused: two conversations' events failing for a day.
	paused := func(t *testing.T) (*eventsFixture, []*kitpb.Event) {
		t.Helper()
		f, cs := deliveryFixture(t, n, 2)
		for _, c := range cs {
			n.post(t, f.user, c, postReq{text: c})
		}
		evs := failAll(t, n, f)
		n.clk.Advance(actors.PauseAfter)
		failAll(t, n, f)
		return f, evs
	}
	t.Run("after 24 hours of failures the endpoint is paused and its events stay queued", func(t *testing.T) {
		f, _ := paused(t)
		n.clk.Advance(actors.MaxRetryWait)
		if r := take(t, n, f.inst.Id); len(r.Events) != 0 || r.NextDue != 0 {
			t.Fatalf("paused, took %d (next due %d)", len(r.Events), r.NextDue)
		}
		p := listDeliveries(t, n, f.inst.Id, 0, 10)
		if got := states(p); len(got) != 2 || p.Deliveries[0].State != actors.DeliveryRetrying || p.Deliveries[1].State != actors.DeliveryRetrying || p.Endpoint.PausedAt == 0 {
			t.Fatalf("states %q, paused at %d", got, p.Endpoint.PausedAt)
		}
		if got := deliveryLogEvents(t, n, f.kitID); !slices.Equal(got, []string{"endpoint.paused"}) {
			t.Fatalf("developer log %q", got)
		}
	})
	t.Run("a failed redelivery leaves it paused and the event queued", func(t *testing.T) {
		f, evs := paused(t)
		redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: evs[0].Id})
		failAll(t, n, f)
		if r := take(t, n, f.inst.Id); len(r.Events) != 0 || len(queued(t, n, f.inst.Id)) != 2 {
			t.Fatalf("took %d, %d queued", len(r.Events), len(queued(t, n, f.inst.Id)))
		}
	})
	t.Run("a successful redelivery resumes it", func(t *testing.T) {
		f, evs := paused(t)
		redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: evs[0].Id})
		r := take(t, n, f.inst.Id).Events
		if len(r) != 1 || r[0].Id != evs[0].Id {
			t.Fatalf("paused, took %q, want the redelivered one alone", eventTexts(r))
		}
		recordAs(t, n, f, r[0].Sequence, true)
		if r = take(t, n, f.inst.Id).Events; len(r) != 1 || r[0].Id != evs[1].Id {
			t.Fatalf("resumed, took %q, want the other at once", eventTexts(r))
		}
		if got := deliveryLogEvents(t, n, f.kitID); !slices.Equal(got, []string{"endpoint.resumed", "endpoint.paused"}) {
			t.Fatalf("developer log %q", got)
		}
		// A resumed event starts a new 24 hours: it is not dead at once.
		recordAs(t, n, f, r[0].Sequence, false)
		if len(queued(t, n, f.inst.Id)) != 1 {
			t.Fatal("a resumed event's failure dead-lettered it")
		}
	})
	t.Run("a test event goes while paused and its success resumes it", func(t *testing.T) {
		f, _ := paused(t)
		ev := ask[*kitpb.Event](t, n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.posted", KitId: f.kitID})
		r := take(t, n, f.inst.Id).Events
		if len(r) != 1 || r[0].Id != ev.Id {
			t.Fatalf("paused, took %d events, want the test event alone", len(r))
		}
		recordAs(t, n, f, r[0].Sequence, true)
		if r = take(t, n, f.inst.Id).Events; len(r) != 2 {
			t.Fatalf("resumed, took %d, want both waiting events", len(r))
		}
	})
	t.Run("a new version resumes it", func(t *testing.T) {
		f, _ := paused(t)
		n.mustUpload(t, f.ws.id, eventsManifest(f.slug, "1.0.1", allScopes, []string{"message.posted"}), false)
		n.install(t, f.ws.id, f.kitID, "1.0.1")
		eventually.True(t, "the events resume after a new version", func() bool { return len(take(t, n, f.inst.Id).Events) == 2 })
	})
}

// kit trigger: a test event of the kind asked for, queued like any, marked
// as a test, in a conversation of its own.
func TestQueueTestEvent(t *testing.T) {
	n := ownNode(t)
	f, _ := deliveryFixture(t, n, 1)
	n.post(t, f.user, f.conv, postReq{text: "real"})
	failAll(t, n, f) // the real event waits for a retry
	ev := ask[*kitpb.Event](t, n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.posted", KitId: f.kitID})
	r := take(t, n, f.inst.Id).Events
	if len(r) != 1 || r[0].Id != ev.Id || !r[0].Test || r[0].Type != "message.posted" || r[0].Message == nil || r[0].Sequence != ev.Sequence {
		t.Fatalf("took %v", r)
	}
	_, err := try[*kitpb.Event](n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.nope"})
	wantCode(t, err, kiterr.Validation, "type")
}

// Delivered records are kept for the list and redelivery: the most recent
// KeepDelivered of them, pruned by a hundred at a time, lowest first.
func TestDeliveredRecordsKeepTheMostRecent(t *testing.T) {
	n := ownNode(t)
	f, _ := deliveryFixture(t, n, 1)
	const total = actors.KeepDelivered + 300
	for i := range total { // one at a time: delivered in sequence order
		ask[*kitpb.Event](t, n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.posted", KitId: f.kitID})
		evs := take(t, n, f.inst.Id).Events
		if len(evs) != 1 {
			t.Fatalf("delivery %d: took %d events", i, len(evs))
		}
		recordAs(t, n, f, evs[0].Sequence, true)
	}
	var kept []uint64
	for before := uint64(0); ; {
		p := listDeliveries(t, n, f.inst.Id, before, 100)
		for _, d := range p.Deliveries {
			if d.State != actors.DeliverySucceeded {
				t.Fatalf("sequence %d is %s", d.Event.Sequence, d.State)
			}
			kept = append(kept, d.Event.Sequence)
		}
		if !p.More {
			break
		}
		before = kept[len(kept)-1]
	}
	// Pruned after the 1,101st and the 1,202nd delivery: 101 each time.
	const pruned = 2 * 101
	if len(kept) != total-pruned || kept[0] != total || kept[len(kept)-1] != pruned+1 {
		t.Fatalf("kept %d records, %d down to %d; want %d, %d down to %d", len(kept), kept[0], kept[len(kept)-1], total-pruned, total, pruned+1)
	}
}

// A Kit resumed from a suspension (docs/deliveries.md "A suspended Kit")
// restarts the clocks of its events' failures at its resume, which the
// sender's records carry (RecordAttempt.kit_resumed_at): the suspension
// held the events, so its days count towards neither an event's 24 hours
// nor the endpoint's. Without it an event that failed before a suspension
// of more than a day was dead-lettered, or the endpoint paused, at their
// first failure after it.
func TestAResumedKitsFailuresStartANewDay(t *testing.T) {
	n := ownNode(t)
	// failedBefore: an event of the first conversation failed, then 49
	// hours passed, the Kit suspended and resumed at resumedAt (0: never
	// suspended); with delivered, another conversation's event then went,
	// so that the endpoint is healthy and the event alone has an old
	// failure. The event then fails again.
	failedBefore := func(t *testing.T, resumed, delivered bool) *eventsFixture {
		f, cs := deliveryFixture(t, n, 2)
		n.post(t, f.user, cs[0], postReq{text: "a"})
		a := failAll(t, n, f)[0]
		n.clk.Advance(49 * time.Hour)
		var resumedAt int64
		if resumed {
			resumedAt = n.clk.Now().UnixNano()
		}
		record := func(seq uint64, delivered bool) {
			ask[*kitpb.Ok](t, n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{
				Sequence: seq, Delivered: delivered, ErrorCode: "http_error", HttpStatus: 500, JitterPermille: 500, KitId: f.kitID, KitResumedAt: resumedAt})
		}
		if delivered {
			n.post(t, f.user, cs[1], postReq{text: "b"})
			eventually.True(t, "b queued", func() bool { return len(queued(t, n, f.inst.Id)) == 2 })
		}
		for _, ev := range take(t, n, f.inst.Id).Events {
			if ev.Sequence != a.Sequence {
				record(ev.Sequence, true)
			}
		}
		record(a.Sequence, false)
		return f
	}
	for _, tc := range []struct {
		name       string
		resumed    bool
		delivered  bool
		wantQueued int
		wantPaused bool
	}{
		{"a resumed Kit's event that failed before is retried, not dead", true, true, 1, false},
		{"a Kit never suspended: the event is dead at its next failure", false, true, 0, false},
		{"a resumed Kit's failing endpoint is not paused at its next failure", true, false, 1, false},
		{"a Kit never suspended: the endpoint is paused at its next failure", false, false, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := failedBefore(t, tc.resumed, tc.delivered)
			if got := len(queued(t, n, f.inst.Id)); got != tc.wantQueued {
				t.Fatalf("%d events queued after the failure, want %d", got, tc.wantQueued)
			}
			if p := listDeliveries(t, n, f.inst.Id, 0, 10); (p.Endpoint.PausedAt != 0) != tc.wantPaused {
				t.Fatalf("endpoint paused at %d, want paused %v", p.Endpoint.PausedAt, tc.wantPaused)
			}
		})
	}
}
