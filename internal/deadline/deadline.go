// Package deadline hands out contexts that end a set time after a call
// begins, one runtime timer for all the calls that begin within a short
// slot of each other. A timer armed and stopped for every replicated
// commit or forwarded request was a few percent of its CPU
// (bench/README.md, "One timer for the commits of a slot").
package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Shared hands every call a context that ends between timeout and
// timeout+slot after the call began. Calls that begin within one slot
// share a context, and with it one timer. The contexts are never
// cancelled before their deadline: a caller that must stop sooner derives
// its own.
type Shared struct {
	timeout, slot time.Duration
	cur           atomic.Pointer[slotContext]
	mu            sync.Mutex // one new deadline at a time
}

// slotContext is a shared context and the time it ends.
type slotContext struct {
	ctx    context.Context
	cancel context.CancelFunc // never called: calls hold ctx until at, when it ends by itself
	at     time.Time
}

// slotsPerTimeout is how much later than timeout a call may end: a
// 32nd of it.
const slotsPerTimeout = 32

// NewShared returns the contexts of calls that end timeout after they
// begin, and up to a 32nd of it later.
func NewShared(timeout time.Duration) *Shared {
	return &Shared{timeout: timeout, slot: max(timeout/slotsPerTimeout, time.Millisecond)}
}

// Timeout is the time a call is given.
func (d *Shared) Timeout() time.Duration { return d.timeout }

// After returns a context that ends no sooner than timeout after now and
// no later than timeout+slot after it.
func (d *Shared) After(now time.Time) context.Context {
	want := now.Add(d.timeout)
	if c := d.cur.Load(); c != nil && !c.at.Before(want) {
		return c.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.cur.Load(); c != nil && !c.at.Before(want) {
		return c.ctx
	}
	at := want.Add(d.slot)
	ctx, cancel := context.WithDeadline(context.Background(), at)
	d.cur.Store(&slotContext{ctx: ctx, cancel: cancel, at: at})
	return ctx
}
