package peer

import (
	"log/slog"
	"sync"
	"time"

	"github.com/kitd/kitd/internal/clock"
)

// logLimiter writes at most logBurst warnings per logWindow and counts the
// rest, so that a peer sending garbage in a loop cannot fill the disk with
// the receiver's complaints about it.
type logLimiter struct {
	log   *slog.Logger
	clock clock.Clock

	mu         sync.Mutex
	start      time.Time // of the current window
	n          int       // lines written in it
	suppressed int       // lines not written in it
}

const (
	logBurst  = 20
	logWindow = 10 * time.Second
)

func (l *logLimiter) warn(msg string, args ...any) {
	now := l.clock.Now()
	l.mu.Lock()
	if now.Sub(l.start) >= logWindow {
		if l.suppressed > 0 {
			defer l.log.Warn("peer: warnings suppressed", "count", l.suppressed)
		}
		l.start, l.n, l.suppressed = now, 0, 0
	}
	if l.n >= logBurst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.n++
	l.mu.Unlock()
	l.log.Warn(msg, args...)
}
