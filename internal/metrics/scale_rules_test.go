package metrics

import (
	"math"
	"testing"
)

// NewBuckets: bounds are "exposed multiplied by scale". A scale under 1
// that is no whole number's inverse (milli-something to a tenth: 0.3,
// 0.4) must still multiply.
func TestAScaleUnderOneMultiplies(t *testing.T) {
	for _, scale := range []float64{0.3, 0.4, 0.75} {
		b := NewBuckets(scale, 10, 100)
		for i, v := range b.Scaled() {
			want := float64([]int64{10, 100}[i]) * scale
			if math.Abs(v-want) > 1e-9*want {
				t.Errorf("NewBuckets(%v, ...).Scaled()[%d] = %v, want %v", scale, i, v, want)
			}
		}
	}
}

// Histogram.sum is a uint64 in the observations' unit: a sum past
// MaxInt64 (292 years of nanoseconds, summed over every observation) is
// still a positive number of seconds, as it was before scaled.
func TestASumPastMaxInt64StaysPositive(t *testing.T) {
	h := NewHistogram(LatencyBuckets)
	h.Observe(math.MaxInt64)
	h.Observe(1 << 40)
	if s := h.Snapshot().Sum; s <= 0 {
		t.Fatalf("Sum = %v after two positive observations", s)
	}
}
