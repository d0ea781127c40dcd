package blocks

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// kind is the JSON type of a token.
type kind uint8

const (
	kObject kind = iota + 1
	kArray
	kString
	kNumber
	kTrue
	kFalse
	kNull
)

// tok is one JSON value or object key. Tokens are stored in document order,
// so a container's contents follow it and next skips over them; an object's
// members alternate key, value. Indices are relative to the block being
// checked: one list is reused for every block.
type tok struct {
	start int32  // offset of the first byte in the input
	next  int32  // index of the first token after this value
	size  uint16 // scalars: length in bytes (strings with quotes); containers: members or elements
	chars uint16 // strings without escapes: length in code points
	kind  kind
	flags uint8
}

// Flags of string tokens. Strings without escapes are fully measured while
// scanning, so text checks never read them again; only escaped strings are
// decoded and measured by checkText.
const (
	fEsc  uint8 = 1 << iota // contains a backslash escape
	fCtrl                   // contains DEL or a C1 control character
)

// size holds byte lengths and counts, both bounded by the input size.
const _ = uint16(MaxBytes)

func (t *tok) end() int32 { return t.start + int32(t.size) }

// maxDepth bounds nesting, the blocks array included. The deepest valid
// Blocks document has 6 levels (blocks, block, elements, select, options,
// option); the margin only makes the error about depth rather than shape.
const maxDepth = 32

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

// plainString scans the string at raw[i] eight bytes at a time up to its
// first special byte. It returns the end of the string when that byte is
// the closing quote (most keys and values are printable ASCII), or 0 and
// the offset where scanString must go on.
func plainString(raw []byte, i int) (end, stop int) {
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
	return 0, j
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func syntaxErr(at int, what string) *Error {
	return &Error{Path: "blocks", Reason: "is not valid JSON: " + what + " at byte " + strconv.Itoa(at)}
}

// tokenizeValue checks that raw holds one well-formed JSON value (RFC 8259,
// UTF-8, no lone surrogate escapes) starting at offset i, nested at most
// maxNest levels, and appends its tokens to toks. It returns the offset
// after the value and any whitespace that follows it; spaced reports whether
// the value contains or is followed by insignificant whitespace, i.e.
// whether copying it would not be compact.
func tokenizeValue(raw []byte, i int, toks []tok, maxNest int) (_ []tok, end int, spaced bool, _ *Error) {
	const (
		wantValue = iota
		wantKey
		wantNext // after a value: ',' or a closing bracket
	)
	var stack [maxDepth]int32 // open containers
	var count [maxDepth]int32 // their members or elements so far
	depth, n := 0, len(raw)
	state := wantValue
	for {
		s := i
		for i < n && isSpace(raw[i]) {
			i++
		}
		if i != s {
			spaced = true
		}
		switch state {
		case wantValue:
			if i >= n {
				return nil, 0, false, syntaxErr(i, "unexpected end")
			}
			if depth > 0 && toks[stack[depth-1]].kind == kArray {
				count[depth-1]++
			}
			idx := int32(len(toks))
			c := raw[i]
			switch c {
			case '{', '[':
				if depth == maxNest {
					return nil, 0, false, syntaxErr(i, "nesting deeper than "+strconv.Itoa(maxDepth)+" levels")
				}
				k, closer := kObject, byte('}')
				if c == '[' {
					k, closer = kArray, ']'
				}
				toks = push(toks, int32(i), 0, 0, 0, k, 0)
				i++
				s = i
				for i < n && isSpace(raw[i]) {
					i++
				}
				if i != s {
					spaced = true
				}
				if i < n && raw[i] == closer {
					i++
					toks[idx].next = idx + 1
					state = wantNext
					continue
				}
				stack[depth], count[depth] = idx, 0
				depth++
				if k == kObject {
					state = wantKey
				}
				continue
			case '"':
				end, stop := plainString(raw, i)
				if end != 0 {
					toks = push(toks, int32(i), idx+1, end-i, end-i-2, kString, 0)
					i = end
					break
				}
				end, chars, flags, err := scanString(raw, i, stop)
				if err != nil {
					return nil, 0, false, err
				}
				toks = push(toks, int32(i), idx+1, end-i, chars, kString, flags)
				i = end
			case 't', 'f', 'n':
				lit, k := "null", kNull
				if c == 't' {
					lit, k = "true", kTrue
				} else if c == 'f' {
					lit, k = "false", kFalse
				}
				if n-i < len(lit) || string(raw[i:i+len(lit)]) != lit {
					return nil, 0, false, syntaxErr(i, "invalid literal")
				}
				toks = push(toks, int32(i), idx+1, len(lit), 0, k, 0)
				i += len(lit)
			default:
				end := scanNumber(raw, i)
				if end < 0 {
					return nil, 0, false, syntaxErr(i, "unexpected character")
				}
				toks = push(toks, int32(i), idx+1, end-i, 0, kNumber, 0)
				i = end
			}
			state = wantNext
		case wantKey:
			if i >= n || raw[i] != '"' {
				return nil, 0, false, syntaxErr(i, "expected a string key")
			}
			count[depth-1]++
			idx := int32(len(toks))
			if end, stop := plainString(raw, i); end != 0 {
				toks = push(toks, int32(i), idx+1, end-i, end-i-2, kString, 0)
				i = end
			} else {
				end, chars, flags, err := scanString(raw, i, stop)
				if err != nil {
					return nil, 0, false, err
				}
				toks = push(toks, int32(i), idx+1, end-i, chars, kString, flags)
				i = end
			}
			s = i
			for i < n && isSpace(raw[i]) {
				i++
			}
			if i != s {
				spaced = true
			}
			if i >= n || raw[i] != ':' {
				return nil, 0, false, syntaxErr(i, "expected ':'")
			}
			i++
			state = wantValue
		case wantNext:
			if depth == 0 {
				return toks, i, spaced, nil
			}
			if i >= n {
				return nil, 0, false, syntaxErr(i, "unexpected end")
			}
			p := stack[depth-1]
			c := raw[i]
			i++
			switch {
			case c == ',':
				if toks[p].kind == kObject {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == '}' && toks[p].kind == kObject, c == ']' && toks[p].kind == kArray:
				toks[p].next, toks[p].size = int32(len(toks)), uint16(count[depth-1])
				depth--
			default:
				return nil, 0, false, syntaxErr(i-1, "unexpected character")
			}
		}
	}
}

// push appends a token field by field: building a tok value and copying it
// costs a store-forwarding stall per token, a third of the tokenizer's time.
func push(toks []tok, start, next int32, size, chars int, k kind, flags uint8) []tok {
	if len(toks) == cap(toks) {
		toks = append(toks, tok{})[:len(toks)]
	}
	toks = toks[:len(toks)+1]
	t := &toks[len(toks)-1]
	t.start, t.next, t.size, t.chars, t.kind, t.flags = start, next, uint16(size), uint16(chars), k, flags
	return toks
}

// scanString scans the string starting at the quote raw[i], from offset
// from on (the bytes before it are printable ASCII), and returns the offset
// just past its closing quote, its length in code points (when it has no
// escapes) and its flags.
func scanString(raw []byte, i, from int) (end, chars int, flags uint8, _ *Error) {
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
			return 0, 0, 0, syntaxErr(j, "unterminated string")
		}
		switch c := raw[j]; {
		case c == '"':
			return j + 1, j - i - 1 - extra, flags, nil
		case c == '\\':
			flags |= fEsc
			if j+1 >= n {
				return 0, 0, 0, syntaxErr(j, "unterminated string")
			}
			switch raw[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				r, ok := hex4(raw, j+2)
				if !ok {
					return 0, 0, 0, syntaxErr(j, "invalid \\u escape")
				}
				j += 6
				switch {
				case r >= 0xdc00 && r <= 0xdfff:
					return 0, 0, 0, syntaxErr(j-6, "unpaired surrogate escape")
				case r >= 0xd800 && r <= 0xdbff:
					// A high surrogate must be followed by an escaped low one.
					lo, ok := rune(0), j+1 < n && raw[j] == '\\' && raw[j+1] == 'u'
					if ok {
						lo, ok = hex4(raw, j+2)
					}
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return 0, 0, 0, syntaxErr(j-6, "unpaired surrogate escape")
					}
					j += 6
				}
			default:
				return 0, 0, 0, syntaxErr(j, "invalid escape")
			}
		case c < 0x20:
			return 0, 0, 0, syntaxErr(j, "control character in string")
		case c == 0x7f:
			flags |= fCtrl
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, 0, syntaxErr(j, "invalid UTF-8")
			}
			if r < 0xa0 {
				flags |= fCtrl
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

// scanNumber returns the end of the JSON number at raw[i], or -1.
func scanNumber(raw []byte, i int) int {
	n := len(raw)
	if i < n && raw[i] == '-' {
		i++
	}
	switch {
	case i < n && raw[i] == '0':
		i++
	case i < n && raw[i] >= '1' && raw[i] <= '9':
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < n && raw[i] == '.' {
		i++
		d := i
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == d {
			return -1
		}
	}
	if i < n && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < n && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		d := i
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == d {
			return -1
		}
	}
	return i
}

// unescape appends the decoded content of a string token whose body (the
// bytes between the quotes) tokenize has already checked.
func unescape(dst, body []byte) []byte {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch body[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(body, i+2)
			if r >= 0xd800 && r <= 0xdbff {
				lo, _ := hex4(body, i+8)
				r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			dst = append(dst, body[i+1])
		}
		i += 2
	}
	return dst
}
