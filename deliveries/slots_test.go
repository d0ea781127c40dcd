package deliveries

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/proto/kitpb"
)

// docs/api.md "Limits": at most 50 deliveries of one Kit in flight at once,
// whatever its installations; other Kits are not held up. (The e2e suite
// cannot hold 50 of one Kit: a Kit installed in several workspaces must be
// published with verified endpoint hosts, and a loopback receiver has
// none; it tests the 10 per installation.)
func TestKitSlots(t *testing.T) {
	s := New(Config{})
	got := make(chan func(), 2*MaxInFlightPerKit) // the release of each slot taken
	take := func(kit string) { got <- s.kitSlot(kit) }
	var held []func()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	for range MaxInFlightPerKit + 1 {
		go take("kit-a")
	}
	for range MaxInFlightPerKit {
		held = append(held, <-got)
	}
	select {
	case release := <-got:
		held = append(held, release)
		t.Fatalf("%d deliveries of one Kit in flight", MaxInFlightPerKit+1)
	case <-time.After(100 * time.Millisecond): // an absence: nothing to wait for
	}
	go take("kit-b")
	held = append(held, <-got) // another Kit does not wait
	held[0]()
	held = append(held[1:], <-got) // a slot released lets the 51st in
}

// A Kit's 50 in flight count across the nodes that send deliveries
// (SPEC.md: limits count across all servers): each node takes its share,
// rounded down, so that the nodes together stay within 50 (past 50 nodes,
// one each).
func TestKitSlotsAreSharedAmongTheNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		share int
	}{
		{"a node alone takes all 50", 1, 50},
		{"two nodes take 25 each", 2, 25},
		{"three nodes take 16 each, 48 together", 3, 16},
		{"seven nodes take 7 each, 49 together", 7, 7},
		{"more nodes than slots take one each", 64, 1},
		{"no count known is a node alone", 0, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{})
			s.ShareKitSlots(func() int { return tc.nodes })
			var held []func()
			for range tc.share {
				held = append(held, s.kitSlot("kit"))
			}
			got := make(chan func(), 1)
			go func() { got <- s.kitSlot("kit") }()
			select {
			case release := <-got:
				release()
				t.Fatalf("%d deliveries of one Kit in flight on a node of %d, want %d", tc.share+1, tc.nodes, tc.share)
			case <-time.After(100 * time.Millisecond): // an absence: nothing to wait for
			}
			held[0]()
			(<-got)() // a slot given back lets the next in
			for _, release := range held[1:] {
				release()
			}
		})
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

// A node's share of a Kit's 50 grows when a node leaves (ShareKitSlots):
// the deliveries waiting for a slot take the room it adds as soon as one
// of them is woken, each waking the next while room is left. Only the one
// a slot given back woke took a slot before, and the room the share added
// stayed unused while the others waited for more slots to be given back.
func TestAShareThatGrewLetsEveryWaiterIn(t *testing.T) {
	const waiters = 10
	s := New(Config{})
	var nodes atomic.Int64
	nodes.Store(2)
	s.ShareKitSlots(func() int { return int(nodes.Load()) })
	var held []func()
	for range MaxInFlightPerKit / 2 {
		held = append(held, s.kitSlot("kit"))
	}
	took := make(chan func(), waiters)
	for range waiters {
		go func() { took <- s.kitSlot("kit") }()
	}
	waiting(t, waiters)
	nodes.Store(1) // the other node left: this one's share is all 50
	held[0]()
	for range waiters {
		select {
		case release := <-took:
			held = append(held, release)
		case <-time.After(eventually.Within):
			t.Fatalf("%d of %d waiters took a slot once the share grew from %d to %d", len(held)-MaxInFlightPerKit/2+1, waiters, MaxInFlightPerKit/2, MaxInFlightPerKit)
		}
	}
	for _, release := range held[1:] {
		release()
	}
}
