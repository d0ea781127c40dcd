package metrics

import (
	"strings"
	"testing"
	"time"
)

// docs/decisions.md "Metrics": buckets are fixed bounds, exposed in
// seconds ("buckets ... 10 ms to 24 h"). A bound of one minute must be
// exposed as le="60", the value a query or a dashboard names, not as the
// product of a float rounding (60e9 × 1e-9).
func TestBucketBoundsAreExposedAsTheirDecimalValue(t *testing.T) {
	b := NewBuckets(1e-9, int64(10*time.Millisecond), int64(time.Minute), int64(6*time.Hour), int64(24*time.Hour))
	var w Writer
	w.Family("kitd_x_seconds", "x", TypeHistogram)
	w.Histogram("kitd_x_seconds", "", NewHistogram(b).Snapshot())
	out := string(w.Bytes())
	for _, le := range []string{`le="0.01"`, `le="60"`, `le="21600"`, `le="86400"`} {
		if !strings.Contains(out, le) {
			t.Errorf("no bucket %s in:\n%s", le, out)
		}
	}
	for i, v := range b.Scaled() {
		want := []float64{0.01, 60, 21600, 86400}[i]
		if v != want {
			t.Errorf("Scaled()[%d] = %v, want %v", i, v, want)
		}
	}
}
