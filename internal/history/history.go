// Package history keeps the newest messages of conversations in memory,
// each as the JSON the API answers (internal/msgjson), so that a page of
// history is an assembly of bytes already encoded. Each conversation actor
// owns one Window; one Budget per node bounds the bytes every window keeps
// together and empties the least recently used windows beyond it.
//
// It never reads storage and never decides who may see a page: the
// conversation actor checks the caller, fills its window from what it read
// from the store or committed to it, and reads the store whenever the
// window cannot answer a page alone.
package history

import (
	"sync"
	"sync/atomic"

	"github.com/kitd/kitd/internal/metrics"
)

// Defaults of one window's bounds. A conversation's window holds at most
// DefaultMaxMessages, and at most DefaultMaxWindowBytes of them: five
// pages of the largest page size (200), or about 3,000 messages of a
// typical 350 bytes, while a single conversation full of 8,000-character
// messages still leaves the budget to the others.
const (
	DefaultMaxMessages    = 1000
	DefaultMaxWindowBytes = 1 << 20
)

// What a window counts beyond its messages' JSON: its slice of entries
// (entrySize a slot) and a fixed part for the window itself.
const (
	entrySize      = 32
	windowOverhead = 128
)

// Options configures a Budget.
type Options struct {
	// Bytes bounds what every window of the node keeps, together.
	Bytes int64
	// MaxMessages bounds one window; 0: DefaultMaxMessages.
	MaxMessages int
	// MaxWindowBytes bounds one window's bytes; 0: DefaultMaxWindowBytes.
	MaxWindowBytes int64
}

// Budget is the node's one accountant of what the windows keep. Its
// counters are what /metrics shows.
type Budget struct {
	limit       int64
	maxMessages int
	maxBytes    int64

	total atomic.Int64 // bytes kept by every window, exact once each change is counted

	mu         sync.Mutex
	head, tail *Window // windows holding bytes, most recently used first
	listed     int

	hits, misses, evictions metrics.Counter
}

// NewBudget returns the node's budget; nil when o.Bytes is not positive:
// then nothing is kept, and every Window of it is nil (every page misses).
func NewBudget(o Options) *Budget {
	if o.Bytes <= 0 {
		return nil
	}
	b := &Budget{limit: o.Bytes, maxMessages: o.MaxMessages, maxBytes: o.MaxWindowBytes}
	if b.maxMessages <= 0 {
		b.maxMessages = DefaultMaxMessages
	}
	if b.maxBytes <= 0 {
		b.maxBytes = DefaultMaxWindowBytes
	}
	return b
}

// NewWindow returns an empty window counted by b; nil for a nil budget.
func (b *Budget) NewWindow() *Window {
	if b == nil {
		return nil
	}
	return &Window{b: b}
}

// Bytes is what every window keeps now.
func (b *Budget) Bytes() int64 {
	if b == nil {
		return 0
	}
	return b.total.Load()
}

// Stats are the budget's counters.
type Stats struct {
	Bytes, Limit            int64
	Windows                 int
	Hits, Misses, Evictions uint64
}

// Stats returns the counters now.
func (b *Budget) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	b.mu.Lock()
	listed := b.listed
	b.mu.Unlock()
	return Stats{
		Bytes: b.total.Load(), Limit: b.limit, Windows: listed,
		Hits: b.hits.Load(), Misses: b.misses.Load(), Evictions: b.evictions.Load(),
	}
}

// Collect writes the budget's series (a nil budget writes zeros, so that
// a node with the cache off shows it).
func (b *Budget) Collect(w *metrics.Writer) {
	s := b.Stats()
	w.Gauge("kitd_history_cache_bytes", "Bytes the conversations keep in memory of their newest messages (--cache-bytes bounds them).", uint64(max(s.Bytes, 0)))
	w.Gauge("kitd_history_cache_limit_bytes", "The bound of kitd_history_cache_bytes (--cache-bytes; 0: nothing is kept).", uint64(s.Limit))
	w.Gauge("kitd_history_cache_windows", "Conversations keeping messages in memory.", uint64(s.Windows))
	w.Counter("kitd_history_cache_hits_total", "History pages answered from memory.", s.Hits)
	w.Counter("kitd_history_cache_misses_total", "History pages read from the store: older than what memory keeps, or kept nothing yet.", s.Misses)
	w.Counter("kitd_history_cache_evictions_total", "Windows emptied to stay within --cache-bytes, least recently used first.", s.Evictions)
}

// used marks w the most recently used window, then empties the least
// recently used ones while the budget is exceeded (w too, when it alone
// exceeds it). It is called with no window's lock held: it takes the
// lock of the windows it empties.
func (b *Budget) used(w *Window) {
	b.mu.Lock()
	if w.listed {
		b.unlink(w)
	}
	w.next = b.head
	if b.head != nil {
		b.head.prev = w
	}
	b.head = w
	if b.tail == nil {
		b.tail = w
	}
	w.listed = true
	b.listed++
	b.mu.Unlock()
	b.shrink()
}

// shrink empties the least recently used windows until the budget holds.
// Two callers at once may empty one window more than needed; never one
// too few.
func (b *Budget) shrink() {
	for b.total.Load() > b.limit {
		b.mu.Lock()
		v := b.tail
		if v != nil {
			b.unlink(v)
		}
		b.mu.Unlock()
		if v == nil {
			return
		}
		v.mu.Lock()
		v.unload()
		v.mu.Unlock()
		b.evictions.Inc()
	}
}

// forget takes w off the list (it keeps nothing any more).
func (b *Budget) forget(w *Window) {
	b.mu.Lock()
	if w.listed {
		b.unlink(w)
	}
	b.mu.Unlock()
}

func (b *Budget) unlink(w *Window) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		b.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		b.tail = w.prev
	}
	w.prev, w.next, w.listed = nil, nil, false
	b.listed--
}
