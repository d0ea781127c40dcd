package e2e

import (
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// docs/deliveries.md "A backlog past memory": an installation whose
// endpoint is down keeps at most --delivery-queue events queued in memory,
// each conversation its share of them, and the rest wait in the outbox,
// through a kill -9; once the endpoint is back every event arrives, each
// conversation's in order.
func TestADeliveryBacklogPastMemoryWaitsInTheOutbox(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 503, 0, false })
	s, opts := deliveryServer(t, rcv, false, t.TempDir(), "--delivery-queue", "20")
	e := newEventsSetup(t, s, rcv, 3)
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
