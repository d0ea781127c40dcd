package api

import (
	"encoding/json"

	"github.com/kitd/kitd/internal/jsontext"
)

// fastDecoder is a request body with a hand-written decoder for its common
// form. decodeFast reports false for anything it does not fully understand;
// the body is then decoded by input.DecodeJSON, which also words the errors.
// A true result must leave the value exactly as input.DecodeJSON would
// (fastjson_test.go holds it to that, including by fuzzing): keys are
// matched exactly, and a key given twice is left to DecodeJSON to refuse.
type fastDecoder interface {
	decodeFast(body []byte) bool
}

// decodeFast handles the shape almost every POST /messages has: an object
// of conversationId, text and threadParentId as plain ASCII strings (no
// escapes), threadParentId or blocks possibly null, in any order. Anything
// else (blocks, escapes, non-ASCII, other or repeated keys) goes to
// input.DecodeJSON.
func (b *postBody) decodeFast(body []byte) bool {
	var out postBody
	ok := fastObject(body, func(key []byte) (**string, *json.RawMessage, int) {
		switch string(key) { // no allocation: the compiler compares in place
		case "conversationId":
			return &out.ConversationID, nil, 0
		case "text":
			return &out.Text, nil, 1
		case "threadParentId":
			return &out.ThreadParentID, nil, 2
		case "blocks":
			return nil, &out.Blocks, 3
		}
		return nil, nil, -1 // unknown keys, which DecodeJSON ignores
	})
	if ok {
		*b = out
	}
	return ok
}

// decodeFast handles the usual incoming webhook body: {"text": "..."} with
// text a plain ASCII string and blocks possibly null. Other keys, which the
// hooks host ignores, go to input.DecodeJSON like everything else.
func (b *hookPostBody) decodeFast(body []byte) bool {
	var out hookPostBody
	ok := fastObject(body, func(key []byte) (**string, *json.RawMessage, int) {
		switch string(key) {
		case "text":
			return &out.Text, nil, 0
		case "blocks":
			return nil, &out.Blocks, 1
		}
		return nil, nil, -1
	})
	if ok {
		*b = out
	}
	return ok
}

// fastObject reads a JSON object whose members are plain strings or null
// (field returns where a key's string goes) or a null Blocks (field returns
// the RawMessage). field numbers the keys it knows (0-31), -1 for others. It
// reports false for anything else: a key field does not know, or one given
// twice.
func fastObject(body []byte, field func(key []byte) (str **string, blocks *json.RawMessage, n int)) bool {
	var seen uint32
	i := jsontext.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = jsontext.SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return jsontext.SkipSpace(body, i+1) == len(body)
	}
	for {
		key, next, ok := plainString(body, i)
		if !ok {
			return false
		}
		i = jsontext.SkipSpace(body, next)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = jsontext.SkipSpace(body, i+1)
		dst, blocks, n := field(key)
		switch {
		case n < 0 || seen&(1<<n) != 0:
			return false
		case blocks != nil:
			seen |= 1 << n
			if !jsontext.HasLiteral(body, i, "null") {
				return false
			}
			*blocks = json.RawMessage("null")
			i += 4
		case jsontext.HasLiteral(body, i, "null"):
			seen |= 1 << n
			*dst = nil
			i += 4
		default:
			seen |= 1 << n
			v, next, ok := plainString(body, i)
			if !ok {
				return false
			}
			s := string(v)
			*dst = &s
			i = next
		}
		i = jsontext.SkipSpace(body, i)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = jsontext.SkipSpace(body, i+1)
		case '}':
			return jsontext.SkipSpace(body, i+1) == len(body)
		default:
			return false
		}
	}
}

// plainString reads a JSON string at b[i] that needs no unescaping: printable
// ASCII without backslash (jsontext.Plain). It returns the contents and the
// index after the closing quote. The strings of the fast path are short
// (keys, ids, a line of text), where a byte loop that inlines beats
// jsontext.PlainString's word-at-a-time scan.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		if c := b[j]; !jsontext.Plain(c) {
			return b[i+1 : j], j + 1, c == '"'
		}
	}
	return nil, 0, false
}
