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
