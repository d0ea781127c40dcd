package jsontext

import (
	"strings"
	"testing"
)

// TestTokenize: one row a rule of the grammar; error offsets are what
// Blocks' and the manifest's errors report.
func TestTokenize(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		mode  Mode
		depth int
		code  Code // 0: accepted
		at    int
	}{
		{"a scalar alone is a value", ` 1 `, Strict, 4, 0, 0},
		{"containers nest up to the depth", `[[{"a":[]}]]`, Strict, 4, 0, 0},
		{"one container deeper is refused at its bracket", `[[[[[]]]]]`, Strict, 4, ErrDepth, 4},
		{"a depth of 10000 costs no stack", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), Lenient, 10000, 0, 0},
		{"an empty input ends unexpectedly", ``, Strict, 4, ErrEnd, 0},
		{"an unclosed array ends unexpectedly", `[1,`, Strict, 4, ErrEnd, 3},
		{"a trailing comma is an unexpected character", `[1,]`, Strict, 4, ErrChar, 3},
		{"a missing comma is an unexpected character", `[1 2]`, Strict, 4, ErrChar, 3},
		{"a mismatched bracket is an unexpected character", `[1}`, Strict, 4, ErrChar, 2},
		{"an object key must be a string", `{1:2}`, Strict, 4, ErrKey, 1},
		{"a key needs a colon", `{"a" 1}`, Strict, 4, ErrColon, 5},
		{"literals are spelled out", `[tru]`, Strict, 4, ErrLiteral, 1},
		{"a leading zero ends the number", `01`, Strict, 4, 0, 0},
		{"a number needs digits after the point", `1.`, Strict, 4, ErrChar, 0},
		{"a number needs digits in the exponent", `1e+`, Strict, 4, ErrChar, 0},
		{"a plus sign starts no number", `+1`, Strict, 4, ErrChar, 0},
		{"an unterminated string", `"abc`, Strict, 4, ErrUnterminated, 4},
		{"a backslash at the end is unterminated", `"abc\`, Strict, 4, ErrUnterminated, 4},
		{"an unknown escape", `"\x"`, Strict, 4, ErrEscape, 1},
		{"a \\u escape needs four hex digits", `"\u12x4"`, Strict, 4, ErrUEscape, 1},
		{"a control character in a string", "\"a\x01\"", Strict, 4, ErrControl, 2},
		{"DEL in a string is allowed", "\"a\x7f\"", Strict, 4, 0, 0},
		{"a surrogate pair is one character", `"\ud83d\ude00"`, Strict, 4, 0, 0},
		{"Strict: a lone high surrogate is refused", `"\ud800x"`, Strict, 4, ErrSurrogate, 1},
		{"Strict: a lone low surrogate is refused", `"\udc00"`, Strict, 4, ErrSurrogate, 1},
		{"Lenient: a lone surrogate is accepted", `"\ud800x"`, Lenient, 4, 0, 0},
		{"Strict: invalid UTF-8 is refused", "\"a\xff\"", Strict, 4, ErrUTF8, 2},
		{"Lenient: invalid UTF-8 is accepted", "\"a\xff\"", Lenient, 4, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := Tokenize(nil, []byte(tt.in), 0, tt.depth, tt.mode)
			switch {
			case tt.code == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.code != 0 && (err == nil || err.Code != tt.code || err.Offset != tt.at):
				t.Fatalf("got %v, want %v at byte %d", err, tt.code, tt.at)
			}
		})
	}
}

// TestTokens: the list the readers walk.
func TestTokens(t *testing.T) {
	in := []byte(`{"a": [1, "x\n"], "é":{}} `)
	toks, end, spaced, err := Tokenize(nil, in, 0, 4, Strict)
	if err != nil || end != len(in) || !spaced {
		t.Fatalf("end %d, spaced %v, %v", end, spaced, err)
	}
	for i, w := range []struct {
		kind Kind
		next int32
		n    uint16
	}{{Object, 7, 2}, {String, 2, 1}, {Array, 5, 2}, {Number, 4, 0}, {String, 5, 0}, {String, 6, 1}, {Object, 7, 0}} {
		if tk := toks[i]; tk.Kind != w.kind || tk.Next != w.next || tk.Kind != String && tk.N != w.n {
			t.Errorf("token %d = %+v, want kind %d next %d n %d", i, tk, w.kind, w.next, w.n)
		}
	}
	if toks[4].Flags != Escaped || toks[5].N != 1 || string(toks[5].Body(in)) != "é" {
		t.Errorf("strings: %+v %+v", toks[4], toks[5])
	}
	if in[toks[2].End] != ']' || in[toks[0].End] != '}' {
		t.Errorf("a container's End is its closing bracket")
	}
}

// TestUnescape: decoded as encoding/json decodes (FuzzReadersAgree in
// http/api compares the two on any input).
func TestUnescape(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"short escapes", `\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t"},
		{"a \\u escape", `\u00e9`, "é"},
		{"a surrogate pair", `\ud83d\ude00`, "😀"},
		{"a lone high surrogate is U+FFFD", `\ud800x`, "\ufffdx"},
		{"a lone low surrogate is U+FFFD", `\udc00`, "\ufffd"},
		{"a high surrogate before a non-low escape", `\ud800\u0041`, "\ufffdA"},
		{"each byte of invalid UTF-8 is U+FFFD", "\xff\xfe", "\ufffd\ufffd"},
		{"valid UTF-8 is kept", "é😀", "é😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Unescape(nil, []byte(tt.body))); got != tt.want {
				t.Fatalf("%q, want %q", got, tt.want)
			}
		})
	}
}

// TestAppendString: one row a difference between the profiles.
func TestAppendString(t *testing.T) {
	tests := []struct {
		name, in              string
		encodingJSON, slog, m string
	}{
		{"quote and backslash", `a"\`, `"a\"\\"`, `"a\"\\"`, `"a\"\\"`},
		{"HTML characters: encoding/json only", `<>&`, `"\u003c\u003e\u0026"`, `"<>&"`, `"<>&"`},
		{"\\b and \\f: short but in slog", "\b\f", `"\b\f"`, `"\u0008\u000c"`, `"\b\f"`},
		{"other controls as \\u00XX", "\x00\x1f\n\r\t", `"\u0000\u001f\n\r\t"`, `"\u0000\u001f\n\r\t"`, `"\u0000\u001f\n\r\t"`},
		{"line separators: kept by Minimal", "\u2028\u2029", `"\u2028\u2029"`, `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"invalid UTF-8: raw U+FFFD in Minimal", "a\xffb", `"a\ufffdb"`, `"a\ufffdb"`, "\"a\ufffdb\""},
		{"DEL and non-ASCII are kept", "\x7fé", "\"\x7fé\"", "\"\x7fé\"", "\"\x7fé\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for p, want := range map[Profile]string{EncodingJSON: tt.encodingJSON, Slog: tt.slog, Minimal: tt.m} {
				if got := string(AppendString(nil, tt.in, p)); got != want {
					t.Errorf("profile %d: %s, want %s", p, got, want)
				}
			}
		})
	}
}

// TestPlainString: the fast path stops at anything but printable ASCII.
func TestPlainString(t *testing.T) {
	tests := []struct {
		name, in  string
		end, stop int
	}{
		{"short plain", `"ab"`, 4, 3},
		{"long plain", `"abcdefghijklmnop"`, 18, 17},
		{"an escape stops it", `"abcdefgh\n"`, 0, 9},
		{"non-ASCII stops it", `"é"`, 0, 1},
		{"unterminated", `"abc`, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if end, stop := PlainString([]byte(tt.in), 0); end != tt.end || stop != tt.stop {
				t.Fatalf("end %d stop %d, want %d %d", end, stop, tt.end, tt.stop)
			}
		})
	}
}

// TestCountsStopAtMaxN: a count or length past MaxN reads MaxN, never a
// small number.
func TestCountsStopAtMaxN(t *testing.T) {
	long := `"` + strings.Repeat("a", MaxN+10) + `"`
	many := "[" + strings.Repeat("1,", MaxN+10) + "1]"
	for _, in := range []string{long, many} {
		toks, _, _, err := Tokenize(nil, []byte(in), 0, 4, Strict)
		if err != nil || toks[0].N != MaxN {
			t.Fatalf("N = %d, %v", toks[0].N, err)
		}
	}
}
