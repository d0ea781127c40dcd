package deliveries

import (
	"testing"
	"time"

	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// The sender's families: each attempt's latency, each failure by its
// errorCode, a code outside the list as "other".
func TestSenderMetrics(t *testing.T) {
	s := New(Config{})
	s.stats.observe(2 * time.Millisecond)
	s.stats.observe(40 * time.Millisecond)
	for _, code := range []string{ReasonHTTP, ReasonHTTP, ReasonTimeout, "no_signing_secret", "something_new"} {
		s.stats.fail(code)
	}
	var w metrics.Writer
	s.Collect(&w)
	mfs := metricstest.Parse(t, w.Bytes())
	for _, tc := range []struct {
		name   string
		family string
		labels []string
		want   float64
	}{
		{"every attempt's latency is observed", "kitd_delivery_attempt_duration_seconds", nil, 2},
		{"failures count by reason", "kitd_delivery_attempt_failures_total", []string{"reason", ReasonHTTP}, 2},
		{"a timeout is its own reason", "kitd_delivery_attempt_failures_total", []string{"reason", ReasonTimeout}, 1},
		{"an attempt without a secret counts", "kitd_delivery_attempt_failures_total", []string{"reason", "no_signing_secret"}, 1},
		{"a code outside the list is other", "kitd_delivery_attempt_failures_total", []string{"reason", "other"}, 1},
		{"a reason nothing failed with is 0", "kitd_delivery_attempt_failures_total", []string{"reason", ReasonTLS}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := metricstest.Value(mfs, tc.family, tc.labels...); got != tc.want {
				t.Fatalf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
			}
		})
	}
}
