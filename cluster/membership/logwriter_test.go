package membership

import (
	"log/slog"
	"strings"
	"testing"
)

// memberlist's log lines reach the node's log at their own level, but for
// the sends on a socket it closed while stopping: those are part of a
// clean stop.
func TestLogWriterLevels(t *testing.T) {
	const udpProbes = "[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed, network may be misconfigured"
	const closedSend = "[ERR] memberlist: Failed to send gossip to 127.0.0.1:9181: write udp 127.0.0.1:9182->127.0.0.1:9181: use of closed network connection"
	for _, tc := range []struct {
		name     string
		line     string
		stopping bool
		leaving  bool
		want     string
	}{
		{"an error is an error", "[ERR] memberlist: Failed to send gossip to 127.0.0.1:9181: i/o timeout", false, false, "level=ERROR"},
		{"a warning is a warning", "[WARN] memberlist: Refuting a suspect message", false, false, "level=WARN"},
		{"a closed socket while running is an error", closedSend, false, false, "level=ERROR"},
		{"a closed socket while stopping is a detail of the stop", closedSend, true, false, "level=DEBUG"},
		{"another error while stopping is still an error", "[ERR] memberlist: Failed to send gossip to 127.0.0.1:9181: i/o timeout", true, false, "level=ERROR"},
		{"a warning while leaving is a detail of the leave", udpProbes, false, true, "level=DEBUG"},
		{"a restarted node refuting its own last leave is a detail of the restart", "[WARN] memberlist: Refuting a dead message (from: n1)", false, false, "level=INFO"},
		{"refuting a death another member announced is a warning", "[WARN] memberlist: Refuting a dead message (from: n2)", false, false, "level=WARN"},
		{"an error while leaving is still an error", "[ERR] memberlist: Failed to send gossip to 127.0.0.1:9181: i/o timeout", false, true, "level=ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &testLog{}
			m := &Membership{
				name:     "n1",
				log:      slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})),
				stopping: make(chan struct{}),
				notes:    notices{signal: make(chan struct{}, 1)},
			}
			if tc.stopping {
				close(m.stopping)
			}
			if tc.leaving {
				m.Leaving()
			}
			if _, err := (&logWriter{m: m}).Write([]byte(tc.line + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := l.String(); !strings.Contains(got, tc.want) || strings.Contains(got, "[ERR]") {
				t.Fatalf("logged %q, want %s", got, tc.want)
			}
		})
	}
}
