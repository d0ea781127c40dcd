package api

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
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
			ln := fasthttputil.NewInmemoryListener()
			go srv.Serve(ln)
			defer func() { _ = srv.Shutdown(context.Background()); ln.Close() }()
			c, err := ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte(tc.head))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.ReadAll(c)
			c.Close()
			eventually.True(t, "fasthttp's line logged", func() bool { return strings.Contains(out.String(), "error when") })
			if log := out.String(); strings.Contains(log, secret) || strings.Contains(log, "Bearer") {
				t.Fatalf("the log holds the request's Authorization header:\n%s", log)
			}
		})
	}
}
