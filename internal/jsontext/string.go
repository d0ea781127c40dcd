package jsontext

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// strClass marks the bytes that end the fast path of string scanning:
// quote, backslash, control characters, DEL and the start of multi-byte
// UTF-8.
var strClass = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x7f; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// Plain reports whether c stands in a string as itself, ending nothing and
// starting no escape or multi-byte sequence: printable ASCII but '"' and
// '\\'. A loop over Plain inlines where PlainString, which reads eight
// bytes at a time, does not: the better choice for short strings.
func Plain(c byte) bool { return !strClass[c] }

// specialMask sets the high bit of the bytes of x that are in strClass. Only
// the lowest set bit is exact (a borrow can mark a byte above a match), which
// is all the callers use.
func specialMask(x uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	q, bs := x^('"'*ones), x^('\\'*ones)
	quote := (q - ones) & ^q & high
	bslash := (bs - ones) & ^bs & high
	low := (x - 0x20*ones) & ^x & high     // some byte < 0x20
	del := ((x &^ high) + ones | x) & high // some byte >= 0x7f
	return quote | bslash | low | del
}

// PlainString scans the string whose opening quote is raw[i] up to its
// first byte that is not printable ASCII or is a backslash, eight bytes at
// a time. When that byte is the closing quote (most keys and values are
// plain) it returns the offset after it; else 0 and the offset of that byte
// (len(raw) when the string is not closed).
func PlainString(raw []byte, i int) (end, stop int) {
	j := i + 1
	for j+8 <= len(raw) {
		if m := specialMask(binary.LittleEndian.Uint64(raw[j:])); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			if raw[j] == '"' {
				return j + 1, j
			}
			return 0, j
		}
		j += 8
	}
	for j < len(raw) && !strClass[raw[j]] {
		j++
	}
	if j < len(raw) && raw[j] == '"' {
		return j + 1, j
	}
	return 0, j
}

// ScanString checks the string whose opening quote is raw[i] and returns
// the offset after its closing quote and its flags (Escaped, Control).
func ScanString(raw []byte, i int, mode Mode) (end int, flags uint8, _ *SyntaxError) {
	end, stop := PlainString(raw, i)
	if end != 0 {
		return end, 0, nil
	}
	end, _, flags, err := scanString(raw, i, stop, mode)
	return end, flags, err
}

// scanString scans the string starting at the quote raw[i], from offset
// from on (the bytes before it are printable ASCII), and returns the offset
// just past its closing quote, its length in code points (when it has no
// escapes) and its flags.
func scanString(raw []byte, i, from int, mode Mode) (end, chars int, flags uint8, _ *SyntaxError) {
	n := len(raw)
	j := from
	extra := 0 // bytes beyond the first of multi-byte sequences
	for {
		for j+8 <= n {
			if m := specialMask(binary.LittleEndian.Uint64(raw[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < n && !strClass[raw[j]] {
			j++
		}
		if j >= n {
			return 0, 0, 0, errAt(j, ErrUnterminated)
		}
		switch c := raw[j]; {
		case c == '"':
			return j + 1, j - i - 1 - extra, flags, nil
		case c == '\\':
			flags |= Escaped
			if j+1 >= n {
				return 0, 0, 0, errAt(j, ErrUnterminated)
			}
			switch raw[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				r, ok := hex4(raw, j+2)
				if !ok {
					return 0, 0, 0, errAt(j, ErrUEscape)
				}
				j += 6
				if mode == Lenient || r < 0xd800 || r > 0xdfff {
					break
				}
				if r >= 0xdc00 {
					return 0, 0, 0, errAt(j-6, ErrSurrogate)
				}
				// A high surrogate must be followed by an escaped low one.
				lo, ok := rune(0), j+1 < n && raw[j] == '\\' && raw[j+1] == 'u'
				if ok {
					lo, ok = hex4(raw, j+2)
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return 0, 0, 0, errAt(j-6, ErrSurrogate)
				}
				j += 6
			default:
				return 0, 0, 0, errAt(j, ErrEscape)
			}
		case c < 0x20:
			return 0, 0, 0, errAt(j, ErrControl)
		case c == 0x7f:
			flags |= Control
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 && mode == Strict {
				return 0, 0, 0, errAt(j, ErrUTF8)
			}
			if r < 0xa0 && r >= 0x80 {
				flags |= Control
			}
			extra += size - 1
			j += size
		}
	}
}

func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Unescape appends the decoded text of a string body (the bytes between
// the quotes) that ScanString or Tokenize accepted, exactly as
// encoding/json decodes it: a lone surrogate escape and each byte of
// invalid UTF-8 become U+FFFD.
func Unescape(dst, body []byte) []byte {
	for i := 0; i < len(body); {
		c := body[i]
		if c == '\\' {
			dst, i = unescapeOne(dst, body, i)
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, body[i:i+size]...)
		}
		i += size
	}
	return dst
}

// unescapeOne appends the escape at body[i] and returns the offset after it.
func unescapeOne(dst, body []byte, i int) ([]byte, int) {
	switch body[i+1] {
	case 'b':
		return append(dst, '\b'), i + 2
	case 'f':
		return append(dst, '\f'), i + 2
	case 'n':
		return append(dst, '\n'), i + 2
	case 'r':
		return append(dst, '\r'), i + 2
	case 't':
		return append(dst, '\t'), i + 2
	case 'u':
		r, _ := hex4(body, i+2)
		i += 6
		if r >= 0xd800 && r <= 0xdfff {
			// A pair is one rune; anything else is U+FFFD, and what
			// follows is read on its own.
			if r < 0xdc00 && i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
				if lo, ok := hex4(body, i+2); ok && lo >= 0xdc00 && lo <= 0xdfff {
					return utf8.AppendRune(dst, 0x10000+(r-0xd800)<<10+(lo-0xdc00)), i + 6
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(dst, r), i
	}
	return append(dst, body[i+1]), i + 2 // '"', '\\', '/'
}
