package api

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kitd/kitd/internal/msgjson"
)

// RequestLog writes the line of each answered request (docs/decisions.md
// "Logs") byte for byte as the process's slog handler would, without slog:
// on the hot path slog's handler machinery (a record, a caller lookup,
// attributes resolved one by one, the handler's lock) cost about 8% of a
// post's CPU (bench/README.md). The line is appended to a pooled buffer
// and handed to the writer in one Write, so the writer's own lock is the
// only one a line takes. Every other line of the process goes through slog.
type RequestLog struct {
	w    io.Writer
	text bool
	// node is the line's node field, rendered with its key: the same
	// for every line.
	node string
}

// NewRequestLog returns the request log of a node named node, writing to
// w in format ("json" or "text", the values of --log-format).
func NewRequestLog(w io.Writer, format, node string) (*RequestLog, error) {
	l := &RequestLog{w: w}
	var b []byte
	switch format {
	case "json":
		b = appendJSONString(append(b, `,"node":`...), node)
	case "text":
		l.text = true
		b = appendTextString(append(b, " node="...), node)
	default:
		return nil, fmt.Errorf("request log: %q is neither json nor text", format)
	}
	l.node = string(b)
	return l, nil
}

// requestLine is what a request's line says.
type requestLine struct {
	route         string // the row's pattern, never the path as sent
	status        int
	took          time.Duration
	installation  string // may come from the request: escaped
	client        netip.Addr
	correlationID string
}

// lineBuffers holds the buffers lines are built in. A line is about 250
// bytes; one longer than 1 KiB (it cannot be, but for a node name) is
// not kept.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write writes the line of one request answered at now.
func (l *RequestLog) write(now time.Time, r *requestLine) {
	bp := lineBuffers.Get().(*[]byte)
	b := l.append((*bp)[:0], now, r)
	l.w.Write(b) // as slog's handler does, a failed log write is dropped
	if cap(b) <= 1<<10 {
		*bp = b
		lineBuffers.Put(bp)
	}
}

// append appends the line, with its newline, as slog's JSON or text
// handler renders
//
//	logger.With("node", node).LogAttrs(ctx, slog.LevelInfo, "request",
//		route, status, durationUs, installation, client[, correlationId])
func (l *RequestLog) append(b []byte, now time.Time, r *requestLine) []byte {
	now = now.Round(0) // slog drops the monotonic reading too
	if l.text {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, now)
		b = append(b, " level=INFO msg=request"...)
		b = append(b, l.node...)
		b = append(b, " route="...)
		b = appendTextString(b, r.route)
		b = append(b, " status="...)
		b = strconv.AppendInt(b, int64(r.status), 10)
		b = append(b, " durationUs="...)
		b = strconv.AppendInt(b, r.took.Microseconds(), 10)
		b = append(b, " installation="...)
		b = appendTextString(b, r.installation)
		b = append(b, " client="...)
		if r.client.IsValid() {
			b = r.client.AppendTo(b) // digits, '.' and ':' need no quoting
		} else {
			b = append(b, `""`...)
		}
		if r.correlationID != "" {
			b = append(b, " correlationId="...)
			b = appendTextString(b, r.correlationID)
		}
		return append(b, '\n')
	}
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request"`...)
	b = append(b, l.node...)
	b = append(b, `,"route":`...)
	b = appendJSONString(b, r.route)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"durationUs":`...)
	b = strconv.AppendInt(b, r.took.Microseconds(), 10)
	b = append(b, `,"installation":`...)
	b = appendJSONString(b, r.installation)
	b = append(b, `,"client":"`...)
	if r.client.IsValid() {
		b = r.client.AppendTo(b) // digits, '.' and ':' need no escaping
	}
	b = append(b, '"')
	if r.correlationID != "" {
		b = append(b, `,"correlationId":`...)
		b = appendJSONString(b, r.correlationID)
	}
	return append(b, "}\n"...)
}

// appendRFC3339Millis appends t as slog's text handler does: RFC 3339
// with exactly three digits of fraction, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond more
	// keeps four digits, the fourth is then dropped.
	const prefix = len("2006-01-02T15:04:05.000")
	n := len(b)
	b = t.Truncate(time.Millisecond).Add(time.Millisecond/10).AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefix], b[n+prefix+1:]...)
}

// appendJSONString appends s as a quoted JSON string, escaped as slog's
// JSON handler escapes it: as encoding/json does, but for '<', '>' and '&',
// which it keeps, and '\b' and '\f', which it writes as \u00XX.
func appendJSONString(b []byte, s string) []byte { return msgjson.AppendSlogString(b, s) }

// appendTextString appends s as slog's text handler does: bare when it
// reads back unambiguously, else Go-quoted.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// textNeedsQuoting is slog's rule: empty, or holding a space, '=', '"',
// a control character, invalid UTF-8, or a rune that is a space or not
// printable.
func textNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == '=' || c == '"' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}
