// Package metrics owns kitd's metrics: the counters and histograms the
// layers update while they serve, and their exposition in the Prometheus
// text format (version 0.0.4) at scrape time.
//
// Counting is the hot path's business, so it never takes a lock and never
// allocates: every series is an atomic value its owner created at startup,
// with its label values already rendered (a route row holds its own
// counters; nothing is looked up by name per request). All the work of
// naming, cumulating buckets and formatting happens when a scrape asks.
// The package never decides what to count; its callers do.
package metrics

import (
	"math"
	"sync/atomic"
	"time"
)

// Counter is a monotonically increasing count. The zero value is ready.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.v.Load() }

// Buckets are the upper bounds of a histogram's buckets, ascending, in the
// unit its observations are made in (nanoseconds, bytes), and the factor
// that turns that unit into the exposed one (seconds: 1e-9).
type Buckets struct {
	bounds []int64
	scale  float64
}

// NewBuckets returns buckets with the given ascending upper bounds, exposed
// multiplied by scale. It panics on bounds that are not ascending: they are
// fixed in the code.
func NewBuckets(scale float64, bounds ...int64) *Buckets {
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] {
			panic("metrics: bucket bounds must ascend")
		}
	}
	return &Buckets{bounds: bounds, scale: scale}
}

// LatencyBuckets cover a request or a commit, 100µs to 10s: a POST /messages
// is well under a millisecond of CPU, its WAL sync 0.1-1 ms on the
// reference VM, and anything past 10 s has already timed out somewhere.
var LatencyBuckets = NewBuckets(1e-9,
	int64(100*time.Microsecond), int64(250*time.Microsecond), int64(500*time.Microsecond),
	int64(time.Millisecond), int64(2500*time.Microsecond), int64(5*time.Millisecond),
	int64(10*time.Millisecond), int64(25*time.Millisecond), int64(50*time.Millisecond),
	int64(100*time.Millisecond), int64(250*time.Millisecond), int64(500*time.Millisecond),
	int64(time.Second), int64(2500*time.Millisecond), int64(5*time.Second), int64(10*time.Second))

// SizeBuckets cover a write batch, 128 B (one small record) to 8 MiB (a
// file upload's chunks), by powers of four.
var SizeBuckets = NewBuckets(1, 128, 512, 2<<10, 8<<10, 32<<10, 128<<10, 512<<10, 2<<20, 8<<20)

// Histogram counts observations into fixed buckets. Create it with
// NewHistogram.
type Histogram struct {
	b      *Buckets
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // in the observations' unit
}

// NewHistogram returns an empty histogram over b.
func NewHistogram(b *Buckets) *Histogram {
	return &Histogram{b: b, counts: make([]atomic.Uint64, len(b.bounds)+1)}
}

// Observe counts v. A negative v counts as 0.
func (h *Histogram) Observe(v int64) {
	v = max(v, 0)
	i := 0
	for i < len(h.b.bounds) && v > h.b.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(v))
}

// ObserveDuration counts d, for histograms over nanoseconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(int64(d)) }

// Count returns how many observations were made.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// HistogramSnapshot is a histogram read at once, cumulative as the text
// format wants it. Bounds and Sum are in the exposed unit.
type HistogramSnapshot struct {
	Bounds     []float64
	Cumulative []uint64 // one per bound, then +Inf (= Count)
	Sum        float64
}

// Snapshot reads h. Observations made meanwhile may or may not be in it;
// each bucket is read once, so the cumulative counts never decrease.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{
		Bounds:     make([]float64, len(h.b.bounds)),
		Cumulative: make([]uint64, len(h.counts)),
	}
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		s.Cumulative[i] = n
	}
	for i, b := range h.b.bounds {
		s.Bounds[i] = h.b.scaled(float64(b))
	}
	s.Sum = h.b.scaled(float64(h.sum.Load()))
	return s
}

// Count returns the number of observations of s.
func (s HistogramSnapshot) Count() uint64 { return s.Cumulative[len(s.Cumulative)-1] }

// Rebucket folds a histogram with finer bounds (another library's, such as
// Pebble's WAL fsync latency) into bounds: each bound gets the cumulative
// count of the largest finer bound at or under it, so a count is never
// placed under a bound it may exceed.
func Rebucket(fine []float64, cumulative []uint64, count uint64, sum float64, bounds []float64) HistogramSnapshot {
	s := HistogramSnapshot{Bounds: bounds, Cumulative: make([]uint64, len(bounds)+1), Sum: sum}
	j := -1
	for i, b := range bounds {
		for j+1 < len(fine) && fine[j+1] <= b*(1+1e-9) {
			j++
		}
		if j >= 0 {
			s.Cumulative[i] = cumulative[j]
		}
	}
	s.Cumulative[len(bounds)] = count
	return s
}

// Scaled returns the exposed bounds of b.
func (b *Buckets) Scaled() []float64 {
	out := make([]float64, len(b.bounds))
	for i, v := range b.bounds {
		out[i] = b.scaled(float64(v))
	}
	return out
}

// scaled is v in the exposed unit. A scale that is a whole number's
// inverse (1e-9: nanoseconds to seconds) divides by that number, so that a
// bound of a minute is 60 rather than 60e9 × 1e-9 = 60.00000000000001;
// another multiplies.
func (b *Buckets) scaled(v float64) float64 {
	if inv := math.Round(1 / b.scale); b.scale < 1 && math.Abs(inv*b.scale-1) < 1e-12 {
		return v / inv
	}
	return v * b.scale
}

// isInt reports whether f prints as an integer.
func isInt(f float64) bool { return f == math.Trunc(f) && math.Abs(f) < 1<<53 }
