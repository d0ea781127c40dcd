// Package loglimit bounds the warnings that bad input from the network can
// make a node write: a peer sending garbage in a loop must not fill the
// disk with the receiver's complaints about it. It is shared by the
// node-to-node transport (cluster/peer) and the raft messages it carries
// (cluster/raftnet).
package loglimit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kitd/kitd/internal/clock"
)

const (
	// Burst is how many warnings a Limiter writes per Window; the rest of
	// the window's warnings are counted, and the count is written when the
	// next window opens.
	Burst  = 20
	Window = 10 * time.Second
)

// Limiter writes at most Burst warnings per Window. It is safe for
// concurrent use.
type Limiter struct {
	log   *slog.Logger
	clock clock.Clock

	mu         sync.Mutex
	start      time.Time // of the current window
	n          int       // lines written in it
	suppressed int       // lines not written in it
}

// New returns a limiter writing to log, its windows timed by clk (nil: the
// system clock).
func New(log *slog.Logger, clk clock.Clock) *Limiter {
	if clk == nil {
		clk = clock.System()
	}
	return &Limiter{log: log, clock: clk}
}

// Warn writes msg as a warning unless the window's burst is spent.
func (l *Limiter) Warn(msg string, args ...any) { l.Log(slog.LevelWarn, msg, args...) }

// Log writes msg at level unless the window's burst is spent.
func (l *Limiter) Log(level slog.Level, msg string, args ...any) {
	now := l.clock.Now()
	l.mu.Lock()
	if now.Sub(l.start) >= Window {
		if l.suppressed > 0 {
			defer l.log.Warn("warnings suppressed", "count", l.suppressed)
		}
		l.start, l.n, l.suppressed = now, 0, 0
	}
	if l.n >= Burst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.n++
	l.mu.Unlock()
	l.log.Log(context.Background(), level, msg, args...)
}
