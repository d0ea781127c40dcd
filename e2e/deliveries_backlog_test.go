package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// behindEndpointDown is a server on a data directory of its own whose
// installations keep at most 20 events queued (--delivery-queue), and an
// installation with its bot in convs conversations whose endpoint, rcv,
// answers 503 to everything.
func behindEndpointDown(t *testing.T, convs int) (*receiver, *Server, ServerOpts, *eventsSetup) {
	t.Helper()
	rcv := newReceiver(t)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 503, 0, false })
	s, opts := deliveryServer(t, rcv, false, t.TempDir(), "--delivery-queue", "20")
	return rcv, s, opts, newEventsSetup(t, s, rcv, convs)
}

// docs/deliveries.md "A backlog past memory": an installation whose
// endpoint is down keeps at most --delivery-queue events queued in memory,
// each conversation its share of them, and the rest wait in the outbox,
// through a kill -9; once the endpoint is back every event arrives, each
// conversation's in order.
func TestADeliveryBacklogPastMemoryWaitsInTheOutbox(t *testing.T) {
	t.Parallel()
	rcv, s, opts, e := behindEndpointDown(t, 3)
	posted := e.postRounds(t, 20)
	// A bound of 20 gives each conversation a share of 4 (a 64th, at least
	// 4): 12 events queued, the other 48 in the outbox.
	eventually.True(t, "the installation behind, with each conversation's share queued", func() bool {
		m := scrapeMetrics(t, s)
		return metricstest.Value(m, "kitd_delivery_installations_behind") == 1 && metricstest.Value(m, "kitd_delivery_backlog_events") == 12
	})
	if used := metricstest.Value(scrapeMetrics(t, s), "kitd_delivery_memory_bytes"); used < 12*160 {
		t.Fatalf("the delivery queues use %v bytes of memory with 12 events queued, want at least 160 each", used)
	}
	r := s.api(t, e.w.Dev, "GET", "/dev/installations/"+e.in.ID+"/deliveries", nil, nil)
	want(t, r, 200)
	if waiting := jget(r.JSON, "waitingInOutbox"); waiting != true || len(jarr(r.JSON, "deliveries")) != 12 {
		t.Fatalf("the deliveries list: waitingInOutbox %v with %d deliveries, want true with the 12 queued", waiting, len(jarr(r.JSON, "deliveries")))
	}
	s.kill()

	rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
	s = startServerOpts(t, opts)
	advance(t, s, time.Minute) // past the failed events' retry waits
	wantEveryEventInOrder(t, rcv, posted, "every event, the outbox's too")
	eventually.True(t, "no installation behind, and the queues' memory given back", func() bool {
		m := scrapeMetrics(t, s)
		return metricstest.Value(m, "kitd_delivery_installations_behind") == 0 && metricstest.Value(m, "kitd_delivery_memory_bytes") == 0
	})
}

// docs/deliveries.md "Retention": events that waited in the outbox past
// the queue for 7 days are dropped, and the Kit's developer log says how
// many; the events queued stay, and go with those posted since once the
// endpoint is back, under sequences without gaps.
func TestEventsPastTheRetentionAreDropped(t *testing.T) {
	t.Parallel()
	rcv, s, _, e := behindEndpointDown(t, 6)
	old := e.postRounds(t, 10) // 60 events: 20 queued, 40 in the outbox
	eventually.True(t, "the installation behind, its queue full", func() bool {
		m := scrapeMetrics(t, s)
		return metricstest.Value(m, "kitd_delivery_installations_behind") == 1 && metricstest.Value(m, "kitd_delivery_backlog_events") == 20
	})
	advance(t, s, 8*24*time.Hour)
	// The attempts after the week pause the endpoint.
	eventually.True(t, "the endpoint paused", func() bool { return deliveries(t, s, e).Str("endpoint.state") == "paused" })
	young := e.postRounds(t, 1) // a week later: they wait too, and their notices start a sweep
	eventually.True(t, "the 40 that waited a week dropped", func() bool {
		return metricstest.Value(scrapeMetrics(t, s), "kitd_delivery_events_expired_total", "from", "outbox") == 40
	})
	eventually.True(t, "events.expired in the developer log", func() bool {
		return slices.Contains(deliveryLogEvents(t, s, e), "events.expired")
	})
	// A redelivery of the first event resumes the endpoint.
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
	page := deliveries(t, s, e)
	first := jarr(page.JSON, "deliveries")
	want(t, s.api(t, e.w.Dev, "POST", "/dev/installations/"+e.in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(first[len(first)-1], "eventId")}, nil), 202)

	acked := func() (ids map[string]bool, seqs []float64) {
		ids = map[string]bool{}
		for _, d := range rcv.received() {
			if msg := jstr(d.event, "data.message.id"); d.ok && !ids[msg] {
				ids[msg] = true
				seqs = append(seqs, d.event["sequence"].(float64))
			}
		}
		return ids, seqs
	}
	eventually.True(t, "the 20 queued and the 6 posted after the week delivered", func() bool {
		ids, _ := acked()
		return len(ids) == 26
	})
	ids, seqs := acked()
	slices.Sort(seqs)
	for i, seq := range seqs {
		if seq != float64(i+1) {
			t.Fatalf("sequences delivered %v, want 1 to 26 without a gap", seqs)
		}
	}
	for c, msgs := range young {
		if !ids[msgs[0]] {
			t.Fatalf("the event posted in %s after the week was not delivered", c)
		}
	}
	oldDelivered := 0
	for _, msgs := range old {
		for _, m := range msgs {
			if ids[m] {
				oldDelivered++
			}
		}
	}
	if oldDelivered != 20 {
		t.Fatalf("%d of the 60 events posted before the week delivered, want the 20 queued", oldDelivered)
	}
}
