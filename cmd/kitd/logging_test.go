package main

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
)

func TestLogFlags(t *testing.T) {
	tests := []struct {
		rule          string
		level, format string
		wantErr       string
		check         func(t *testing.T, out string)
	}{
		{"json writes one JSON object a line, naming the node", "info", "json", "", func(t *testing.T, out string) {
			var line map[string]any
			if err := json.Unmarshal([]byte(out), &line); err != nil {
				t.Fatalf("%v: %q", err, out)
			}
			if line["node"] != "n1" || line["msg"] != "hello" || line["k"] != "v" {
				t.Fatalf("line %v", line)
			}
		}},
		{"text writes key=value lines, naming the node", "info", "text", "", func(t *testing.T, out string) {
			if !strings.Contains(out, "node=n1") || !strings.Contains(out, "msg=hello") {
				t.Fatalf("line %q", out)
			}
		}},
		{"a level above info drops info lines", "warn", "json", "", func(t *testing.T, out string) {
			if out != "" {
				t.Fatalf("logged %q", out)
			}
		}},
		{"another format is refused", "info", "xml", "--log-format", nil},
		{"another level is refused", "loud", "json", "--log-level", nil},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var out logbuf.Buffer
			l, fw, err := newLogger(&out, tt.level, tt.format, "n1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l.Info("hello", "k", "v")
			fw.Close()
			tt.check(t, out.String())
		})
	}
}

// A line reaches the writer within the flush interval, without a Close.
func TestLogIsFlushedOnATimer(t *testing.T) {
	var out logbuf.Buffer
	fw := newFlushWriter(&out, logBufferSize, 10*time.Millisecond)
	defer fw.Close()
	slog.New(slog.NewJSONHandler(fw, nil)).Info("hello")
	eventually.True(t, "the line flushed", func() bool { return strings.Contains(out.String(), "hello") })
}

// The front end's request lines follow the logger: written in its format
// while info is on, none at all (nil) above it.
func TestRequestLogFollowsTheLogger(t *testing.T) {
	tests := []struct {
		rule, level, format string
		wantLines           bool
	}{
		{"info has request lines", "info", "json", true},
		{"debug has request lines", "debug", "text", true},
		{"warn has none", "warn", "json", false},
		{"error has none", "error", "text", false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var out logbuf.Buffer
			l, fw, err := newLogger(&out, tt.level, tt.format, "n1")
			if err != nil {
				t.Fatal(err)
			}
			defer fw.Close()
			rl, err := requestLog(l, fw, tt.format, "n1")
			if err != nil {
				t.Fatal(err)
			}
			if (rl != nil) != tt.wantLines {
				t.Fatalf("request log %v, want one: %v", rl, tt.wantLines)
			}
		})
	}
}
