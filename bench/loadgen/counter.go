package loadgen

import "sync/atomic"

// sharedCounter hands out request numbers across the workers of a run.
// It is padded so the hot word does not share a cache line with neighbours.
type sharedCounter struct {
	_ [64]byte
	n atomic.Uint64
	_ [56]byte
}

// next returns 0, 1, 2, ... across all callers.
func (c *sharedCounter) next() uint64 { return c.n.Add(1) - 1 }

// Live counts answers while runs go on, for a progress line: the one
// figure a caller may read during a run. It costs the generator one atomic
// add per answer, as the request counter does. The zero value is ready; a
// nil *Live counts nothing.
type Live struct {
	ok, errs sharedCounter
}

// Count counts one answer (ok: a success).
func (l *Live) Count(ok bool) {
	switch {
	case l == nil:
	case ok:
		l.ok.n.Add(1)
	default:
		l.errs.n.Add(1)
	}
}

// Counts returns the 2xx answers and the failures counted so far.
func (l *Live) Counts() (ok, errs uint64) { return l.ok.n.Load(), l.errs.n.Load() }
