// Package msgjson writes a message the way the API answers it (docs/api.md
// "Message"): by hand, byte for byte what encoding/json gives for
// http/api's view of it, which http/api's tests hold it to. Messages are the
// most frequent answer by far (every post, every page of history), and the
// conversation actor keeps its newest messages in this form (actors,
// internal/history), so the encoder lives below both. Its strings are
// escaped by internal/jsontext, as encoding/json and log/slog escape them.
// It never decides who may see a message: the encoding does not depend on
// the viewer.
package msgjson

import (
	"strconv"
	"time"

	"github.com/kitd/kitd/internal/jsontext"
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

// AppendString writes s as a JSON string the way encoding/json does: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid UTF-8
// replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
	return jsontext.AppendString(b, s, jsontext.EncodingJSON)
}

// AppendSlogString writes s as a JSON string the way log/slog's JSON
// handler does (http/api's request log lines).
func AppendSlogString(b []byte, s string) []byte { return jsontext.AppendString(b, s, jsontext.Slog) }
