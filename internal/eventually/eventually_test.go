package eventually

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	afterCalls := func(n int32) func() bool {
		var calls atomic.Int32
		return func() bool { return calls.Add(1) >= n }
	}
	tests := []struct {
		name string
		run  func(t testing.TB)
		fail string // "" : passes
	}{
		{"a condition that holds at once passes", func(t testing.TB) {
			True(t, "now", func() bool { return true })
		}, ""},
		{"a condition that comes to hold passes", func(t testing.TB) {
			TrueWithin(t, 10*time.Second, "later", afterCalls(5))
		}, ""},
		{"a condition never met fails saying what was awaited", func(t testing.TB) {
			TrueWithin(t, 20*time.Millisecond, "the moon", func() bool { return false })
		}, "not within 20ms: the moon"},
		{"an error never cleared fails with the last error", func(t testing.TB) {
			n := 0
			NoErrorWithin(t, 20*time.Millisecond, "a check", func() error { n++; return fmt.Errorf("try %d", n) })
		}, "not within 20ms: a check: try "},
		{"an error that clears passes", func(t testing.TB) {
			ok := afterCalls(3)
			NoError(t, "a check", func() error {
				if ok() {
					return nil
				}
				return errors.New("not yet")
			})
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeT{TB: t}
			tc.run(f)
			switch {
			case tc.fail == "" && f.failed != "":
				t.Errorf("failed: %s", f.failed)
			case tc.fail != "" && (len(f.failed) < len(tc.fail) || f.failed[:len(tc.fail)] != tc.fail):
				t.Errorf("failure %q, want %q…", f.failed, tc.fail)
			}
		})
	}
}

// The deadline bounds the wait even when a check is slow to answer: the
// condition is asked once more at the deadline, never slept past it.
func TestPollReturnsByTheDeadline(t *testing.T) {
	start := time.Now()
	if Holds(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("held")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}
