package peerlimit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/limits"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// burst2 refuses after two failures and takes a second to give one back.
var burst2 = limits.Rate{Name: "test", Capacity: 2, Refill: 1, Window: time.Second}

func key(s string) Key { return KeyOf(netip.MustParseAddr(s)) }

func TestTable(t *testing.T) {
	a, b := key("192.0.2.1"), key("192.0.2.2")
	tests := []struct {
		name  string
		fails []Key         // failures at t0
		check Key           // checked at t0+at
		at    time.Duration // after t0
		ok    bool
	}{
		{"an address that never failed is served", nil, a, 0, true},
		{"an address below its burst of failures is served", []Key{a}, a, 0, true},
		{"an address whose bucket is empty is refused", []Key{a, a}, a, 0, false},
		{"more failures than the burst still refuse", []Key{a, a, a, a}, a, 0, false},
		{"another address is not refused", []Key{a, a}, b, 0, true},
		{"a refused address is served again once a token is back", []Key{a, a}, a, time.Second, true},
		{"the refusal lasts until the token is back", []Key{a, a}, a, 999 * time.Millisecond, false},
		{"IPv6 addresses of one /64 share a bucket", []Key{key("2001:db8::1"), key("2001:db8::2")}, key("2001:db8::ffff:1"), 0, false},
		{"IPv6 addresses of another /64 do not", []Key{key("2001:db8::1"), key("2001:db8::2")}, key("2001:db8:0:1::1"), 0, true},
		{"an IPv4-mapped IPv6 address is its IPv4 address", []Key{a, a}, key("::ffff:192.0.2.1"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := New(burst2, 64)
			for _, k := range tc.fails {
				tb.Fail(k, t0)
			}
			d, ok := tb.Check(tc.check, t0.Add(tc.at))
			if ok != tc.ok {
				t.Fatalf("Check = %v, want %v", ok, tc.ok)
			}
			if !ok && (d.RetryAfter < 1 || d.Policy != burst2.Name) {
				t.Fatalf("a refusal needs RetryAfter and its policy: %+v", d)
			}
		})
	}
}

// The table never holds more addresses than it was made for, however many
// fail: what an attacker spreading over many addresses gets is that the
// entries failed longest ago are forgotten (their buckets restart full),
// never more memory.
func TestTableIsBounded(t *testing.T) {
	tb := New(burst2, 64)
	for i := range 20_000 {
		tb.Fail(key(fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)), t0.Add(time.Duration(i)))
	}
	if n := tb.Len(); n > 64 {
		t.Fatalf("the table holds %d addresses, made for 64", n)
	}
}

func TestTableEviction(t *testing.T) {
	// One set of four entries: every address shares it.
	addrs := []Key{key("192.0.2.1"), key("192.0.2.2"), key("192.0.2.3"), key("192.0.2.4")}
	fresh := key("192.0.2.5")
	slow := limits.Rate{Name: "slow", Capacity: 10, Refill: 1, Window: time.Second}
	fail := func(tb *Table, k Key, n int, at time.Duration) {
		for range n {
			tb.Fail(k, t0.Add(at))
		}
	}
	tests := []struct {
		name    string
		setup   func(tb *Table)
		at      time.Duration // when fresh fails
		evicted Key
	}{
		{"a free entry is taken first", func(tb *Table) {
			fail(tb, addrs[0], 1, 0)
		}, time.Millisecond, Key{}},
		{"then the address that failed longest ago", func(tb *Table) {
			for i, k := range addrs {
				fail(tb, k, 3, time.Duration(i)*time.Millisecond)
			}
		}, 10 * time.Millisecond, addrs[0]},
		{"but an address whose bucket is full again goes before an older counted one", func(tb *Table) {
			fail(tb, addrs[0], 9, 0) // 9 tokens short: counted until 9 s
			fail(tb, addrs[1], 1, 5*time.Second)
			fail(tb, addrs[2], 9, 0)
			fail(tb, addrs[3], 9, 0)
		}, 6100 * time.Millisecond, addrs[1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := New(slow, ways)
			tc.setup(tb)
			fail(tb, fresh, 1, tc.at)
			if !holds(tb, fresh) {
				t.Fatal("the new address is not counted")
			}
			for _, k := range addrs {
				if k != tc.evicted && tb.Len() == ways && !holds(tb, k) {
					t.Fatalf("%v was evicted, want %v", k, tc.evicted)
				}
			}
			if tc.evicted != (Key{}) && holds(tb, tc.evicted) {
				t.Fatalf("%v was kept", tc.evicted)
			}
		})
	}
}

// holds reports whether the table counts k.
func holds(tb *Table, k Key) bool {
	s := tb.set(k)
	for _, e := range s.e {
		if e.seen != 0 && e.key == k {
			return true
		}
	}
	return false
}

// Check is on the path of every webhook post.
func TestCheckAllocatesNothing(t *testing.T) {
	tb := New(burst2, 64)
	a := key("192.0.2.1")
	tb.Fail(a, t0)
	tb.Fail(a, t0)
	for _, k := range []Key{a, key("192.0.2.2")} {
		if n := testing.AllocsPerRun(100, func() { tb.Check(k, t0) }); n != 0 {
			t.Fatalf("Check allocates %v times", n)
		}
	}
}
