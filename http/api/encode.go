package api

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kitd/kitd/proto/kitpb"
)

// Messages are the most frequent answer by far (every post, every page of
// history), so they are written by hand instead of through encoding/json's
// reflection. The output is byte for byte what json.Marshal(viewMessage(m))
// gives; encode_test.go holds it to that.

// appendMessage appends the JSON of m (SPEC.md section 2, Message).
func appendMessage(b []byte, m *kitpb.Message) []byte {
	deleted := m.DeletedAt != 0
	b = append(b, `{"id":`...)
	b = appendString(b, m.Id)
	b = append(b, `,"conversationId":`...)
	b = appendString(b, m.ConversationId)
	b = append(b, `,"author":{"kind":`...)
	b = appendString(b, m.AuthorKind)
	b = append(b, `,"id":`...)
	b = appendString(b, m.AuthorId)
	b = append(b, `},"text":`...)
	if deleted {
		b = append(b, "null"...)
	} else {
		b = appendString(b, m.Text)
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
	b = appendTime(b, m.CreatedAt)
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
			b = append(b, `{"reaction":`...)
			b = appendString(b, r.Reaction)
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
					b = appendString(b, u)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
	}
	return append(b, "]}"...)
}

// appendMessageBody appends {"message": m} to b.
func appendMessageBody(b []byte, m *kitpb.Message) []byte {
	b = slices.Grow(b, 320+len(m.Text)+len(m.Blocks))
	b = append(b, `{"message":`...)
	b = appendMessage(b, m)
	return append(b, '}')
}

// appendMessagesPage appends {"messages": [...], "nextCursor": c} to b.
func appendMessagesPage(b []byte, ms []*kitpb.Message, next *string) []byte {
	size := 40
	for _, m := range ms {
		size += 320 + len(m.Text) + len(m.Blocks)
	}
	b = slices.Grow(b, size)
	b = append(b, `{"messages":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, m)
	}
	b = append(b, `],"nextCursor":`...)
	if next == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *next)
	}
	return append(b, '}')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

func appendTime(b []byte, ns int64) []byte {
	b = append(b, '"')
	b = time.Unix(0, ns).UTC().AppendFormat(b, timeFormat)
	return append(b, '"')
}

func appendOptTime(b []byte, ns int64) []byte {
	if ns == 0 {
		return append(b, "null"...)
	}
	return appendTime(b, ns)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid UTF-8
// replaced by U+FFFD.
func appendString(b []byte, s string) []byte { return appendQuoted(b, s, &encodingJSON) }

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
	// slogJSON is log/slog's JSON handler's (RequestLog).
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
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && e.shortBAndF:
				b = append(b, '\\', 'b')
			case c == '\f' && e.shortBAndF:
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
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
