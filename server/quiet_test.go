package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A library's chatter below warn is dropped; its warnings are not.
func TestQuieter(t *testing.T) {
	var out bytes.Buffer
	l := quieter(slog.New(slog.NewTextHandler(&out, nil)).With("node", "n1"), slog.LevelWarn)
	l.Info("chatter")
	l.Warn("trouble")
	if s := out.String(); strings.Contains(s, "chatter") || !strings.Contains(s, "trouble") || !strings.Contains(s, "node=n1") {
		t.Fatalf("logged %q", s)
	}
}
