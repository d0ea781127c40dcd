package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The deliveries' retention (docs/deliveries.md, "Retention"): an event
// that waited in the outbox, without a sequence, longer than
// actors.DeliveryRetention is dropped, and so is a dead letter not
// redelivered; the events queued stay, under gapless sequences.
func TestDeliveryRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"events that waited in the outbox past the retention are dropped; the queued and the younger stay", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 3)
			postEach(t, n, f, cs, 8)
			wasQueued := eventTexts(queued(t, n, f.inst.Id))
			failAll(t, n, f) // the endpoint is down: the Kit's log gets the entries
			n.clk.Advance(actors.DeliveryRetention - 3*24*time.Hour)
			young := postEach(t, n, f, cs, 2)
			n.clk.Advance(3*24*time.Hour + time.Minute)
			queued(t, n, f.inst.Id) // a message a sweep's hour after the last
			metricIs(t, n, 24-behindBound, "kitd_delivery_events_expired_total", "from", "outbox")
			outboxHolds(t, n, f.inst.Id, cs, behindBound+6) // the queued, whose entries they refer to, and the young
			eventually.True(t, "the developer log saying how many expired", func() bool {
				return slices.Contains(deliveryLogEvents(t, n, f.kitID), "events.expired")
			})
			entries, _, err := actors.ReadDevLog(n.env, f.kitID, "", 100, func(e *kitpb.DevLogEntry) bool { return e.Event == "events.expired" })
			noErr(t, err)
			if len(entries) != 1 || entries[0].Status != "16 expired" || entries[0].InstallationId != f.inst.Id {
				t.Fatalf("the developer log's entries of the expiry: %v, want one, 16 expired", entries)
			}
			n.clk.Advance(actors.MaxRetryWait) // past the retries of the failed
			d := drain(t, n, f.inst.Id, behindBound+6, behindBound+6)
			d.inOrder(t, nil)
			for c, texts := range young {
				if got := d.byConv[c]; len(got) < 2 || !slices.Equal(got[len(got)-2:], texts) {
					t.Fatalf("conversation %s delivered %q, want its young events %q last", c, got, texts)
				}
			}
			kept := slices.Clone(wasQueued)
			for _, texts := range young {
				kept = append(kept, texts...)
			}
			for _, text := range d.order {
				if !slices.Contains(kept, text) {
					t.Fatalf("delivered %q, which had waited in the outbox past the retention (queued: %q)", text, wasQueued)
				}
			}
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
			metricIs(t, n, 16, "kitd_delivery_events_expired_total", "from", "outbox")
		}},
		{"a conversation that lags drops what waited past the retention, and lags no more", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = 64          // a share of 4
			n.env.DeliveryFlushAfter = time.Hour // the sweep writes what it drops itself
			f, cs := deliveryFixture(t, n, 1)
			posted := postEach(t, n, f, cs, 12)
			metricIs(t, n, 1, "kitd_delivery_installations_behind")
			n.clk.Advance(actors.DeliveryRetention + time.Minute)
			queued(t, n, f.inst.Id)
			metricIs(t, n, 8, "kitd_delivery_events_expired_total", "from", "outbox")
			outboxHolds(t, n, f.inst.Id, cs, 4)
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
			more := postEach(t, n, f, cs, 2)
			d := drain(t, n, f.inst.Id, 6, 6)
			d.inOrder(t, nil)
			if want := append(slices.Clone(posted[cs[0]][:4]), more[cs[0]]...); !slices.Equal(d.order, want) {
				t.Fatalf("delivered %q, want the 4 queued, then the 2 posted after the expiry: %q", d.order, want)
			}
		}},
		{"an activation drops what waited past the retention rather than queue it", func(t *testing.T) {
			fs := vfs.NewMem()
			n, err := startNode(fs, nil)
			noErr(t, err)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			postEach(t, n, f, cs, 10) // 8 queued, 12 in the outbox
			wasQueued := eventTexts(queued(t, n, f.inst.Id))
			noErr(t, n.stop())
			n.clk.Advance(actors.DeliveryRetention + time.Minute)
			n, err = startNode(fs, n.clk) // its queue's bound room for all 20
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			if got := eventTexts(queued(t, n, f.inst.Id)); !slices.Equal(got, wasQueued) {
				t.Fatalf("queued after a restart a week later: %q, want the %q queued before it and none of the outbox's", got, wasQueued)
			}
			metricIs(t, n, 12, "kitd_delivery_events_expired_total", "from", "outbox")
			outboxHolds(t, n, f.inst.Id, cs, behindBound)
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
		}},
		{"drops whose commit fails are counted once, when the next activation writes them", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			commits := holdCommits(t, n)
			f, cs := deliveryFixture(t, n, 2)
			postEach(t, n, f, cs, 10) // 8 queued, 12 in the outbox
			queued(t, n, f.inst.Id)   // every take written
			held := commits.holdNext()
			n.clk.Advance(actors.DeliveryRetention + time.Minute)
			// A message a sweep's hour after the last, asked aside: the
			// inline mailbox may run the sweep, whose commit is held, on
			// the asking goroutine.
			asked := make(chan error, 1)
			go func() {
				_, err := try[*kitpb.QueuedEventsReply](n, actors.KindDelivery, f.inst.Id, &kitpb.ListQueuedEvents{})
				asked <- err
			}()
			waitFor(t, "the sweep's commit", held)
			metricIs(t, n, 0, "kitd_delivery_events_expired_total", "from", "outbox")
			commits.release <- errors.New("lost the leadership")
			waitFor(t, "the list asked as the sweep ran", asked) // its answer, whatever it is, ends it
			eventually.NoError(t, "a list after the actor started again", func() error {
				_, err := try[*kitpb.QueuedEventsReply](n, actors.KindDelivery, f.inst.Id, &kitpb.ListQueuedEvents{})
				return err
			})
			outboxHolds(t, n, f.inst.Id, cs, behindBound)
			metricIs(t, n, 12, "kitd_delivery_events_expired_total", "from", "outbox")
		}},
		{"dead letters go after the retention, in whatever order they died", func(t *testing.T) {
			n := ownNode(t)
			f, cs := deliveryFixture(t, n, 2)
			// A success before and after each death keeps the endpoint
			// from failing 24 hours straight, which would pause it.
			succeed := func(text string) {
				t.Helper()
				n.post(t, f.user, cs[1], postReq{text: text})
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, true)
			}
			die := func(text string) {
				t.Helper()
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, false)
				succeed(text + "-ok")
				n.clk.Advance(actors.DeadAfter)
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, false)
				succeed(text + "-after")
			}
			// first dies, then second three days later, then first again,
			// redelivered: first's sequence is the lower, its death the
			// younger.
			n.post(t, f.user, cs[0], postReq{text: "first"})
			die("first")
			n.clk.Advance(3 * 24 * time.Hour)
			n.post(t, f.user, cs[0], postReq{text: "second"})
			die("second")
			redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: deliveryEventID(t, n, f.inst.Id, "first")})
			die("again")
			n.clk.Advance(actors.DeliveryRetention - 12*time.Hour) // second's death a week old, first's not
			listDeliveries(t, n, f.inst.Id, 0, 10)
			metricIs(t, n, 1, "kitd_delivery_events_expired_total", "from", "dead_letters")
			eventually.True(t, "second gone from the list, first dead in it", func() bool {
				var dead []string
				for _, s := range states(listDeliveries(t, n, f.inst.Id, 0, 20)) {
					if strings.HasSuffix(s, ":dead") {
						dead = append(dead, s)
					}
				}
				return slices.Equal(dead, []string{"first:dead"})
			})
			entries, _, err := actors.ReadDevLog(n.env, f.kitID, "", 100, func(e *kitpb.DevLogEntry) bool { return e.Event == "dead_letters.expired" })
			noErr(t, err)
			if len(entries) != 1 || entries[0].Status != "1 expired" {
				t.Fatalf("the developer log's entries of the dead letters dropped: %v, want one, 1 expired", entries)
			}
			if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{DeadSince: 1}); len(got) != 1 {
				t.Fatalf("redelivered %v of the dead letters, want first alone", got)
			}
			metricIs(t, n, 0, "kitd_delivery_events_expired_total", "from", "outbox")
		}},
		{"a sweep that reaches its bound is followed by the next at once", func(t *testing.T) {
			n := ownNode(t)
			actors.SetSweepMax(n.env, 2)
			n.env.DeliveryQueueMax = 64 // a share of 4
			f, cs := deliveryFixture(t, n, 4)
			dying, healthy := cs[:3], cs[3]
			postEach(t, n, f, append(slices.Clone(dying), healthy), 1)
			// The failures, then a success: the endpoint is not failing
			// straight when they die a day later, so it is not paused.
			evs := take(t, n, f.inst.Id).Events
			for _, succeeds := range []bool{false, true} {
				for _, ev := range evs {
					if (ev.ConversationId == healthy) == succeeds {
						recordAs(t, n, f, ev.Sequence, succeeds)
					}
				}
			}
			n.clk.Advance(actors.DeadAfter)
			for _, ev := range take(t, n, f.inst.Id).Events {
				recordAs(t, n, f, ev.Sequence, false) // 3 dead letters
			}
			postEach(t, n, f, dying, 6) // each conversation's share queued, 2 in the outbox
			n.clk.Advance(actors.DeliveryRetention + time.Minute)
			queued(t, n, f.inst.Id)
			metricIs(t, n, 3, "kitd_delivery_events_expired_total", "from", "dead_letters")
			metricIs(t, n, 6, "kitd_delivery_events_expired_total", "from", "outbox")
			outboxHolds(t, n, f.inst.Id, dying, 12)
			eventually.True(t, "no dead letter left", func() bool {
				return !slices.ContainsFunc(states(listDeliveries(t, n, f.inst.Id, 0, 50)), func(s string) bool { return strings.HasSuffix(s, ":dead") })
			})
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// outboxHolds waits, sending the installation's actor nothing (what it
// wrote must land by itself), until the outbox of convs holds want
// entries for inst.
func outboxHolds(t *testing.T, n *testNode, inst string, convs []string, want int) {
	t.Helper()
	count := func() int {
		held := 0
		for _, c := range convs {
			prefix := actors.OutboxSourcePrefix(inst, c)
			noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool {
				held++
				return true
			}))
		}
		return held
	}
	eventually.True(t, fmt.Sprintf("the outbox holding %d entries", want), func() bool { return count() == want })
}

// deliveryEventID is the eventId of the installation's listed delivery
// whose message says text.
func deliveryEventID(t *testing.T, n *testNode, inst, text string) string {
	t.Helper()
	for _, d := range listDeliveries(t, n, inst, 0, 100).Deliveries {
		if d.Event.Message.GetText() == text {
			return d.Event.Id
		}
	}
	t.Fatalf("no delivery of %q listed", text)
	return ""
}
