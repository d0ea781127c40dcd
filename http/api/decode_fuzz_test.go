package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
)

// fuzzSecret marks submitted bytes that no error may repeat: a fuzz input
// containing it checks that refusals echo nothing of the body (docs/api.md
// "Surfaces and conventions": bad input is never echoed).
const fuzzSecret = "zqSECRETqz"

// decodeSeeds are bodies from the unit test tables of this package, plus
// the secret in every place a decoder might repeat it: a key, a value, a
// value of the wrong type, a repeated key, a syntax error after it.
var decodeSeeds = []string{
	`{"conversationId":"01a20000-0000-7000-8000-000000000002","text":"hello"}`,
	" {\n\t\"text\" : \"hi\" ,\r\n \"conversationId\":\"c\", \"threadParentId\":\"p\" } ",
	`{"text":"t","threadParentId":null,"blocks":null}`,
	`{}`,
	`{"text":"a","text":"b"}`,
	`{"threadParentId":null,"threadParentId":"p"}`,
	`{"text":"t","blocks":[{"type":"divider"}]}`,
	`{"text":"line\nbreak \"q\" \u00e9"}`,
	`{"text":"héllo 🎉"}`,
	`{"Text":"t","te\u0078t":"x"}`,
	`{"text":1}`,
	`{"text":"t"} x`,
	`{"text":"t",}`,
	`[]`,
	"{\"text\":\"a\x01\"}",
	`{"grantType":"authorization_code","clientId":"c","clientSecret":"s","code":"x","redirectUri":"https://a.example/cb","codeVerifier":"v"}`,
	`{"messageId":"01a20000-0000-7000-8000-000000000002","reaction":"thumbsup"}`,
	`{"text":"` + fuzzSecret + `","channel":"#x","username":"u"}`,
	`{"` + fuzzSecret + `":1,"` + fuzzSecret + `":2}`,
	`{"text":"` + fuzzSecret + `","text":"` + fuzzSecret + `"}`,
	`{"text":{"` + fuzzSecret + `":[1]}}`,
	`{"clientSecret":["` + fuzzSecret + `"]}`,
	`{"text":"` + fuzzSecret + `"` + fuzzSecret + `}`,
	`{"blocks":[{"` + fuzzSecret + `":1,"` + fuzzSecret + `":2}]}`,
	`{"text":"` + fuzzSecret + `\`,
}

// decodeBodies are the named request bodies that decode reads (the others
// are anonymous structs of their handlers, decoded the same way).
var decodeBodies = []struct {
	name string
	new  func() any
}{
	{"postBody", func() any { return new(postBody) }},
	{"editBody", func() any { return new(editBody) }},
	{"kitAccessBody", func() any { return new(kitAccessBody) }},
	{"reactionBody", func() any { return new(reactionBody) }},
	{"hookPostBody", func() any { return new(hookPostBody) }},
}

// decodeBody runs decode as a request with body would.
func decodeBody(body []byte, v any) error {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.SetBody(body)
	return decode(&ctx, v, 1<<20, false)
}

// fieldPaths are the JSON names of v's fields: the only paths a refusal of
// a flat body may name, besides the body itself ("").
func fieldPaths(v any) map[string]bool {
	paths := map[string]bool{"": true}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		paths[name] = true
	}
	return paths
}

// checkRefusal fails unless err is a validation error at one of paths that
// repeats nothing of body marked by fuzzSecret.
func checkRefusal(t *testing.T, body []byte, err error, paths map[string]bool) {
	t.Helper()
	var e *kiterr.Error
	if !errors.As(err, &e) || e.Code != kiterr.Validation {
		t.Fatalf("%q: %v is not a validation error", body, err)
	}
	if !paths[e.Path] {
		t.Fatalf("%q: refused at path %q, not a field of the body", body, e.Path)
	}
	if bytes.Contains(body, []byte(fuzzSecret)) && strings.Contains(err.Error(), fuzzSecret) {
		t.Fatalf("%q: error %q echoes the body", body, err)
	}
}

// FuzzDecode: every named request body, through decode (the fast decoder
// where it has one, else input.DecodeJSON), either refuses a body with a
// validation error at a field path that echoes nothing, or accepts it; an
// accepted body, encoded again, is accepted again to the same value, byte
// for byte.
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, b := range decodeBodies {
			v := b.new()
			if err := decodeBody(body, v); err != nil {
				checkRefusal(t, body, err, fieldPaths(v))
				continue
			}
			once, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s %q: accepted, then not encodable: %v", b.name, body, err)
			}
			again := b.new()
			if err := decodeBody(once, again); err != nil {
				t.Fatalf("%s %q: accepted, re-encoded as %s and refused: %v", b.name, body, once, err)
			}
			if twice, _ := json.Marshal(again); !bytes.Equal(once, twice) {
				t.Fatalf("%s %q: re-encoded as %s, decoded again as %s", b.name, body, once, twice)
			}
		}
	})
}

// FuzzHookBody: hookBody (fast or strict decoding, then the text rules)
// refuses with a validation error at "", "text" or "blocks" that echoes
// nothing, or returns a text of 1-4,000 characters that is not blank; the
// accepted text and blocks, encoded again, are accepted again as the same
// text and the same JSON value (encoding/json escapes '&', '<' and '>' in
// blocks it passes through, which spells the same value differently).
func FuzzHookBody(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"text":" \t\n"}`))
	f.Add([]byte(`{"text":"` + strings.Repeat("é", maxHookText+1) + `"}`))
	paths := fieldPaths(new(hookPostBody))
	f.Fuzz(func(t *testing.T, body []byte) {
		text, blocks, err := hookBody(body)
		if err != nil {
			checkRefusal(t, body, err, paths)
			return
		}
		if n := utf8.RuneCountInString(text); n < 1 || n > maxHookText || strings.TrimSpace(text) == "" {
			t.Fatalf("%q: accepted a text of %d characters: %q", body, n, text)
		}
		once, err := json.Marshal(hookPostBody{Text: &text, Blocks: blocks})
		if err != nil {
			t.Fatalf("%q: accepted blocks are not JSON: %v", body, err)
		}
		text2, blocks2, err := hookBody(once)
		if err != nil {
			t.Fatalf("%q: accepted, re-encoded as %s and refused: %v", body, once, err)
		}
		if text2 != text || !reflect.DeepEqual(jsonValue(t, blocks2), jsonValue(t, blocks)) {
			t.Fatalf("%q: re-encoded as %s, read as %q, %s", body, once, text2, blocks2)
		}
	})
}

// jsonValue is the value b spells, numbers kept as written, or nil for
// no blocks.
func jsonValue(t *testing.T, b []byte) any {
	if b == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("blocks %q are not JSON: %v", b, err)
	}
	return v
}
