// Package eventually is the tests' one way to wait for something: it
// polls a condition until it holds or a deadline passes, then fails the
// test saying what was awaited (and the last error seen). Unit tests and
// the end-to-end suite share it, so every wait is bounded the same way
// and none is a fixed sleep: a loaded machine only makes a wait longer,
// never a test red, and a quiet one never waits past the condition.
//
// It is test support: only _test.go files import it.
package eventually

import (
	"errors"
	"testing"
	"time"
)

// The polls start fast (a local condition holds within microseconds) and
// back off, so that a slow one (an HTTP round trip, a raft election) is
// not asked hundreds of times a second on a busy machine.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// True polls cond until it holds; past Within it fails the test.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	TrueWithin(t, Within, what, cond)
}

// TrueWithin is True with its own deadline.
func TrueWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Holds(within, cond) {
		t.Fatalf("not within %v: %s", within, what)
	}
}

// NoError polls check until it returns nil; past Within it fails the
// test with check's last error.
func NoError(t testing.TB, what string, check func() error) {
	t.Helper()
	NoErrorWithin(t, Within, what, check)
}

// NoErrorWithin is NoError with its own deadline.
func NoErrorWithin(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(within, check); err != nil {
		t.Fatalf("not within %v: %s: %v", within, what, err)
	}
}

// Holds polls cond until it holds (true) or within passes (false), for
// the callers that decide themselves what a condition never met means.
func Holds(within time.Duration, cond func() bool) bool {
	return Poll(within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

var errNotYet = errors.New("condition not met")

// Poll calls check until it returns nil or within passes, and returns
// its last error. check is always called at least once, and once more
// after the deadline, so a condition met while the poller slept counts.
func Poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	wait := firstPoll
	for {
		err := check()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, maxPoll)
	}
}
