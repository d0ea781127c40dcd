package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/http/clientaddr"
)

// The client a request line names is the one clientOf derives
// (http/clientaddr has a row per rule of the derivation): the TCP peer,
// or behind a trusted proxy the client X-Forwarded-For names.
func TestRequestLineClient(t *testing.T) {
	loopback, err := clientaddr.Parse("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rule    string
		proxies *clientaddr.Trusted
		peer    string
		xff     []string
		want    string
	}{
		{"without trusted proxies the header is ignored", nil, "127.0.0.1", []string{"203.0.113.7"}, "127.0.0.1"},
		{"an untrusted peer's header is ignored", loopback, "192.0.2.1", []string{"203.0.113.7"}, "192.0.2.1"},
		{"a trusted peer's header names the client", loopback, "127.0.0.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"every header of a trusted peer is read", loopback, "127.0.0.1", []string{"198.51.100.1", "203.0.113.7, 127.0.0.5"}, "203.0.113.7"},
		{"a trusted peer without the header is the client", loopback, "127.0.0.1", nil, "127.0.0.1"},
		{"an IPv6 peer", nil, "2001:db8::1", nil, "2001:db8::1"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var logged bytes.Buffer
			s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logged, nil)), TrustedProxies: tt.proxies})
			var req fasthttp.Request
			req.Header.SetMethod("GET")
			req.SetRequestURI("/healthz")
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.peer), Port: 4711}, nil)
			s.handle(&ctx)
			var line map[string]any
			if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
				t.Fatalf("not one JSON line: %v: %s", err, logged.Bytes())
			}
			if line["client"] != tt.want {
				t.Errorf("client %v, want %s", line["client"], tt.want)
			}
		})
	}
}

// The whole adapter path of a request that needs no actor, counting and
// its line included, allocates nothing, through a trusted proxy too. The
// line is RequestLog's, as in every kitd process (the slog path of tests
// and tools pays for the client address's text).
func TestHandleAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	proxies, err := clientaddr.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	rl, err := NewRequestLog(io.Discard, "json", "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rule, peer string
	}{
		{"from a peer that is no proxy", "192.0.2.1"},
		{"through a trusted proxy", "10.1.1.1"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			s := New(Config{Logger: discardLogger(), RequestLog: rl, TrustedProxies: proxies})
			for _, path := range []string{"/healthz", "/livez", "/readyz"} {
				var req fasthttp.Request
				req.Header.SetMethod("GET")
				req.SetRequestURI(path)
				req.Header.Add("X-Forwarded-For", "203.0.113.7, 10.2.2.2")
				var ctx fasthttp.RequestCtx
				ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(c.peer)}, nil)
				if n := testing.AllocsPerRun(100, func() {
					ctx.Response.Reset()
					s.handle(&ctx)
				}); n != 0 {
					t.Fatalf("GET %s: %v allocations, want 0", path, n)
				}
			}
		})
	}
}
