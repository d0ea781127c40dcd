package actors_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
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
			old := postEach(t, n, f, cs, 8)
			failAll(t, n, f) // the endpoint is down: the Kit's log gets the entries
			n.clk.Advance(actors.DeliveryRetention - 3*24*time.Hour)
			young := postEach(t, n, f, cs, 2)
			n.clk.Advance(3*24*time.Hour + time.Minute)
			queued(t, n, f.inst.Id) // a message a sweep's hour after the last
			metricIs(t, n, 24-behindBound, "kitd_delivery_events_expired_total", "from", "outbox")
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
				for _, text := range d.byConv[c][:len(d.byConv[c])-2] {
					if !slices.Contains(old[c][:behindBound], text) {
						t.Fatalf("conversation %s delivered %q, which had waited in the outbox past the retention", c, text)
					}
				}
			}
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
		}},
		{"a conversation that lags drops what waited past the retention, and lags no more", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = 64 // a share of 4
			f, cs := deliveryFixture(t, n, 1)
			posted := postEach(t, n, f, cs, 12)
			metricIs(t, n, 1, "kitd_delivery_installations_behind")
			n.clk.Advance(actors.DeliveryRetention)
			queued(t, n, f.inst.Id)
			metricIs(t, n, 8, "kitd_delivery_events_expired_total", "from", "outbox")
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
			more := postEach(t, n, f, cs, 2)
			d := drain(t, n, f.inst.Id, 6, 6)
			d.inOrder(t, nil)
			if want := append(slices.Clone(posted[cs[0]][:4]), more[cs[0]]...); !slices.Equal(d.order, want) {
				t.Fatalf("delivered %q, want the 4 queued, then the 2 posted after the expiry: %q", d.order, want)
			}
		}},
		{"dead letters go after the retention, younger ones stay", func(t *testing.T) {
			n := ownNode(t)
			f, cs := deliveryFixture(t, n, 2)
			// killed dies first, then young three days later; a success
			// before and after each death keeps the endpoint from failing
			// 24 hours straight, which would pause it.
			succeed := func(text string) {
				t.Helper()
				n.post(t, f.user, cs[1], postReq{text: text})
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, true)
			}
			deadLetter := func(text string) {
				t.Helper()
				n.post(t, f.user, cs[0], postReq{text: text})
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, false)
				succeed(text + "-ok")
				n.clk.Advance(actors.DeadAfter)
				recordAs(t, n, f, take(t, n, f.inst.Id).Events[0].Sequence, false)
				succeed(text + "-after")
			}
			deadLetter("killed")
			n.clk.Advance(3 * 24 * time.Hour)
			deadLetter("young")
			n.clk.Advance(actors.DeliveryRetention - 3*24*time.Hour)
			listDeliveries(t, n, f.inst.Id, 0, 10)
			metricIs(t, n, 1, "kitd_delivery_events_expired_total", "from", "dead_letters")
			eventually.True(t, "the dead letter gone from the list", func() bool {
				return slices.Equal(states(listDeliveries(t, n, f.inst.Id, 0, 10)), []string{"young-after:succeeded", "young-ok:succeeded", "young:dead", "killed-after:succeeded", "killed-ok:succeeded"})
			})
			if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{DeadSince: 1}); len(got) != 1 {
				t.Fatalf("redelivered %v of the dead letters, want the young one alone", got)
			}
			metricIs(t, n, 0, "kitd_delivery_events_expired_total", "from", "outbox")
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}
