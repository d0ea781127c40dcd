package peer

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogLimiter: a flood of refusals writes logBurst lines per window,
// then one line that counts the rest.
func TestLogLimiter(t *testing.T) {
	logs := &logBuffer{}
	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &logLimiter{log: slog.New(slog.NewTextHandler(logs, nil)), clock: clk}
	for range 1000 {
		l.warn("peer: refused")
	}
	if n := strings.Count(logs.String(), "peer: refused"); n != logBurst {
		t.Fatalf("%d lines in one window, want %d", n, logBurst)
	}
	clk.now = clk.now.Add(logWindow)
	l.warn("peer: refused")
	if !strings.Contains(logs.String(), "warnings suppressed") || !strings.Contains(logs.String(), "count=980") {
		t.Fatalf("the suppressed lines were not counted: %q", logs.String())
	}
	if n := strings.Count(logs.String(), "peer: refused"); n != logBurst+1 {
		t.Fatalf("%d lines, want %d after the window", n, logBurst+1)
	}
}
