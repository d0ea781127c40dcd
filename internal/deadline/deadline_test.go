package deadline

import (
	"testing"
	"time"
)

func TestShared(t *testing.T) {
	const timeout = 320 * time.Millisecond // slot: 10 ms
	t0 := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		begins []time.Duration // after t0, in turn
		shared bool            // the last two share a context
	}{
		{"calls that begin within a slot share a context", []time.Duration{0, 9 * time.Millisecond}, true},
		{"a call that begins past the slot gets a context of its own", []time.Duration{0, 11 * time.Millisecond}, false},
		{"a slot begins where the last new context began", []time.Duration{0, 11 * time.Millisecond, 20 * time.Millisecond}, true},
		{"one call", []time.Duration{0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewShared(timeout)
			var prev, last any
			for _, after := range tc.begins {
				now := t0.Add(after)
				ctx := d.After(now)
				at, ok := ctx.Deadline()
				if !ok {
					t.Fatal("a call's context has no deadline")
				}
				if at.Before(now.Add(timeout)) {
					t.Errorf("begun at +%v: ends %v after it, sooner than the timeout", after, at.Sub(now))
				}
				if at.After(now.Add(timeout + d.slot)) {
					t.Errorf("begun at +%v: ends %v after it, later than timeout and a slot", after, at.Sub(now))
				}
				prev, last = last, ctx
			}
			if len(tc.begins) > 1 && (prev == last) != tc.shared {
				t.Errorf("the last two calls share a context: %v, want %v", prev == last, tc.shared)
			}
		})
	}
}
