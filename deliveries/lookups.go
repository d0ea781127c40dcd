package deliveries

import (
	"sync"
	"time"
)

// lookupTTL bounds how long the sender keeps what it looked up of an
// installation or a Kit. Invalidations (actors.TargetCache) drop an entry
// the moment it changes; the bound is for what no invalidation announces
// (a previous signing secret's overlap running out) and for a member that
// missed one.
const lookupTTL = time.Minute

// lookups keeps values read from actors, by id, for lookupTTL on the
// service clock or until forgotten. Each take of a quiet installation
// looked its target up again: two actor calls, one of them to the Kit's
// partition, usually another node's.
type lookups[V any] struct {
	mu      sync.Mutex
	entries map[string]lookup[V]
	// gen counts invalidations: a lookup that began before one stores
	// nothing, since what it read may be what the invalidation replaced.
	gen     uint64
	sweepAt int // sweep expired entries when the map reaches this size
}

type lookup[V any] struct {
	v     V
	until time.Time
}

// minSweep is the size below which expired entries are left until their
// next lookup.
const minSweep = 1024

// of returns the value kept for id, else what read returns, which is kept
// when read says so and no invalidation came while it read.
func (l *lookups[V]) of(id string, now time.Time, read func() (v V, keep bool, err error)) (V, error) {
	v, gen, ok := l.get(id, now)
	if ok {
		return v, nil
	}
	v, keep, err := read()
	if err == nil && keep {
		l.put(id, v, gen, now)
	}
	return v, err
}

// get returns the value kept for id, or the generation to store a value
// read now with (put).
func (l *lookups[V]) get(id string, now time.Time) (v V, gen uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[id]
	if ok && now.Before(e.until) {
		return e.v, 0, true
	}
	var zero V
	return zero, l.gen, false
}

// put keeps v for id unless an invalidation came since get gave gen.
func (l *lookups[V]) put(id string, v V, gen uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.gen {
		return
	}
	if l.entries == nil {
		l.entries = make(map[string]lookup[V])
	}
	if len(l.entries) >= max(l.sweepAt, minSweep) {
		for k, e := range l.entries {
			if !now.Before(e.until) {
				delete(l.entries, k)
			}
		}
		l.sweepAt = 2 * len(l.entries)
	}
	l.entries[id] = lookup[V]{v: v, until: now.Add(lookupTTL)}
}

// forget drops what is kept for id.
func (l *lookups[V]) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	delete(l.entries, id)
}
