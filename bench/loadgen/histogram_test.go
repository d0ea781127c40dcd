package loadgen

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func relErr(got, want time.Duration) float64 {
	return math.Abs(float64(got-want)) / float64(want)
}

func TestBucketsRoundTrip(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d,%d] maps to %d/%d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= 2*subCount && float64(hi-lo+1)/float64(lo) > 1.0/subCount+1e-12 {
			t.Fatalf("bucket %d too wide: [%d,%d]", i, lo, hi)
		}
		prevHi = hi
	}
	if prevHi != maxValue {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, maxValue)
	}
}

func TestUniformPercentiles(t *testing.T) {
	var h Histogram
	// 1 µs .. 100 ms in 1 µs steps: p50 = 50 ms, p99 = 99 ms exactly.
	for v := 1; v <= 100000; v++ {
		h.Record(time.Duration(v) * time.Microsecond)
	}
	if h.Count() != 100000 {
		t.Fatalf("count %d", h.Count())
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 50 * time.Millisecond},
		{0.9, 90 * time.Millisecond},
		{0.99, 99 * time.Millisecond},
		{0.999, 99900 * time.Microsecond},
		{0.999, 99900 * time.Microsecond},
	} {
		if got := h.Quantile(c.q); relErr(got, c.want) > 0.005 {
			t.Errorf("q%.3f = %v, want %v ±0.5%%", c.q, got, c.want)
		}
	}
	if h.Min() != time.Microsecond || h.Max() != 100*time.Millisecond {
		t.Errorf("min %v max %v", h.Min(), h.Max())
	}
	if got, want := h.Mean(), 50000500*time.Nanosecond; relErr(got, want) > 1e-9 {
		t.Errorf("mean %v want %v", got, want)
	}
	if h.Quantile(1) != h.Max() || h.Quantile(0) != h.Min() {
		t.Errorf("q0/q1 not min/max")
	}
}

func TestExponentialPercentilesAgainstExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	samples := make([]time.Duration, n)
	// Two histograms merged must equal one fed with everything.
	var a, b, all Histogram
	for i := range samples {
		d := time.Duration(r.ExpFloat64() * float64(2*time.Millisecond))
		samples[i] = d
		all.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := samples[int(math.Ceil(q*n))-1]
		if got := all.Quantile(q); relErr(got, exact) > 0.005 {
			t.Errorf("q%.3f = %v, exact %v", q, got, exact)
		}
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged q%.3f = %v, single %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
	// The median of Exp(mean 2 ms) is 2 ms * ln 2.
	if got, want := all.Quantile(0.5), time.Duration(math.Round(math.Ln2*2e6)); relErr(got, want) > 0.02 {
		t.Errorf("median %v, theory %v", got, want)
	}
	if a.Count() != n || a.Min() != all.Min() || a.Max() != all.Max() {
		t.Errorf("merge lost samples: %d %v %v", a.Count(), a.Min(), a.Max())
	}
}

func TestEdgeValues(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram must answer 0")
	}
	h.Record(-5)
	h.Record(time.Hour) // clamped
	if h.Min() != 0 || h.Max() != maxValue {
		t.Errorf("min %v max %v", h.Min(), h.Max())
	}
	var one Histogram
	one.Record(1234567 * time.Nanosecond)
	for _, q := range []float64{0.01, 0.5, 0.99} {
		if got := one.Quantile(q); got != 1234567 {
			t.Errorf("single sample q%.2f = %v", q, got)
		}
	}
}
