package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear: values below 2*subCount are counted exactly
// (one bucket per nanosecond); above that every power-of-two range
// [2^k, 2^(k+1)) is split into subCount equal buckets. A bucket's width is
// therefore at most 1/subCount of its lower bound, and reporting its midpoint
// keeps the relative error under 1/(2*subCount), about 0.4 %.
const (
	subBits  = 7
	subCount = 1 << subBits // 128 buckets per power of two
	// maxValue is the largest value recorded exactly; larger values are
	// clamped (2^40 ns is about 18 minutes, far beyond any request timeout).
	maxValue   = 1<<40 - 1
	maxShift   = 40 - subBits - 1 // shift of the top power-of-two range
	numBuckets = subCount*maxShift + 2*subCount
)

// Histogram counts durations in fixed log-linear buckets. The zero value is
// ready to use. It is not safe for concurrent use: give each goroutine its
// own and Merge them afterwards.
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	sum    float64 // nanoseconds, for the mean
	min    int64
	max    int64
}

// bucketOf returns the bucket index of v (0 <= v <= maxValue).
func bucketOf(v int64) int {
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	if shift < 0 {
		shift = 0
	}
	return subCount*shift + int(v>>uint(shift))
}

// bucketRange returns the smallest and largest value counted in bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 2*subCount {
		return int64(i), int64(i)
	}
	shift := i/subCount - 1
	m := int64(i - subCount*shift) // in [subCount, 2*subCount)
	lo = m << uint(shift)
	hi = (m+1)<<uint(shift) - 1
	return lo, hi
}

// Record adds one duration. Negative durations count as zero and durations
// above about 18 minutes are clamped.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	if v > maxValue {
		v = maxValue
	}
	h.counts[bucketOf(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
}

// Count returns the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.total }

// Min returns the smallest recorded duration (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max returns the largest recorded duration (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the arithmetic mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

// Quantile returns the duration below or at which a fraction q (0..1) of the
// samples lie, e.g. Quantile(0.99) is the p99. The answer is the midpoint of
// the bucket holding the sample of rank ceil(q*count), clamped to the
// recorded min and max. An empty histogram answers 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
