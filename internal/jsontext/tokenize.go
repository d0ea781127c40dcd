package jsontext

// Mode says which strings a reader accepts.
type Mode uint8

const (
	// Lenient accepts every string encoding/json accepts: invalid UTF-8
	// and lone surrogate escapes decode to U+FFFD.
	Lenient Mode = iota
	// Strict refuses invalid UTF-8 and lone surrogate escapes: text that
	// is stored and shown as it was sent must mean what it says.
	Strict
)

// Tokenize checks that raw holds one JSON value starting at offset i (white
// space before it allowed), nested at most maxDepth containers deep, and
// appends its tokens to toks. It returns the offset after the value and any
// white space that follows it; spaced reports whether the value contains
// or is followed by white space, i.e. whether copying it would not be
// compact. Token indices are relative to toks[0], whatever toks held.
func Tokenize(toks []Token, raw []byte, i, maxDepth int, mode Mode) (_ []Token, end int, spaced bool, _ *SyntaxError) {
	const (
		wantValue = iota
		wantKey
		wantNext // after a value: ',' or a closing bracket
	)
	// While a container is open its Next holds the index of the container
	// around it (-1: none) and N counts its contents so far, so nesting
	// costs no stack of its own.
	cur, depth, n := int32(-1), 0, len(raw)
	state := wantValue
	for {
		s := i
		for i < n && IsSpace(raw[i]) {
			i++
		}
		if i != s {
			spaced = true
		}
		switch state {
		case wantKey:
			if i >= n || raw[i] != '"' {
				return nil, 0, false, errAt(i, ErrKey)
			}
			count(&toks[cur])
		case wantValue:
			if i >= n {
				return nil, 0, false, errAt(i, ErrEnd)
			}
			if cur >= 0 && toks[cur].Kind == Array {
				count(&toks[cur])
			}
			idx := int32(len(toks))
			switch c := raw[i]; c {
			case '"':
				goto str
			case '{', '[':
				if depth == maxDepth {
					return nil, 0, false, errAt(i, ErrDepth)
				}
				k, closer := Object, byte('}')
				if c == '[' {
					k, closer = Array, ']'
				}
				toks = push(toks, int32(i), 0, cur, 0, k, 0)
				i++
				s = i
				for i < n && IsSpace(raw[i]) {
					i++
				}
				if i != s {
					spaced = true
				}
				if i < n && raw[i] == closer {
					toks[idx].End, toks[idx].Next = int32(i), idx+1
					i++
					state = wantNext
					continue
				}
				cur = idx
				depth++
				if k == Object {
					state = wantKey
				}
				continue
			case 't', 'f', 'n':
				lit, k := "null", Null
				if c == 't' {
					lit, k = "true", True
				} else if c == 'f' {
					lit, k = "false", False
				}
				if !HasLiteral(raw, i, lit) {
					return nil, 0, false, errAt(i, ErrLiteral)
				}
				toks = push(toks, int32(i), int32(i+len(lit)), idx+1, 0, k, 0)
				i += len(lit)
			default:
				end := ScanNumber(raw, i)
				if end < 0 {
					return nil, 0, false, errAt(i, ErrChar)
				}
				toks = push(toks, int32(i), int32(end), idx+1, 0, Number, 0)
				i = end
			}
			state = wantNext
			continue
		case wantNext:
			if cur < 0 {
				return toks, i, spaced, nil
			}
			if i >= n {
				return nil, 0, false, errAt(i, ErrEnd)
			}
			t := &toks[cur]
			switch c := raw[i]; {
			case c == ',':
				if t.Kind == Object {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == '}' && t.Kind == Object, c == ']' && t.Kind == Array:
				parent := t.Next
				t.End, t.Next = int32(i), int32(len(toks))
				cur = parent
				depth--
			default:
				return nil, 0, false, errAt(i, ErrChar)
			}
			i++
			continue
		}
	str:
		// A key or a string value, the most frequent tokens: one place,
		// inline, so that they cost no call beyond the scan itself.
		idx := int32(len(toks))
		end, stop := PlainString(raw, i)
		if end != 0 {
			toks = push(toks, int32(i), int32(end), idx+1, end-i-2, String, 0)
		} else {
			var chars int
			var flags uint8
			var err *SyntaxError
			if end, chars, flags, err = scanString(raw, i, stop, mode); err != nil {
				return nil, 0, false, err
			}
			toks = push(toks, int32(i), int32(end), idx+1, chars, String, flags)
		}
		i = end
		if state == wantValue {
			state = wantNext
			continue
		}
		s = i
		for i < n && IsSpace(raw[i]) {
			i++
		}
		if i != s {
			spaced = true
		}
		if i >= n || raw[i] != ':' {
			return nil, 0, false, errAt(i, ErrColon)
		}
		i++
		state = wantValue
	}
}

// push appends a token field by field: building a Token value and copying
// it costs a store-forwarding stall per token, a third of the tokenizer's
// time.
func push(toks []Token, start, end, next int32, n int, k Kind, flags uint8) []Token {
	if len(toks) == cap(toks) {
		toks = append(toks, Token{})[:len(toks)]
	}
	toks = toks[:len(toks)+1]
	t := &toks[len(toks)-1]
	t.Start, t.End, t.Next, t.N, t.Kind, t.Flags = start, end, next, uint16(min(n, MaxN)), k, flags
	return toks
}

// count adds one to an open container's count, up to MaxN.
func count(t *Token) {
	if t.N != MaxN {
		t.N++
	}
}

// ScanNumber returns the end of the JSON number at raw[i], or -1.
func ScanNumber(raw []byte, i int) int {
	n := len(raw)
	if i < n && raw[i] == '-' {
		i++
	}
	switch {
	case i < n && raw[i] == '0':
		i++
	case i < n && raw[i] >= '1' && raw[i] <= '9':
		i = digits(raw, i)
	default:
		return -1
	}
	if i < n && raw[i] == '.' {
		if i = digits(raw, i+1); i < 0 {
			return -1
		}
	}
	if i < n && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < n && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if i = digits(raw, i); i < 0 {
			return -1
		}
	}
	return i
}

// digits returns the end of the run of digits at raw[i], or -1 when there
// is none.
func digits(raw []byte, i int) int {
	d := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		i++
	}
	if i == d {
		return -1
	}
	return i
}
