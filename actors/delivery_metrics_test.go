package actors_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/proto/kitpb"
)

// scrape reads the actor families of n.
func scrape(t *testing.T, n *testNode) map[string]*dto.MetricFamily {
	t.Helper()
	var w metrics.Writer
	n.env.Collect(&w)
	return metricstest.Parse(t, w.Bytes())
}

// metricIs waits until the family's value (metricstest.Value) is want.
func metricIs(t *testing.T, n *testNode, want float64, family string, labels ...string) {
	t.Helper()
	var got float64
	eventually.Holds(eventually.Within, func() bool {
		got = metricstest.Value(scrape(t, n), family, labels...)
		return got == want
	})
	if got != want {
		t.Fatalf("%s%v = %v, want %v", family, labels, got, want)
	}
}

// The delivery metrics move with the queue and the outcomes: attempts by
// outcome, the backlog and its oldest event across installations, and the
// paused endpoints.
func TestDeliveryMetrics(t *testing.T) {
	n := ownNode(t)
	f, cs := deliveryFixture(t, n, 2)
	n.post(t, f.user, cs[0], postReq{text: "a"})
	n.post(t, f.user, cs[0], postReq{text: "b"})
	n.post(t, f.user, cs[1], postReq{text: "c"})

	t.Run("the backlog counts what waits, by installation", func(t *testing.T) {
		metricIs(t, n, 3, "kitd_delivery_backlog_events")
		metricIs(t, n, 1, "kitd_delivery_installation_backlog_events") // one installation
		bucket := func(le float64) float64 {
			for _, m := range scrape(t, n)["kitd_delivery_installation_backlog_events"].GetMetric() {
				for _, b := range m.GetHistogram().GetBucket() {
					if b.GetUpperBound() == le {
						return float64(b.GetCumulativeCount())
					}
				}
			}
			return -1
		}
		if b1, b10 := bucket(1), bucket(10); b1 != 0 || b10 != 1 {
			t.Fatalf("backlog buckets le=1: %v, le=10: %v; want the installation's 3 under 10 only", b1, b10)
		}
	})
	t.Run("the oldest waiting event ages on the service clock", func(t *testing.T) {
		n.clk.Advance(30 * time.Second)
		if age := metricstest.Value(scrape(t, n), "kitd_delivery_oldest_event_age_seconds"); age < 30 {
			t.Fatalf("oldest age %v s, want at least 30", age)
		}
	})
	evs := take(t, n, f.inst.Id).Events
	slices.SortFunc(evs, func(x, y *kitpb.Event) int { return strings.Compare(x.Message.Text, y.Message.Text) })
	t.Run("attempts count by outcome; a delivered event leaves the backlog", func(t *testing.T) {
		record(t, n, f.inst.Id, evs[1].Sequence, true) // c
		record(t, n, f.inst.Id, evs[0].Sequence, false)
		metricIs(t, n, 1, "kitd_delivery_attempts_total", "outcome", "delivered")
		metricIs(t, n, 1, "kitd_delivery_attempts_total", "outcome", "retry_scheduled")
		metricIs(t, n, 2, "kitd_delivery_backlog_events")
	})
	t.Run("an endpoint failing 24 hours pauses, and counts", func(t *testing.T) {
		metricIs(t, n, 0, "kitd_delivery_endpoints_paused")
		n.clk.Advance(24 * time.Hour)
		ev := take(t, n, f.inst.Id).Events[0]
		record(t, n, f.inst.Id, ev.Sequence, false)
		metricIs(t, n, 1, "kitd_delivery_attempts_total", "outcome", "paused")
		metricIs(t, n, 1, "kitd_delivery_endpoints_paused")
	})
	t.Run("a dead letter counts", func(t *testing.T) {
		g, gs := deliveryFixture(t, n, 2)
		n.post(t, g.user, gs[0], postReq{text: "a"})
		n.post(t, g.user, gs[1], postReq{text: "c"})
		evs := take(t, n, g.inst.Id).Events
		slices.SortFunc(evs, func(x, y *kitpb.Event) int { return strings.Compare(x.Message.Text, y.Message.Text) })
		record(t, n, g.inst.Id, evs[0].Sequence, false) // a fails, c passes: not paused
		record(t, n, g.inst.Id, evs[1].Sequence, true)
		n.clk.Advance(24 * time.Hour)
		record(t, n, g.inst.Id, take(t, n, g.inst.Id).Events[0].Sequence, false)
		metricIs(t, n, 1, "kitd_delivery_attempts_total", "outcome", "dead_lettered")
	})
}
