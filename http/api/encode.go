package api

import (
	"slices"

	"github.com/kitd/kitd/internal/msgjson"
	"github.com/kitd/kitd/proto/kitpb"
)

// Messages are the most frequent answer by far (every post, every page of
// history), so they are written by hand (internal/msgjson) instead of
// through encoding/json's reflection. The output is byte for byte what
// json.Marshal(viewMessage(m)) gives; encode_test.go holds it to that.

// appendMessage appends the JSON of m (docs/api.md "Message", docs/openapi/webapi.json).
func appendMessage(b []byte, m *kitpb.Message) []byte { return msgjson.AppendMessage(b, m) }

// appendMessageBody appends {"message": m} to b.
func appendMessageBody(b []byte, m *kitpb.Message) []byte {
	b = slices.Grow(b, msgjson.SizeHint(m))
	b = append(b, `{"message":`...)
	b = appendMessage(b, m)
	return append(b, '}')
}

// appendMessagesPage appends {"messages": [...], "nextCursor": c} to b.
func appendMessagesPage(b []byte, ms []*kitpb.Message, next *string) []byte {
	size := 40
	for _, m := range ms {
		size += msgjson.SizeHint(m)
	}
	b = slices.Grow(b, size)
	b = append(b, `{"messages":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, m)
	}
	return appendPageEnd(b, next)
}

// appendEncodedPage is appendMessagesPage of messages the conversation
// actor answered already encoded (kitpb.MessagesReply.encoded): the page is
// their bytes with the envelope and the cursor around them.
func appendEncodedPage(b []byte, encoded [][]byte, next *string) []byte {
	size := 40 + len(encoded)
	for _, e := range encoded {
		size += len(e)
	}
	b = slices.Grow(b, size)
	b = append(b, `{"messages":[`...)
	for i, e := range encoded {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return appendPageEnd(b, next)
}

func appendPageEnd(b []byte, next *string) []byte {
	b = append(b, `],"nextCursor":`...)
	if next == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *next)
	}
	return append(b, '}')
}

// appendString writes s as a JSON string the way encoding/json does.
func appendString(b []byte, s string) []byte { return msgjson.AppendString(b, s) }
