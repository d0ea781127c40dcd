package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// docs/decisions.md "Logs": a token is never in a line, at any level. A
// request fasthttp cannot parse is logged at debug level, and its parse
// error quotes what it could not read: a header line, or the whole head.
func TestARequestHeadThatCannotBeReadLogsNoToken(t *testing.T) {
	const secret = "kop_THISISTHEOPERATORTOKENANDMUSTNEVERBELOGGED0"
	for _, tc := range []struct{ name, head string }{
		{"a header line without a colon", "GET /ops/v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nBad Header Line\r\n\r\n"},
		{"a token in the line without a colon", "GET /ops/v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization Bearer " + secret + "\r\n\r\n"},
		{"a length that is no number", "GET /ops/v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nContent-Length: abc\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out logbuf.Buffer
			srv := New(Config{Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			sendHead(t, srv, tc.head)
			eventually.True(t, "fasthttp's line logged", func() bool { return strings.Contains(out.String(), "error when") })
			if log := out.String(); strings.Contains(log, secret) || strings.Contains(log, "Bearer") {
				t.Fatalf("the log holds the request's Authorization header:\n%s", log)
			}
		})
	}
}

// docs/decisions.md "Logs": "One line per request, at info, written when
// the answer is ready: ... and, when the answer is an error body, its
// correlationId"; "Metrics": GET /metrics counts every request
// (kitd_http_requests_total, route="none" for a path no row takes). A
// request whose head fasthttp cannot read is answered with an error body
// and a correlation id (400 malformed HTTP request, 431 header_too_large):
// the operator must find that id in the log, and the answer in the metrics.
func TestARequestHeadThatCannotBeReadIsLoggedAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"a header line without a colon", "GET /api/v1/auth/test HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n", 400},
		{"a head over 16 KiB", "GET /api/v1/auth/test HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 20<<10) + "\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out logbuf.Buffer
			srv := New(Config{Logger: slog.New(slog.NewJSONHandler(&out, nil))})
			answer := sendHead(t, srv, tc.head)
			_, body, _ := strings.Cut(answer, "\r\n\r\n")
			var e errorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.CorrelationID == "" {
				t.Fatalf("no error body with a correlation id: %q", answer)
			}
			// Logged and counted before fasthttp wrote the answer read above.
			var found bool
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request" && m["correlationId"] == e.CorrelationID {
					found = true
				}
			}
			if !found {
				t.Errorf("the answer's correlationId %s is in no request line:\n%s", e.CorrelationID, out.String())
			}
			mfs := metricstest.Parse(t, srv.metrics.Gather())
			if v := metricstest.Value(mfs, "kitd_http_requests_total", "status", itoa(tc.status)); v != 1 {
				t.Errorf("kitd_http_requests_total{status=%q} = %v, want 1", itoa(tc.status), v)
			}
		})
	}
}

// A connection that never sent a byte is no request: one the client
// resets, or one Shutdown closes, is neither logged as a request nor
// counted (fasthttp calls its ErrorHandler for them too).
func TestAConnectionThatSentNothingIsNoRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(srv *Server, c *net.TCPConn)
	}{
		{"the client resets it", func(srv *Server, c *net.TCPConn) {
			_ = c.SetLinger(0) // the close sends a reset: the server reads ECONNRESET
			c.Close()
		}},
		{"Shutdown closes it", func(srv *Server, c *net.TCPConn) {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out logbuf.Buffer
			srv := New(Config{Logger: slog.New(slog.NewJSONHandler(&out, nil))})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer func() { _ = srv.Shutdown(context.Background()); ln.Close() }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			connections := func() int {
				srv.freshMu.Lock()
				defer srv.freshMu.Unlock()
				return len(srv.fresh)
			}
			eventually.True(t, "the server accepted the connection", func() bool { return connections() == 1 })
			tc.close(srv, c.(*net.TCPConn))
			eventually.True(t, "the server closed its end", func() bool { return connections() == 0 })
			if strings.Contains(out.String(), `"msg":"request"`) {
				t.Errorf("a connection that sent nothing was logged as a request:\n%s", out.String())
			}
			mfs := metricstest.Parse(t, srv.metrics.Gather())
			if v := metricstest.Value(mfs, "kitd_http_requests_total", "status", "400"); v != 0 {
				t.Errorf("kitd_http_requests_total{status=\"400\"} = %v for a connection that sent nothing, want 0", v)
			}
		})
	}
}

// sendHead serves srv on an in-memory listener for one connection that
// writes head, and returns the answer; the server stops with the test.
func sendHead(t *testing.T, srv *Server, head string) string {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()); ln.Close() })
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte(head))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, _ := io.ReadAll(c)
	return string(answer)
}
