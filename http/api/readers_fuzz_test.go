package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/blocks"
	"github.com/kitd/kitd/internal/jsontext"
	"github.com/kitd/kitd/internal/manifest"
)

// readerSeeds are the inputs FuzzReadersAgree starts from, and that
// `go test` runs as a test: the bodies the readers see, and the corners of
// the grammar where hand-written readers go wrong.
var readerSeeds = []string{
	`{"conversationId":"c","text":"t"}`, `{"text":null}`, `{}`, `[]`, `{"blocks":null,"text":"x"}`,
	` { "text" : "a" , "text" : "b" } `, `{"text":"a","te\u0078t":"b"}`, `{"Text":"a","text":"b"}`,
	`{"conversationId":"c","text":"line\nbreak \"q\" \u00e9","threadParentId":null}`,
	`[{"type":"section","text":{"type":"mrkdwn","text":"*hi* <@x>"}},{"type":"divider"}]`,
	"[ {\"type\" : \"divider\"} ]", `[{"type":"divider"}] x`, `[{"type":"divider"},]`,
	` {"a" : [1, -0, 0.5, 1e5, 1E+5, -1.25e-3, true, false, null, "x"]} `,
	`"\u00e9\/\"\\\b\f\n\r\t"`, `"\uD83D\uDE00"`, `"\ud800"`, `"\uDC00x"`, `"\ud800\ud800\udc00"`, `"\ud800\u0041"`,
	`"\u00zz"`, `"\x"`, "\"a\tb\"", "\"a\x01\"", "\"a\x7f\u0085\"", "\"\xff\xc3\"", "{\"\xff\":1,\"\xfe\":2}",
	`01`, `1.`, `.5`, `1e`, `1e+`, `-`, `--1`, `+1`, `1.5e5.5`, `0x10`, `Infinity`, `NaN`,
	`tru`, `nul`, `falsey`, `[1,]`, `[,1]`, `{,}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`,
	``, `  `, `{} {}`, `{}x`, `[`, `{"a":[`, `"abc`, `"abc\`, `"\u12`,
	`{"a":{"a":{"a":1}}, "a": 2}`, "\t[\r\n1\n]\t", `{"a":1,"a":tru}`,
	strings.Repeat("[", 32) + strings.Repeat("]", 32), strings.Repeat("[", 33) + strings.Repeat("]", 33),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	"a\"b\\c\n\r\t\b\f\x00\x1f\x7f<>&\u2028\u2029\xff\xc3é",
}

// FuzzReadersAgree holds kitd's JSON readers and escapers, which share
// internal/jsontext, to the same answers as encoding/json on the same
// input: the tokenizer accepts exactly what encoding/json accepts and
// decodes the same values; Strict mode refuses only invalid UTF-8 and lone
// surrogates besides; Blocks call invalid JSON exactly what the tokenizer
// refuses, at the same byte; a manifest is "not valid JSON" exactly when
// encoding/json says so; the strict reader accepts exactly valid JSON
// without a repeated key and decodes it as encoding/json does; the fast
// path of POST /messages and of webhooks decodes as the strict reader
// does; and each escaping profile writes what its model writes.
func FuzzReadersAgree(f *testing.F) {
	for _, s := range readerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		valid := json.Valid(in)
		toks := checkTokenizer(t, in, valid)
		checkBlocks(t, in)
		checkManifest(t, in, valid)
		checkStrict(t, in, valid, toks)
		checkFast(t, in)
		checkEscapes(t, string(in))
	})
}

// checkTokenizer: Lenient accepts what encoding/json accepts, with the same
// values; Strict accepts a subset, refusing only for UTF-8 or surrogates.
func checkTokenizer(t *testing.T, in []byte, valid bool) []jsontext.Token {
	toks, end, _, err := jsontext.Tokenize(nil, in, 0, 10000, jsontext.Lenient)
	ok := err == nil && end == len(in)
	if ok != valid {
		t.Fatalf("tokenizer ok = %v (%v), encoding/json valid = %v for %q", ok, err, valid, in)
	}
	_, send, _, serr := jsontext.Tokenize(nil, in, 0, 10000, jsontext.Strict)
	if sok := serr == nil && send == len(in); sok && !ok || ok && !sok && serr.Code != jsontext.ErrUTF8 && serr.Code != jsontext.ErrSurrogate {
		t.Fatalf("strict tokenizer: %v, lenient ok = %v for %q", serr, ok, in)
	}
	if !ok {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if got, _ := valueOf(in, toks, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("tokens decode to %#v, encoding/json to %#v for %q", got, want, in)
	}
	return toks
}

// valueOf is token i as encoding/json decodes into any with UseNumber.
func valueOf(in []byte, toks []jsontext.Token, i int32) (any, int32) {
	tk := &toks[i]
	switch tk.Kind {
	case jsontext.Object:
		m := map[string]any{}
		for j := i + 1; j < tk.Next; {
			var v any
			k := string(jsontext.Unescape(nil, toks[j].Body(in)))
			v, j = valueOf(in, toks, j+1)
			m[k] = v
		}
		return m, tk.Next
	case jsontext.Array:
		a := []any{}
		for j := i + 1; j < tk.Next; {
			var v any
			v, j = valueOf(in, toks, j)
			a = append(a, v)
		}
		return a, tk.Next
	case jsontext.String:
		return string(jsontext.Unescape(nil, tk.Body(in))), tk.Next
	case jsontext.Number:
		return json.Number(in[tk.Start:tk.End]), tk.Next
	case jsontext.True, jsontext.False:
		return tk.Kind == jsontext.True, tk.Next
	}
	return nil, tk.Next
}

// checkBlocks: an accepted array is the compact input; a syntax error is
// the Strict tokenizer's first error on the whole input, word for word.
func checkBlocks(t *testing.T, in []byte) {
	out, err := blocks.Validate(in, blocks.Policy{Interactive: true, FileVisible: func(string) bool { return true }})
	_, end, _, serr := jsontext.Tokenize(nil, in, 0, 32, jsontext.Strict)
	if err == nil {
		var want bytes.Buffer
		if serr != nil || end != len(in) || json.Compact(&want, in) != nil || !bytes.Equal(out, want.Bytes()) {
			t.Fatalf("Blocks accepted %q as %q; tokenizer: %v", in, out, serr)
		}
		return
	}
	reason := err.(*blocks.Error).Reason
	what, ok := strings.CutPrefix(reason, "is not valid JSON: ")
	if !ok {
		return // a rule of Blocks, checked before any later syntax error
	}
	want := "unexpected data after the array at byte " + strconv.Itoa(end)
	if serr != nil {
		want = serr.Code.String() + " at byte " + strconv.Itoa(serr.Offset)
		if serr.Code == jsontext.ErrDepth {
			want = "nesting deeper than 32 levels at byte " + strconv.Itoa(serr.Offset)
		}
	}
	if what != want {
		t.Fatalf("Blocks: %q, tokenizer: %q for %q", what, want, in)
	}
}

// checkManifest: a manifest is refused as not JSON exactly when
// encoding/json refuses it.
func checkManifest(t *testing.T, in []byte, valid bool) {
	if n := utf8.RuneCount(in); !utf8.Valid(in) || n < manifest.MinTextLen || n > manifest.MaxTextLen {
		return // refused before it is read as JSON
	}
	_, problems := manifest.Parse(string(in))
	notJSON := len(problems) == 1 && strings.HasPrefix(problems[0].Message, "manifest is not valid JSON")
	if notJSON == valid {
		t.Fatalf("manifest: %v, encoding/json valid = %v for %q", problems, valid, in)
	}
}

// checkStrict: the strict reader accepts valid JSON without a repeated key
// that encoding/json can decode, and decodes it as encoding/json does.
func checkStrict(t *testing.T, in []byte, valid bool, toks []jsontext.Token) {
	var got, want any
	err := input.DecodeJSON(in, &got)
	if !valid {
		if err == nil {
			t.Fatalf("strict reader accepted %q", in)
		}
		return
	}
	// Keys without escapes are compared as written, not as decoded: a
	// key of invalid UTF-8 is kept apart from another (as before jsontext).
	if !utf8.Valid(in) {
		return
	}
	if werr := json.Unmarshal(in, &want); werr != nil {
		// Valid JSON that no Go value holds (a number past float64's
		// range): the strict reader refuses it as encoding/json does.
		if err == nil {
			t.Fatalf("strict reader accepted %q, which encoding/json cannot decode: %v", in, werr)
		}
		return
	}
	if repeated := hasRepeatedKey(in, toks); (err == nil) == repeated {
		t.Fatalf("strict reader: %v, repeated key: %v for %q", err, repeated, in)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("strict reader decoded %#v, encoding/json %#v for %q", got, want, in)
	}
}

func hasRepeatedKey(in []byte, toks []jsontext.Token) bool {
	for i := range toks {
		if toks[i].Kind != jsontext.Object {
			continue
		}
		seen := map[string]bool{}
		for j := int32(i) + 1; j < toks[i].Next; j = toks[j+1].Next {
			k := string(jsontext.Unescape(nil, toks[j].Body(in)))
			if seen[k] {
				return true
			}
			seen[k] = true
		}
	}
	return false
}

// checkFast: whatever the fast paths take, they decode as the strict reader.
func checkFast(t *testing.T, in []byte) {
	var post, postWant postBody
	if post.decodeFast(in) {
		if err := input.DecodeJSON(in, &postWant); err != nil || !reflect.DeepEqual(post, postWant) {
			t.Fatalf("post fast path %+v, strict reader %+v (%v) for %q", post, postWant, err, in)
		}
	}
	var hook, hookWant hookPostBody
	if hook.decodeFast(in) {
		if err := input.DecodeJSON(in, &hookWant); err != nil || !reflect.DeepEqual(hook, hookWant) {
			t.Fatalf("hook fast path %+v, strict reader %+v (%v) for %q", hook, hookWant, err, in)
		}
	}
}

// checkEscapes: EncodingJSON writes what encoding/json writes, Slog what
// log/slog's JSON handler writes, and Minimal a string that decodes to the
// same text with nothing escaped but what JSON requires.
func checkEscapes(t *testing.T, s string) {
	std, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsontext.AppendString(nil, s, jsontext.EncodingJSON); !bytes.Equal(got, std) {
		t.Fatalf("EncodingJSON(%q) = %s, encoding/json %s", s, got, std)
	}
	var out bytes.Buffer
	slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}})).Info("", "s", s)
	want := strings.TrimSuffix(strings.TrimPrefix(out.String(), `{"msg":"","s":`), "}\n")
	if got := jsontext.AppendString(nil, s, jsontext.Slog); string(got) != want {
		t.Fatalf("Slog(%q) = %s, log/slog %s", s, got, want)
	}
	minimal := jsontext.AppendString(nil, s, jsontext.Minimal)
	var back, stdBack string
	if json.Unmarshal(minimal, &back) != nil || json.Unmarshal(std, &stdBack) != nil || back != stdBack {
		t.Fatalf("Minimal(%q) = %s does not decode as encoding/json's %s", s, minimal, std)
	}
	for i := 0; i < len(minimal); i++ {
		if minimal[i] != '\\' {
			continue
		}
		if minimal[i+1] == 'u' && string(minimal[i+2:i+4]) != "00" {
			t.Fatalf("Minimal(%q) = %s escapes more than JSON requires", s, minimal)
		}
		i++
	}
}
