package loglimit_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/loglimit"
)

// TestLimiter: a flood of warnings writes Burst lines per window, then one
// line that counts the rest.
func TestLimiter(t *testing.T) {
	var logs bytes.Buffer
	clk := clock.NewTest()
	l := loglimit.New(slog.New(slog.NewTextHandler(&logs, nil)), clk)
	for range 1000 {
		l.Warn("peer: refused")
	}
	if n := strings.Count(logs.String(), "peer: refused"); n != loglimit.Burst {
		t.Fatalf("%d lines in one window, want %d", n, loglimit.Burst)
	}
	clk.Advance(loglimit.Window)
	l.Warn("peer: refused")
	if !strings.Contains(logs.String(), "warnings suppressed") || !strings.Contains(logs.String(), "count=980") {
		t.Fatalf("the suppressed lines were not counted: %q", logs.String())
	}
	if n := strings.Count(logs.String(), "peer: refused"); n != loglimit.Burst+1 {
		t.Fatalf("%d lines, want %d after the window", n, loglimit.Burst+1)
	}
}
