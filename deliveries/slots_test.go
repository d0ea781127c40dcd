package deliveries

import (
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/proto/kitpb"
)

// SPEC.md section 8: at most 50 deliveries of one Kit in flight at once,
// whatever its installations; other Kits are not held up. (The e2e suite
// cannot hold 50 of one Kit: a Kit installed in several workspaces must be
// published with verified endpoint hosts, and a loopback receiver has
// none; it tests the 10 per installation.)
func TestKitSlots(t *testing.T) {
	s := New(Config{})
	var held, maxHeld int
	var mu sync.Mutex
	in := make(chan func(), 2*MaxInFlightPerKit)
	take := func(kit string) {
		release := s.kitSlot(kit)
		mu.Lock()
		held++
		maxHeld = max(maxHeld, held)
		mu.Unlock()
		in <- func() {
			mu.Lock()
			held--
			mu.Unlock()
			release()
		}
	}
	for range MaxInFlightPerKit + 10 {
		go take("kit-a")
	}
	var releases []func()
	for range MaxInFlightPerKit {
		releases = append(releases, <-in)
	}
	t.Run("the 51st delivery of a Kit waits", func(t *testing.T) {
		select {
		case r := <-in:
			releases = append(releases, r)
			t.Fatalf("%d deliveries of one Kit in flight", MaxInFlightPerKit+1)
		case <-time.After(100 * time.Millisecond): // an absence: nothing to wait for
		}
	})
	t.Run("another Kit's delivery does not wait", func(t *testing.T) {
		go take("kit-b")
		releases = append(releases, <-in)
	})
	t.Run("a slot released lets the next in", func(t *testing.T) {
		releases[0]()
		releases = append(releases[1:], <-in)
	})
	for _, r := range releases {
		r()
	}
	for range 9 {
		(<-in)()
	}
	if maxHeld != MaxInFlightPerKit+1 { // 50 of kit-a and kit-b's one
		t.Fatalf("at most %d held at once, want %d", maxHeld, MaxInFlightPerKit+1)
	}
}

// Retries carry the failed attempts and the last failure's reason; a
// redelivery its attempts so far and the reason redelivery.
func TestRetryHeaders(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ev          *kitpb.Event
		num, reason string
	}{
		{"a first attempt has none", &kitpb.Event{}, "", ""},
		{"a retry counts the failed attempts and names the last reason", &kitpb.Event{Attempts: 2, RetryReason: ReasonTimeout}, "2", ReasonTimeout},
		{"a redelivery counts every attempt and says redelivery", &kitpb.Event{Attempts: 1, RetryReason: ReasonHTTP, Redelivery: true}, "1", ReasonRedelivery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if num, reason := retryHeaders(tc.ev); num != tc.num || reason != tc.reason {
				t.Fatalf("retryHeaders = %q, %q; want %q, %q", num, reason, tc.num, tc.reason)
			}
		})
	}
}
