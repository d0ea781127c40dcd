// Package jsontext is kitd's one JSON tokenizer and one JSON string
// escaper. kitd reads JSON by hand where encoding/json would cost too much
// or lose what a rule needs (key order, repeated keys, byte offsets): the
// Blocks validator (internal/blocks), the manifest reader
// (internal/manifest), the strict-keys walk of request bodies
// (http/internal/input) and the fast path of POST /messages (http/api).
// They share this package's lexical layer, as encoding/json shares one
// scanner between Valid, Compact, Indent and decoding:
//
//   - Tokenize appends the tokens of one value to a flat list in document
//     order (a container is followed by its contents; Next skips them), the
//     readers that look at a whole value (Blocks, manifests) walk the list;
//   - ScanString, PlainString, Plain, ScanNumber, SkipSpace and Unescape
//     are the pieces for readers that walk the bytes beside something else
//     (the strict walk follows a Go type; the fast path a fixed shape).
//
// What valid JSON is, is encoding/json's answer (RFC 8259), and a decoded
// string is exactly what encoding/json decodes; Strict mode also refuses
// invalid UTF-8 and lone surrogate escapes, which encoding/json replaces by
// U+FFFD. FuzzReadersAgree in http/api holds every reader to that.
//
// AppendString writes a JSON string in one of the escapings kitd answers
// with (Profile). The package knows no schema, no error body and no HTTP:
// each reader words its own errors from a *SyntaxError.
package jsontext

import "strconv"

// Kind is the JSON type of a token.
type Kind uint8

const (
	Object Kind = iota + 1
	Array
	String
	Number
	True
	False
	Null
)

// Token is one JSON value or object key. Tokens are stored in document
// order, so a container's contents follow it and Next skips over them; an
// object's members alternate key, value.
type Token struct {
	Start int32 // offset of the first byte in the input
	// End is the offset after the last byte of a scalar (a string's closing
	// quote included), or the offset of a container's closing bracket.
	End  int32
	Next int32 // index of the first token after this value
	// N is a container's count of members or elements, or a string's
	// length in code points when it has no escapes; it stops at MaxN. Two
	// bytes keep a token at 16, which Blocks' tokenizing time feels.
	N     uint16
	Kind  Kind
	Flags uint8
}

// MaxN is the largest Token.N: a count or length of MaxN means MaxN or more.
const MaxN = 1<<16 - 1

// Flags of string tokens.
const (
	Escaped uint8 = 1 << iota // has a backslash escape: Unescape decodes it
	Control                   // has DEL or a C1 control character
)

// Body is the text of string token t of raw, quotes left out, escapes not
// decoded.
func (t *Token) Body(raw []byte) []byte { return raw[t.Start+1 : t.End-1] }

// Code says what is wrong at a SyntaxError's offset.
type Code uint8

const (
	ErrEnd Code = iota + 1
	ErrChar
	ErrKey
	ErrColon
	ErrLiteral
	ErrDepth
	ErrUnterminated
	ErrUEscape
	ErrSurrogate
	ErrEscape
	ErrControl
	ErrUTF8
)

var codeText = [...]string{
	ErrEnd:          "unexpected end",
	ErrChar:         "unexpected character",
	ErrKey:          "expected a string key",
	ErrColon:        "expected ':'",
	ErrLiteral:      "invalid literal",
	ErrDepth:        "nesting too deep",
	ErrUnterminated: "unterminated string",
	ErrUEscape:      `invalid \u escape`,
	ErrSurrogate:    "unpaired surrogate escape",
	ErrEscape:       "invalid escape",
	ErrControl:      "control character in string",
	ErrUTF8:         "invalid UTF-8",
}

func (c Code) String() string { return codeText[c] }

// SyntaxError is where the input stops being JSON and why.
type SyntaxError struct {
	Offset int
	Code   Code
}

func (e *SyntaxError) Error() string {
	return "jsontext: " + e.Code.String() + " at byte " + strconv.Itoa(e.Offset)
}

func errAt(at int, c Code) *SyntaxError { return &SyntaxError{Offset: at, Code: c} }

// IsSpace reports whether c is JSON's insignificant white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// SkipSpace returns the offset of the first byte at or after i that is not
// white space.
func SkipSpace(raw []byte, i int) int {
	for i < len(raw) && IsSpace(raw[i]) {
		i++
	}
	return i
}

// HasLiteral reports whether raw holds lit at offset i.
func HasLiteral(raw []byte, i int, lit string) bool {
	return len(raw)-i >= len(lit) && string(raw[i:i+len(lit)]) == lit
}
