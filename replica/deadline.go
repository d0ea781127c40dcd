package replica

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlines hands every commit a context that ends between timeout and
// timeout+slot after the commit began. Commits that begin within one slot
// share a context, and with it one runtime timer: a timer armed and
// stopped for every commit was a few percent of a replicated post's CPU
// (bench/README.md, "One timer for the commits of a slot").
type deadlines struct {
	timeout, slot time.Duration
	cur           atomic.Pointer[deadline]
	mu            sync.Mutex // one new deadline at a time
}

// deadline is a shared context and the time it ends.
type deadline struct {
	ctx    context.Context
	cancel context.CancelFunc // never called: commits hold ctx until at, when it ends by itself
	at     time.Time
}

// slotsPerTimeout is how much later than timeout a commit may end: a
// 32nd of it (160 ms of the default 5 s).
const slotsPerTimeout = 32

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, slot: max(timeout/slotsPerTimeout, time.Millisecond)}
}

// after returns a context that ends no sooner than timeout after now and
// no later than timeout+slot after it.
func (d *deadlines) after(now time.Time) context.Context {
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
	d.cur.Store(&deadline{ctx: ctx, cancel: cancel, at: at})
	return ctx
}
