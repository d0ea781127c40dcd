package jsontext

import (
	"strings"
	"unicode/utf8"
)

// Profile is one way of escaping a JSON string. Every profile escapes '"',
// '\\' and the control characters, as JSON requires; they differ in the
// rest, each matching the writer whose output kitd must equal byte for
// byte.
type Profile uint8

const (
	// EncodingJSON is encoding/json's escaping, the API's answers: '<',
	// '>', '&', U+2028 and U+2029 escaped too, '\b' and '\f' short, and
	// invalid UTF-8 written as \ufffd.
	EncodingJSON Profile = iota
	// Slog is log/slog's JSON handler's (the request log): encoding/json's
	// but for '<', '>' and '&', which it keeps, and '\b' and '\f', which
	// it writes as \u0008 and \u000c.
	Slog
	// Minimal escapes only what JSON requires, with the short escapes
	// where JSON has them; everything else, U+2028 and U+2029 included,
	// is written as UTF-8 (invalid UTF-8 as U+FFFD). Manifests' canonical
	// form uses it, so "\u00e9" and "é" give the same bytes.
	Minimal
)

// escaping is what a Profile means.
type escaping struct {
	kept       [utf8.RuneSelf]bool // ASCII bytes written as they are
	shortBAndF bool                // '\b' and '\f' as two characters, not \u0008, \u000c
	lineSeps   bool                // U+2028 and U+2029 escaped (JavaScript's line ends)
	rawInvalid bool                // invalid UTF-8 as U+FFFD itself, not \ufffd
}

var escapings = [...]escaping{
	EncodingJSON: newEscaping("<>&", true, true, false),
	Slog:         newEscaping("", false, true, false),
	Minimal:      newEscaping("", true, false, true),
}

func newEscaping(html string, shortBAndF, lineSeps, rawInvalid bool) (e escaping) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		e.kept[c] = c != '"' && c != '\\' && strings.IndexByte(html, c) < 0
	}
	e.shortBAndF, e.lineSeps, e.rawInvalid = shortBAndF, lineSeps, rawInvalid
	return e
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a quoted JSON string, escaped as p says.
func AppendString(b []byte, s string, p Profile) []byte {
	e := &escapings[p]
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
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			if e.rawInvalid {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, `\ufffd`...)
			}
			start = i + size
		case (r == '\u2028' || r == '\u2029') && e.lineSeps:
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscaped writes the escape of the ASCII byte c, which e does not keep.
func appendEscaped(b []byte, c byte, e *escaping) []byte {
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
