// Package clock owns the server's one source of time.
//
// Every expiry, token bucket and timestamp in kitd reads the time through a
// [Clock] handed down from main; nothing else calls time.Now for behaviour.
// Production runs on [System]. With `kitd serve --test-clock`
// (OPERATIONS.md section 1) the server runs on a [Test] clock instead, which
// `POST /ops/v1/clock/advance` moves forward, so tests can cross a
// rate-limit window or a token expiry without waiting.
//
// Times returned by both clocks are in UTC and carry no monotonic reading, so
// they compare, serialize and persist the same way.
//
// Background work that runs on real time, not on what the service clock
// decides (raft's ticks, gossip of a node's state), ticks on
// [AlignedTicker], together on every member of a cluster.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is the time source of the server.
type Clock interface {
	// Now returns the current time in UTC.
	Now() time.Time
}

// System returns the real clock (time.Now, in UTC).
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// Test is a clock for `--test-clock`: it starts at the real time of its
// creation, keeps flowing at real speed, and can be moved forward with
// [Test.Advance]:
//
//	Now() = creation time + real time elapsed since creation + total advanced
//
// It never goes backwards (elapsed time is measured on the monotonic clock,
// and advances are never negative). It is safe for concurrent use; the zero
// value is not usable, use [NewTest].
type Test struct {
	start  time.Time    // creation time, with its monotonic reading
	offset atomic.Int64 // total advance in nanoseconds
}

var _ Clock = (*Test)(nil)

// NewTest returns a Test clock that reads the real time until advanced.
func NewTest() *Test { return &Test{start: time.Now()} }

// Now returns the test time in UTC.
func (t *Test) Now() time.Time {
	return t.at(t.offset.Load())
}

// Advance moves the clock forward by d and returns the new time. A negative
// d is ignored (the clock never goes backwards); Advance(0) just reads it.
// Concurrent advances add up.
func (t *Test) Advance(d time.Duration) time.Time {
	if d <= 0 {
		return t.Now()
	}
	return t.at(t.offset.Add(int64(d)))
}

// Offset returns the total amount the clock has been advanced.
func (t *Test) Offset() time.Duration { return time.Duration(t.offset.Load()) }

func (t *Test) at(offset int64) time.Time {
	// time.Since uses the monotonic reading of start; UTC strips it from
	// the result.
	return t.start.Add(time.Since(t.start) + time.Duration(offset)).UTC()
}
