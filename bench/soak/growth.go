// Package soak watches a long-running kitd process for resources that grow
// without bound: it samples the process's memory, goroutines, threads and
// open files and the size of its Pebble directory from outside (/proc and
// the debug endpoint kitd already has), and judges each series with a
// growth rule. It never asks kitd for anything it does not already serve.
package soak

import (
	"fmt"
	"math"
)

// Point is one sample of a series: T seconds since the soak began, value V.
type Point struct {
	T, V float64
}

// Slope is the least-squares slope of ps (V per second); 0 for fewer than
// two points or points all at one time.
func Slope(ps []Point) float64 {
	n := float64(len(ps))
	if n < 2 {
		return 0
	}
	var st, sv float64
	for _, p := range ps {
		st += p.T
		sv += p.V
	}
	mt, mv := st/n, sv/n
	var num, den float64
	for _, p := range ps {
		num += (p.T - mt) * (p.V - mv)
		den += (p.T - mt) * (p.T - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// Rule says when a series grows without bound. A process that warms up
// grows at first (caches, memtables, connection pools) and then levels off;
// one that leaks keeps growing. So the rule looks at the second half of
// the soak only (the samples at or after its midpoint in time), fits a
// least-squares line there, and calls the series unbounded when the line's
// rise over that half exceeds both Abs and Rel times the half's mean:
//
//	rise = slope × (last T − first T of the half)
//	grows = rise > Abs && rise > Rel × mean
//
// Abs keeps small, noisy series (a handful of open files) from tripping on
// one sample; Rel scales with the process's size. A half with fewer than
// MinPoints samples is too short to judge and never fails.
type Rule struct {
	Rel       float64
	Abs       float64
	MinPoints int
}

// Verdict is a rule's judgement of one series.
type Verdict struct {
	Grows bool    `json:"grows"`
	Rise  float64 `json:"rise"` // fitted rise over the second half
	Mean  float64 `json:"mean"` // mean of the second half
	// Why is a sentence for the report: what grew and by how much, or why
	// the series could not be judged.
	Why string `json:"why"`
}

// Judge applies r to ps (sorted by T).
func (r Rule) Judge(ps []Point) Verdict {
	if len(ps) == 0 {
		return Verdict{Why: "no samples"}
	}
	mid := (ps[0].T + ps[len(ps)-1].T) / 2
	i := 0
	for i < len(ps) && ps[i].T < mid {
		i++
	}
	half := ps[i:]
	if len(half) < max(r.MinPoints, 2) {
		return Verdict{Why: fmt.Sprintf("%d samples in the second half, too few to judge (want %d)", len(half), max(r.MinPoints, 2))}
	}
	var sum float64
	for _, p := range half {
		sum += p.V
	}
	v := Verdict{Mean: sum / float64(len(half))}
	span := half[len(half)-1].T - half[0].T
	v.Rise = Slope(half) * span
	limit := math.Max(r.Abs, r.Rel*v.Mean)
	v.Grows = v.Rise > limit
	if v.Grows {
		v.Why = fmt.Sprintf("rose by %.4g over the last %.0f s (fitted), beyond the %.4g allowed", v.Rise, span, limit)
	} else {
		v.Why = fmt.Sprintf("bounded: fitted rise %.4g over the last %.0f s, within %.4g", v.Rise, span, limit)
	}
	return v
}
