// Package msgjson writes a message the way the API answers it (docs/api.md
// "Message"): by hand, byte for byte what encoding/json gives for
// http/api's view of it, which http/api's tests hold it to. Messages are the
// most frequent answer by far (every post, every page of history), and the
// conversation actor keeps its newest messages in this form (actors,
// internal/history), so the encoder lives below both. It owns the JSON
// string escapings kitd writes by hand too. It never decides who may see a
// message: the encoding does not depend on the viewer.
package msgjson

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kitd/kitd/proto/kitpb"
)

// TimeFormat is ISO 8601 in UTC with milliseconds, every time of the API.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// SizeHint is about what AppendMessage writes for m, to grow a buffer once.
func SizeHint(m *kitpb.Message) int { return 320 + len(m.Text) + len(m.Blocks) }

// AppendMessage appends the JSON of m.
func AppendMessage(b []byte, m *kitpb.Message) []byte {
	deleted := m.DeletedAt != 0
	b = append(b, `{"id":`...)
	b = AppendString(b, m.Id)
	b = append(b, `,"conversationId":`...)
	b = AppendString(b, m.ConversationId)
	b = append(b, `,"author":{"kind":`...)
	b = AppendString(b, m.AuthorKind)
	b = append(b, `,"id":`...)
	b = AppendString(b, m.AuthorId)
	b = append(b, `},"text":`...)
	if deleted {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, m.Text)
	}
	b = append(b, `,"blocks":`...)
	if deleted || len(m.Blocks) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, m.Blocks...) // stored compact by the Blocks validator
	}
	b = append(b, `,"threadParentId":`...)
	b = appendOptString(b, m.ThreadParentId)
	b = append(b, `,"createdAt":`...)
	b = AppendTime(b, m.CreatedAt)
	b = append(b, `,"editedAt":`...)
	b = appendOptTime(b, m.EditedAt)
	b = append(b, `,"deletedAt":`...)
	b = appendOptTime(b, m.DeletedAt)
	b = append(b, `,"reactions":[`...)
	if !deleted {
		for i, r := range m.Reactions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendReaction(b, r)
		}
	}
	return append(b, "]}"...)
}

func appendReaction(b []byte, r *kitpb.Reaction) []byte {
	b = append(b, `{"reaction":`...)
	b = AppendString(b, r.Reaction)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(len(r.UserIds)), 10)
	b = append(b, `,"userIds":`...)
	if r.UserIds == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for j, u := range r.UserIds {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, u)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendString(b, s)
}

// AppendTime appends ns as a JSON string in TimeFormat, as encoding/json
// writes the API's times.
func AppendTime(b []byte, ns int64) []byte {
	b = append(b, '"')
	b = time.Unix(0, ns).UTC().AppendFormat(b, TimeFormat)
	return append(b, '"')
}

func appendOptTime(b []byte, ns int64) []byte {
	if ns == 0 {
		return append(b, "null"...)
	}
	return AppendTime(b, ns)
}

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string the way encoding/json does: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid UTF-8
// replaced by U+FFFD.
func AppendString(b []byte, s string) []byte { return appendQuoted(b, s, &encodingJSON) }

// AppendSlogString writes s as a JSON string the way log/slog's JSON
// handler does (http/api's request log lines).
func AppendSlogString(b []byte, s string) []byte { return appendQuoted(b, s, &slogJSON) }

// jsonEscaping is how one encoder escapes a JSON string: both escape '"',
// '\\' and control characters, write invalid UTF-8 as U+FFFD and escape
// U+2028 and U+2029 (JavaScript's line ends); they differ in the rest.
type jsonEscaping struct {
	kept       [utf8.RuneSelf]bool // ASCII bytes written as they are
	shortBAndF bool                // '\b' and '\f' as two characters, not \u0008, \u000c
}

var (
	// encodingJSON is encoding/json's escaping: '<', '>' and '&' too.
	encodingJSON = newJSONEscaping("<>&", true)
	// slogJSON is log/slog's JSON handler's.
	slogJSON = newJSONEscaping("", false)
)

func newJSONEscaping(html string, shortBAndF bool) (e jsonEscaping) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		e.kept[c] = c != '"' && c != '\\' && strings.IndexByte(html, c) < 0
	}
	e.shortBAndF = shortBAndF
	return e
}

// appendQuoted appends s as a quoted JSON string, escaped as e says.
func appendQuoted(b []byte, s string, e *jsonEscaping) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if e.kept[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscaped(b, c, e)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscaped writes the escape of the ASCII byte c, which e does not keep.
func appendEscaped(b []byte, c byte, e *jsonEscaping) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(b, '\\', c)
	case c == '\n':
		return append(b, '\\', 'n')
	case c == '\r':
		return append(b, '\\', 'r')
	case c == '\t':
		return append(b, '\\', 't')
	case c == '\b' && e.shortBAndF:
		return append(b, '\\', 'b')
	case c == '\f' && e.shortBAndF:
		return append(b, '\\', 'f')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
