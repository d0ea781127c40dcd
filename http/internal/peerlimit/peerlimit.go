// Package peerlimit keeps token buckets per source address for the front
// end's unauthenticated routes (incoming webhooks, kit.access), where there
// is no installation or token to count against. Only failures take a
// token; an address whose bucket is empty is refused until it refills.
//
// Its memory is fixed when a Table is made: a set-associative array of
// buckets, never a map that grows with the addresses seen, so that the
// defence against a flood of requests cannot itself be flooded. It counts
// on one node (no cluster hop): a scanner spread over n nodes gets n times
// the rate, which is still a few requests a second.
//
// It never reads a header: the address it is given is the client's as
// http/clientaddr says (the TCP peer's, or behind a trusted proxy the
// client's that its X-Forwarded-For names).
package peerlimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/limits"
)

// Key is who a bucket counts: an IPv4 address, or the /64 prefix of an
// IPv6 one (one host usually holds a whole /64, so counting its addresses
// one by one would give it 2^64 buckets).
type Key [16]byte

// KeyOf is the Key of a.
func KeyOf(a netip.Addr) Key {
	a = a.Unmap()
	b := a.As16()
	if a.Is4() {
		return b // IPv4-mapped, apart from any IPv6 /64
	}
	var k Key
	copy(k[:8], b[:8])
	return k
}

// ways is how many addresses share a set. A new address evicts within its
// set only, so four ways let a few busy addresses share one without
// pushing each other out.
const ways = 4

type entry struct {
	key  Key
	b    limits.Bucket
	seen int64 // last failure, unix nanoseconds; 0: the entry is free
}

type set struct {
	// refusing is until when (unix nanoseconds) an entry of the set may
	// refuse: the check of a request reads only it, without the lock,
	// unless an address of this set was refused lately.
	refusing atomic.Int64
	mu       sync.Mutex
	e        [ways]entry
}

// Table is the buckets of one rate for up to a fixed number of addresses.
// It is safe for concurrent use.
type Table struct {
	rate limits.Rate
	seed maphash.Seed // random: an attacker cannot aim its addresses at one set
	sets []set
}

// New returns a table of rate r with room for at least entries addresses
// (rounded up to a power of two). Its memory is about 64 bytes an entry,
// allocated now.
func New(r limits.Rate, entries int) *Table {
	n := 1
	for n*ways < entries {
		n <<= 1
	}
	return &Table{rate: r, seed: maphash.MakeSeed(), sets: make([]set, n)}
}

func (t *Table) set(k Key) *set {
	return &t.sets[maphash.Comparable(t.seed, k)&uint64(len(t.sets)-1)]
}

// Check reports whether k may be served at now: false when its bucket is
// empty, with the decision for the 429. It takes nothing, allocates nothing
// and, unless an address of k's set was refused lately, takes no lock.
func (t *Table) Check(k Key, now time.Time) (limits.Decision, bool) {
	s := t.set(k)
	if now.UnixNano() >= s.refusing.Load() {
		return limits.Decision{}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.e {
		if e := &s.e[i]; e.seen != 0 && e.key == k {
			d := e.b.Peek(t.rate, now)
			return d, d.OK
		}
	}
	return limits.Decision{}, true
}

// Fail takes a token from k's bucket at now, for a failed request. An
// address not in the table takes a free entry of its set, or one whose
// bucket is full again (forgetting it changes nothing), or else the one
// that failed longest ago, whose bucket restarts full.
func (t *Table) Fail(k Key, now time.Time) {
	s := t.set(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.find(k, t.rate, now)
	e.b.Take(t.rate, now)
	e.seen = max(now.UnixNano(), 1)
	if d := e.b.Peek(t.rate, now); !d.OK {
		// RetryAfter is rounded up to whole seconds: the hint may outlast
		// the refusal, never the other way round.
		until := now.Add(time.Duration(d.RetryAfter) * time.Second).UnixNano()
		if until > s.refusing.Load() {
			s.refusing.Store(until)
		}
	}
}

// find returns k's entry, making one if needed. s.mu is held.
func (s *set) find(k Key, r limits.Rate, now time.Time) *entry {
	var victim *entry
	worst := 3
	for i := range s.e {
		e := &s.e[i]
		if e.seen != 0 && e.key == k {
			return e
		}
		rank := 2 // an address still counted
		switch {
		case e.seen == 0:
			rank = 0
		case e.b.Full(r, now):
			rank = 1
		}
		if rank < worst || rank == worst && e.seen < victim.seen {
			victim, worst = e, rank
		}
	}
	*victim = entry{key: k, b: limits.NewBucket(r, now)}
	return victim
}

// Len counts the addresses the table holds (for tests).
func (t *Table) Len() int {
	n := 0
	for i := range t.sets {
		s := &t.sets[i]
		s.mu.Lock()
		for _, e := range s.e {
			if e.seen != 0 {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}
