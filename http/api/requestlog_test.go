package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
)

// slogLine is the line slog's handler of format writes for r at now, as
// the process logger (With "node") writes it through Server.logRequest.
func slogLine(t testing.TB, format, node string, now time.Time, r *requestLine) []byte {
	t.Helper()
	var out bytes.Buffer
	var h slog.Handler = slog.NewJSONHandler(&out, nil)
	if format == "text" {
		h = slog.NewTextHandler(&out, nil)
	}
	s := &Server{log: slog.New(&fixedTime{h, now}).With("node", node)}
	s.logRequest(r)
	return out.Bytes()
}

// fixedTime stamps every record with one time, so that slog's line can be
// compared with RequestLog's byte for byte.
type fixedTime struct {
	slog.Handler
	now time.Time
}

func (f *fixedTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = f.now
	return f.Handler.Handle(ctx, r)
}

func (f *fixedTime) WithAttrs(as []slog.Attr) slog.Handler {
	return &fixedTime{f.Handler.WithAttrs(as), f.now}
}

func ourLine(t testing.TB, format, node string, now time.Time, r *requestLine) []byte {
	t.Helper()
	var out bytes.Buffer
	l, err := NewRequestLog(&out, format, node)
	if err != nil {
		t.Fatal(err)
	}
	l.write(now, r)
	return out.Bytes()
}

// A request's line written by RequestLog is the line slog's handler of the
// same format writes, byte for byte, whatever its strings hold.
func TestRequestLogIsSlogsLine(t *testing.T) {
	at := time.Date(2026, 11, 23, 22, 30, 1, 234567000, time.UTC)
	line := func(installation, corr string) *requestLine {
		return &requestLine{route: "POST /api/v1/messages", status: 201, took: 1234567 * time.Nanosecond,
			installation: installation, correlationID: corr}
	}
	tests := []struct {
		rule string
		node string
		at   time.Time
		line *requestLine
	}{
		{"a success has no correlationId", "n1", at, line(ids.New(), "")},
		{"an error line ends with its correlationId", "n1", at, line(ids.New(), "abc-123")},
		{"an empty installation is written empty", "n1", at, line("", "")},
		{"quotes and backslashes are escaped", "n1", at, line(`a"b\c`, "")},
		{"control characters are escaped", "n1", at, line("a\nb\rc\td\x00e\x1f\x7f", "")},
		{"invalid UTF-8 becomes U+FFFD", "n1", at, line("a\xffb\xc3", "")},
		{"JavaScript's line ends are escaped", "n1", at, line("a\u2028b\u2029c", "")},
		{"HTML characters are kept", "n1", at, line("<a>&amp;", "")},
		{"spaces and '=' are quoted in text", "n 1", at, line("a=b c", "x y")},
		{"a node name with quotes is escaped", `n"1`, at, line("i", "")},
		{"unprintable and space runes are quoted in text", "n1", at, line("a\u00a0b\u200bc", "")},
		{"a whole second has no fraction in JSON and .000 in text", "n1", at.Truncate(time.Second), line("i", "")},
		{"a time zone other than UTC is written with its offset", "n1", at.In(time.FixedZone("x", -5*3600-1800)), line("i", "")},
		{"the monotonic reading is dropped", "n1", time.Now(), line("i", "")},
		{"a duration under a microsecond is 0", "n1", at, &requestLine{route: "none", status: 404}},
		{"an IPv4 client is written bare", "n1", at, &requestLine{route: "none", status: 404, client: netip.MustParseAddr("203.0.113.7")}},
		{"an IPv6 client is written bare", "n1", at, &requestLine{route: "none", status: 404, client: netip.MustParseAddr("2001:db8::7")}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			for _, format := range []string{"json", "text"} {
				want := slogLine(t, format, tt.node, tt.at, tt.line)
				if got := ourLine(t, format, tt.node, tt.at, tt.line); !bytes.Equal(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", format, got, want)
				}
			}
		})
	}
}

func TestRequestLogFormat(t *testing.T) {
	if _, err := NewRequestLog(io.Discard, "xml", "n1"); err == nil {
		t.Fatal("format xml was accepted")
	}
}

// Whatever a request holds, its line is slog's line, and the JSON escaper
// writes a string encoding/json reads back as the string (invalid UTF-8
// as U+FFFD, as encoding/json itself writes it).
func FuzzRequestLog(f *testing.F) {
	f.Add("n1", "POST /api/v1/messages", "01a209e5-f879-7268-bf06-975e8e98f6ad", "", int64(1795473001234567000), 201, int64(1234))
	f.Add("n 1", "none", "a\"b\\c\n\x00\u2028\xff<>&", "x=y", int64(0), 404, int64(-5))
	f.Fuzz(func(t *testing.T, node, route, installation, corr string, unixNanos int64, status int, took int64) {
		at := time.Unix(0, unixNanos).UTC()
		if y := at.Year(); y < 0 || y >= 10000 {
			return // slog writes an error for those; no clock of kitd's reaches them
		}
		r := &requestLine{route: route, status: status, took: time.Duration(took), installation: installation, correlationID: corr}
		for _, format := range []string{"json", "text"} {
			if got, want := ourLine(t, format, node, at, r), slogLine(t, format, node, at, r); !bytes.Equal(got, want) {
				t.Fatalf("%s:\n got %q\nwant %q", format, got, want)
			}
		}
		for _, s := range []string{node, route, installation, corr} {
			var got string
			if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			std, _ := json.Marshal(s)
			var want string
			if err := json.Unmarshal(std, &want); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%q read back as %q, encoding/json's as %q", s, got, want)
			}
			if utf8.ValidString(s) && got != s {
				t.Fatalf("%q read back as %q", s, got)
			}
		}
	})
}

// A request served by a RequestLog logs what slog's line says: the same
// keys and values, but for the time and the duration.
func TestServerRequestLogMatchesSlog(t *testing.T) {
	run := func(s *Server, path string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(path)
		s.handle(&ctx)
	}
	secret := ids.NewSecret("x")
	for _, tt := range []struct{ rule, path string }{
		{"a webhook URL's line names its installation as sent, never its secret", "/hooks/v1/inst-\"1/hook-1/" + secret},
		{"a path no row takes logs route none", "/api/v1/nothing"},
		{"a request without a token logs its correlation id", "/api/v1/messages"},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			var viaSlog, viaLog bytes.Buffer
			run(New(Config{Logger: slog.New(slog.NewJSONHandler(&viaSlog, nil)).With("node", "n1")}), tt.path)
			rl, err := NewRequestLog(&viaLog, "json", "n1")
			if err != nil {
				t.Fatal(err)
			}
			run(New(Config{Logger: discardLogger(), RequestLog: rl}), tt.path)
			var want, got map[string]any
			if err := json.Unmarshal(viaSlog.Bytes(), &want); err != nil {
				t.Fatalf("%v: %s", err, viaSlog.Bytes())
			}
			if err := json.Unmarshal(viaLog.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, viaLog.Bytes())
			}
			if strings.Contains(viaLog.String(), secret) {
				t.Fatalf("the line has the path as sent: %s", viaLog.Bytes())
			}
			for _, k := range []string{"time", "durationUs", "correlationId"} {
				if _, ok := got[k]; ok != (k != "correlationId" || want[k] != nil) {
					t.Errorf("%s present %v in %s", k, ok, viaLog.Bytes())
				}
				delete(got, k)
				delete(want, k)
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// Counting a request and writing its line through RequestLog allocates
// nothing, a webhook post's (whose installation is read from the URL)
// included.
func TestRequestLogAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	for _, format := range []string{"json", "text"} {
		rl, err := NewRequestLog(io.Discard, format, "n1")
		if err != nil {
			t.Fatal(err)
		}
		s := New(Config{Logger: discardLogger(), RequestLog: rl})
		for _, path := range []string{"/api/v1/messages", "/hooks/v1/" + ids.New() + "/" + ids.New() + "/secret", "/nothing"} {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI(path)
			ctx.Response.SetStatusCode(201)
			r := served{t: resolve(&ctx), client: netip.MustParseAddr("2001:db8::7")}
			if n := testing.AllocsPerRun(100, func() { s.record(&ctx, &r) }); n != 0 {
				t.Errorf("%s: POST %s: %v allocations, want 0", format, path, n)
			}
		}
	}
}

// What writing one request's line costs, alone (to a discarding writer:
// cmd/kitd's buffer is the process's cost), against slog's handler of the
// same format:
//
//	go test ./http/api/ -run '^$' -bench RequestLog -benchmem
func BenchmarkRequestLog(b *testing.B) {
	r := &requestLine{route: "POST /api/v1/messages", status: 201, took: 1234 * time.Microsecond,
		installation: "01a209e5-f879-7268-bf06-975e8e98f6ad"}
	for _, format := range []string{"json", "text"} {
		b.Run(format+"/RequestLog", func(b *testing.B) {
			l, err := NewRequestLog(io.Discard, format, "n1")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				l.write(time.Now(), r)
			}
		})
		b.Run(format+"/slog", func(b *testing.B) {
			var h slog.Handler = slog.NewJSONHandler(io.Discard, nil)
			if format == "text" {
				h = slog.NewTextHandler(io.Discard, nil)
			}
			s := &Server{log: slog.New(h).With("node", "n1")}
			b.ReportAllocs()
			for b.Loop() {
				time.Now()
				s.logRequest(r)
			}
		})
	}
}

// docs/decisions.md "Logs": a request's line carries the correlation id
// of its failure, and a server failure has its error line "with the same
// correlationId". An app host page that failed shows the member a
// correlation id and logs it; its request line must carry it too, or the
// operator cannot find the request the member reports.
func TestAFailedAppPagesLineCarriesItsCorrelationID(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		err    error
		status int
		msg    string
	}{
		{"an internal failure (500) names its correlation id in the request line", errors.New("boom"), 500, "app request failed"},
		{"an unexplained unavailable (503) names its correlation id in the request line", fmt.Errorf("group 7 has no leader: %w", kiterr.New(kiterr.Unavailable, "retry")), 503, "app request unavailable"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var logged bytes.Buffer
			s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI("/app/")
			r := served{t: resolve(&ctx)}
			s.app.Fail(&ctx, tc.err)
			s.record(&ctx, &r)
			if ctx.Response.StatusCode() != tc.status {
				t.Fatalf("status %d, want %d", ctx.Response.StatusCode(), tc.status)
			}
			lines := map[string]map[string]any{}
			for _, l := range bytes.Split(bytes.TrimSpace(logged.Bytes()), []byte("\n")) {
				var m map[string]any
				if err := json.Unmarshal(l, &m); err != nil {
					t.Fatalf("not a JSON line: %s", l)
				}
				lines[m["msg"].(string)] = m
			}
			failed, req := lines[tc.msg], lines["request"]
			if failed == nil || req == nil {
				t.Fatalf("want a %q line and a request line: %s", tc.msg, logged.String())
			}
			corr, _ := failed["correlationId"].(string)
			if corr == "" || !strings.Contains(string(ctx.Response.Body()), corr) {
				t.Fatalf("the page does not show the logged correlation id %q", corr)
			}
			if req["correlationId"] != corr {
				t.Fatalf("request line's correlationId = %v, want %q (the failure's)", req["correlationId"], corr)
			}
		})
	}
}
