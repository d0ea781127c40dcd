package membership

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/loglimit"
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
		{"an ack on a closed socket while stopping, naming its sender, is a detail of the stop",
			"[ERR] memberlist: Failed to send ack: write udp 127.0.0.1:8181->127.0.0.1:8182: use of closed network connection from=127.0.0.1:8182", true, false, "level=DEBUG"},
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

// An operator reads the cluster's membership in the log: joins and leaves
// at info, a member gossip declared dead at warn, unless this node is
// leaving with its peers; its own changes and republished metas are no
// lines.
func TestMemberChangesAreLogged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    EventKind
		member  string
		leaving bool
		want    string // "": no line
	}{
		{"a member that joins is told", EventJoin, "n2", false, `level=INFO msg="member joined" member=n2`},
		{"a member that leaves is told", EventLeave, "n2", false, `level=INFO msg="member left" member=n2`},
		{"a member declared dead is warned of", EventFail, "n2", false, `level=WARN msg="member failed" member=n2`},
		{"a member dead while this node leaves is told", EventFail, "n2", true, `level=INFO msg="member failed" member=n2`},
		{"a republished meta is no line", EventUpdate, "n2", false, ""},
		{"this node's own change is no line", EventJoin, "n1", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &testLog{}
			m := &Membership{name: "n1", log: slog.New(slog.NewTextHandler(l, nil))}
			if tc.leaving {
				m.Leaving()
			}
			m.logChange(tc.kind, Node{Name: tc.member, Addr: "127.0.0.1:7946"})
			got := l.String()
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("logged %q, want %q", got, tc.want)
			}
		})
	}
}

// Anyone who reaches the gossip port can make memberlist complain: a
// packet that does not decrypt is an error line each. They are bounded as
// the peer transport's are (internal/loglimit): a flood writes a burst,
// then a count of what was left out.
func TestMemberlistsComplaintsAreBounded(t *testing.T) {
	l := &testLog{}
	logger := slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := &Membership{name: "n1", log: logger, warn: loglimit.New(logger, clock.NewTest()),
		stopping: make(chan struct{}), notes: notices{signal: make(chan struct{}, 1)}}
	const sent = 500
	for range sent {
		if _, err := (&logWriter{m: m}).Write([]byte("[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:4242\n")); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.count("Decrypt packet failed"); got > loglimit.Burst {
		t.Fatalf("%d garbage packets wrote %d lines, want at most the burst of %d", sent, got, loglimit.Burst)
	}
	if _, err := (&logWriter{m: m}).Write([]byte("[INFO] memberlist: a line that is no complaint\n")); err != nil {
		t.Fatal(err)
	}
	if !l.contains("a line that is no complaint") {
		t.Fatal("an info line was held back with the complaints")
	}
}

// A flood of garbage packets must not hide memberlist's word of a name
// two nodes share: kitd has no ConflictDelegate, so that line is the
// operator's only sign. Only lines about what a sender sent are bounded.
func TestAGarbageFloodDoesNotHideANameConflict(t *testing.T) {
	l := &testLog{}
	logger := slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := &Membership{name: "n1", log: logger, warn: loglimit.New(logger, clock.NewTest()),
		stopping: make(chan struct{}), notes: notices{signal: make(chan struct{}, 1)}}
	for range 100 {
		if _, err := (&logWriter{m: m}).Write([]byte("[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=203.0.113.9:4242\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (&logWriter{m: m}).Write([]byte("[ERR] memberlist: Conflicting address for n2. Mine: 10.0.0.2:7946 Theirs: 10.0.0.3:7946 Old state: alive\n")); err != nil {
		t.Fatal(err)
	}
	if !l.contains("Conflicting address for n2") {
		t.Fatal("memberlist's name conflict was not logged after a flood of garbage packets")
	}
}
