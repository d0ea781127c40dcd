package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// scrape reads GET /metrics with the operator token and parses it with
// Prometheus' text parser.
func (h *testServer) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	r := h.do(t, request{method: "GET", path: "/metrics", token: h.opToken})
	want(t, r, 200)
	if ct := r.hdr("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	return metricstest.Parse(t, r.body)
}

func TestMetrics(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	post := func(t *testing.T) *response {
		return h.do(t, request{method: "POST", path: "/api/v1/messages", token: f.bot,
			json: map[string]any{"conversationId": f.conv, "text": "hello"}})
	}
	const hookRoute = "POST /hooks/v1/{installationId}/{webhookId}/{secret}"
	tests := []struct {
		rule string
		do   func(t *testing.T)
		// family, labels, by how much the series moves
		family string
		labels []string
		delta  float64
	}{
		{"a request counts under its route pattern, family and status", func(t *testing.T) {
			want(t, post(t), 201)
		}, "kitd_http_requests_total", []string{"route", "POST /api/v1/messages", "family", "write", "status", "201"}, 1},
		{"a request's latency is observed under its route pattern", func(t *testing.T) {
			want(t, post(t), 201)
		}, "kitd_http_request_duration_seconds", []string{"route", "POST /api/v1/messages"}, 1},
		{"a refused request counts under its status", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "POST", path: "/api/v1/messages", token: "kbot_" + strings.Repeat("x", 43),
				json: map[string]any{"conversationId": f.conv, "text": "hello"}}), 401, "invalid_token")
		}, "kitd_http_requests_total", []string{"route", "POST /api/v1/messages", "status", "401"}, 1},
		{"a 429 counts under the family of the bucket that refused it", func(t *testing.T) {
			// post_message: burst 5 per conversation; the test clock stands
			// still meanwhile.
			for range 6 {
				if r := post(t); r.status == 429 {
					return
				}
			}
			t.Fatal("no 429 after 6 posts")
		}, "kitd_rate_limited_total", []string{"family", "post_message"}, 1},
		{"a webhook URL that names nothing counts as the webhook route", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "POST", path: "/hooks/v1/" + ids.New() + "/" + ids.New() + "/" + ids.NewSecret("x"),
				json: map[string]any{"text": "hi"}}), 404, "not_found")
		}, "kitd_http_requests_total", []string{"route", hookRoute, "family", "webhook", "status", "404"}, 1},
		{"a hooks path of no webhook URL's shape counts as the webhook route too", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "POST", path: "/hooks/v1/x", json: map[string]any{"text": "hi"}}), 404, "not_found")
		}, "kitd_http_requests_total", []string{"route", hookRoute, "status", "404"}, 1},
		{"a webhook post's outcome is counted", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "POST", path: "/hooks/v1/x/y/z", json: map[string]any{"text": "hi"}}), 404, "not_found")
		}, "kitd_webhook_posts_total", []string{"outcome", "not_found"}, 1},
		{"a path no row takes counts as route none", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "GET", path: "/api/v1/nothing-here"}), 404, "not_found")
		}, "kitd_http_requests_total", []string{"route", "none", "status", "404"}, 1},
		{"metrics without the operator token are 401", func(t *testing.T) {
			wantError(t, h.do(t, request{method: "GET", path: "/metrics"}), 401, "invalid_token")
			wantError(t, h.do(t, request{method: "GET", path: "/metrics", token: f.bot}), 401, "invalid_token")
		}, "kitd_http_requests_total", []string{"route", "GET /metrics", "status", "401"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			h.clk.Advance(time.Minute) // full buckets
			before := metricstest.Value(h.scrape(t), tt.family, tt.labels...)
			tt.do(t)
			if got := metricstest.Value(h.scrape(t), tt.family, tt.labels...) - before; got != tt.delta {
				t.Fatalf("%s%v moved by %v, want %v", tt.family, tt.labels, got, tt.delta)
			}
		})
	}
	t.Run("no path as sent is in the metrics, only patterns", func(t *testing.T) {
		secret := ids.NewSecret("x")
		h.do(t, request{method: "POST", path: "/hooks/v1/i/w/" + secret, json: map[string]any{"text": "hi"}})
		h.do(t, request{method: "GET", path: "/api/v1/" + secret})
		r := h.do(t, request{method: "GET", path: "/metrics", token: h.opToken})
		if bytes.Contains(r.body, []byte(secret)) {
			t.Fatal("a path as sent is in the metrics")
		}
	})
}

// Counting a request and logging its line allocate nothing: the front
// end's share of the hot path, measured over record (the route lookup:
// TestResolveAllocatesNothing). A failed request's line carries its
// correlation id, which the error body already paid for.
func TestRecordAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	for _, c := range []struct {
		rule string
		log  *slog.Logger
	}{
		{"counting a request whose line is not logged allocates nothing", discardLogger()},
		{"counting a request and logging its line in JSON allocates nothing", slog.New(slog.NewJSONHandler(io.Discard, nil))},
	} {
		t.Run(c.rule, func(t *testing.T) {
			s := New(Config{Logger: c.log})
			for _, path := range []string{"/api/v1/messages", "/nothing"} {
				var ctx fasthttp.RequestCtx
				ctx.Request.Header.SetMethod("POST")
				ctx.Request.SetRequestURI(path)
				ctx.Response.SetStatusCode(201)
				r := served{t: resolve(&ctx)}
				if n := testing.AllocsPerRun(100, func() { s.record(&ctx, &r) }); n != 0 {
					t.Errorf("POST %s: %v allocations, want 0", path, n)
				}
			}
		})
	}
}

// A request's line in the log names its route by pattern, its status,
// duration, installation and the correlation id of its error body; never
// the path as sent.
func TestRequestLine(t *testing.T) {
	var logged bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	secret := ids.NewSecret("x")
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/hooks/v1/inst-1/hook-1/" + secret)
	s.handle(&ctx)
	var line map[string]any
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %v: %s", err, logged.Bytes())
	}
	var body errorBody
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"msg": "request", "route": "POST /hooks/v1/{installationId}/{webhookId}/{secret}",
		"status": float64(ctx.Response.StatusCode()), "installation": "inst-1", "correlationId": body.CorrelationID} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
	if _, ok := line["durationUs"].(float64); !ok {
		t.Errorf("no durationUs: %v", line)
	}
	if strings.Contains(logged.String(), secret) {
		t.Fatalf("the line has the path as sent: %s", logged.String())
	}
}

// What counting and logging one request cost, with the line off (the
// level above info) and on in each format, through slog and through
// RequestLog (cmd/kitd's), written to a discarding
// writer (the writer's own cost is the process's: cmd/kitd buffers it):
//
//	go test ./http/api/ -run '^$' -bench Record -benchmem
func BenchmarkRecord(b *testing.B) {
	lines := func(format string) *RequestLog {
		l, err := NewRequestLog(io.Discard, format, "n1")
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name  string
		log   *slog.Logger
		lines *RequestLog
	}{
		{"off", discardLogger(), nil},
		{"json", slog.New(slog.NewJSONHandler(io.Discard, nil)), nil},
		{"text", slog.New(slog.NewTextHandler(io.Discard, nil)), nil},
		{"json/RequestLog", discardLogger(), lines("json")},
		{"text/RequestLog", discardLogger(), lines("text")},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := New(Config{Logger: c.log, RequestLog: c.lines})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/api/v1/messages")
			ctx.Response.SetStatusCode(201)
			r := served{t: resolve(&ctx)}
			b.ReportAllocs()
			for b.Loop() {
				s.record(&ctx, &r)
			}
		})
	}
}

// A webhook URL's installation id is logged as sent, but never more than
// a UUID's length of it: a made-up URL cannot fill the log.
func TestRequestLineCapsTheInstallation(t *testing.T) {
	var logged bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	long := strings.Repeat("a", 500)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/hooks/v1/" + long + "/hook-1/secret")
	s.handle(&ctx)
	var line map[string]any
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %v: %s", err, logged.Bytes())
	}
	if got, _ := line["installation"].(string); got != long[:36] {
		t.Fatalf("installation %q, want its first 36 characters", got)
	}
}

// OPERATIONS.md section 8: the metrics token reads GET /metrics and
// nothing else; the operator token still may.
func TestMetricsToken(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	for _, tt := range []struct {
		rule         string
		method, path string
		token        string
		status       int
	}{
		{"the metrics token reads /metrics", "GET", "/metrics", h.metricsToken, 200},
		{"the operator token still reads /metrics", "GET", "/metrics", h.opToken, 200},
		{"a metrics token with one character changed is refused", "GET", "/metrics", h.metricsToken + "x", 401},
		{"a bot token does not read /metrics", "GET", "/metrics", f.bot, 401},
		{"the metrics token is not an operator token", "POST", "/ops/v1/workspaces", h.metricsToken, 401},
		{"the metrics token does not read the cluster view", "GET", "/ops/v1/cluster", h.metricsToken, 401},
		{"the metrics token is not a Web API token", "GET", "/api/v1/auth/test", h.metricsToken, 401},
		{"the metrics token is not a developer token", "GET", "/api/v1/dev/me", h.metricsToken, 401},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			r := h.do(t, request{method: tt.method, path: tt.path, token: tt.token, json: map[string]any{"name": "nope"}})
			if tt.status == 200 {
				want(t, r, 200)
				return
			}
			wantError(t, r, tt.status, "invalid_token")
		})
	}
	t.Run("without a metrics token, an empty bearer token is no metrics token", func(t *testing.T) {
		s := New(Config{Logger: discardLogger()})
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.Set("Authorization", "Bearer ")
		if s.metricsToken(&ctx) {
			t.Fatal("an empty token read /metrics on a server without --metrics-token")
		}
	})
}
