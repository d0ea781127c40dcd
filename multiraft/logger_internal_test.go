package multiraft

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// raft's messages reach the node's log: its chatter at debug, its warnings
// and errors as such, but its warnings at debug once the node is leaving
// (a drain), when a leader losing its quorum is the other nodes stopping.
func TestRaftLoggerLevels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leaving bool
		log     func(raftLogger)
		want    string
	}{
		{"chatter is debug", false, func(r raftLogger) { r.Infof("became follower at term %d", 3) }, "level=DEBUG"},
		{"a warning is a warning", false, func(r raftLogger) { r.Warningf("%x stepped down to follower since quorum is not active", 1) }, "level=WARN"},
		{"a warning while leaving is debug", true, func(r raftLogger) { r.Warningf("%x stepped down to follower since quorum is not active", 1) }, "level=DEBUG"},
		{"an error while leaving is still an error", true, func(r raftLogger) { r.Errorf("%x cannot step", 1) }, "level=ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var leaving atomic.Bool
			leaving.Store(tc.leaving)
			tc.log(raftLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), leaving: &leaving})
			if got := buf.String(); !strings.Contains(got, tc.want) {
				t.Fatalf("logged %q, want %s", got, tc.want)
			}
		})
	}
}
