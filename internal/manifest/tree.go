package manifest

import (
	"encoding/json"
	"errors"
	"strings"
)

// kind is the JSON type of a node.
type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is one JSON value with its members in document order. encoding/json
// maps lose both order and duplicate keys, and strict validation needs both.
type node struct {
	kind    kind
	off     int64  // byte offset where the value starts; orders problems
	end     int64  // objects: offset of the closing brace (missing-key problems)
	str     string // string value, or the number literal as written
	elems   []*node
	members []member
}

type member struct {
	key string
	off int64
	val *node
}

// parseTree reads one JSON document with the strict scanner below. When the
// scanner refuses the text, errTree is returned and Parse asks
// encoding/json for the error offset; encoding/json is the reference for
// what valid JSON is (FuzzTreeMatchesEncodingJSON checks the two agree).
func parseTree(text string) (*node, error) {
	s := scanner{text: text}
	s.space()
	n, ok := s.value(0)
	if !ok {
		return nil, errTree
	}
	s.space()
	if s.pos != len(text) {
		return nil, errTree
	}
	return n, nil
}

var errTree = errors.New("manifest: not valid JSON")

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// scanner is a strict recursive-descent JSON reader over valid UTF-8 text
// (Parse checks UTF-8 first). Strings without escapes are substrings of
// the text; strings with escapes are decoded by encoding/json, so both
// spellings give exactly the value encoding/json would.
type scanner struct {
	text string
	pos  int
}

func (s *scanner) space() {
	for s.pos < len(s.text) {
		switch s.text[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) (*node, bool) {
	if s.pos >= len(s.text) {
		return nil, false
	}
	off := int64(s.pos)
	switch c := s.text[s.pos]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, false
		}
		s.pos++
		n := &node{kind: kindObject, off: off}
		s.space()
		if s.pos < len(s.text) && s.text[s.pos] == '}' {
			n.end = int64(s.pos)
			s.pos++
			return n, true
		}
		for {
			s.space()
			koff := int64(s.pos)
			if s.pos >= len(s.text) || s.text[s.pos] != '"' {
				return nil, false
			}
			key, ok := s.str()
			if !ok {
				return nil, false
			}
			s.space()
			if s.pos >= len(s.text) || s.text[s.pos] != ':' {
				return nil, false
			}
			s.pos++
			s.space()
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			n.members = append(n.members, member{key: key, off: koff, val: v})
			s.space()
			if s.pos >= len(s.text) {
				return nil, false
			}
			switch s.text[s.pos] {
			case ',':
				s.pos++
			case '}':
				n.end = int64(s.pos)
				s.pos++
				return n, true
			default:
				return nil, false
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return nil, false
		}
		s.pos++
		n := &node{kind: kindArray, off: off}
		s.space()
		if s.pos < len(s.text) && s.text[s.pos] == ']' {
			n.end = int64(s.pos)
			s.pos++
			return n, true
		}
		for {
			s.space()
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			n.elems = append(n.elems, v)
			s.space()
			if s.pos >= len(s.text) {
				return nil, false
			}
			switch s.text[s.pos] {
			case ',':
				s.pos++
			case ']':
				n.end = int64(s.pos)
				s.pos++
				return n, true
			default:
				return nil, false
			}
		}
	case c == '"':
		str, ok := s.str()
		return &node{kind: kindString, off: off, str: str}, ok
	case c == '-' || c >= '0' && c <= '9':
		lit, ok := s.number()
		return &node{kind: kindNumber, off: off, str: lit}, ok
	case strings.HasPrefix(s.text[s.pos:], "true"):
		s.pos += 4
		return &node{kind: kindBool, off: off, str: "true"}, true
	case strings.HasPrefix(s.text[s.pos:], "false"):
		s.pos += 5
		return &node{kind: kindBool, off: off}, true
	case strings.HasPrefix(s.text[s.pos:], "null"):
		s.pos += 4
		return &node{kind: kindNull, off: off}, true
	}
	return nil, false
}

// str reads a string literal starting at the quote.
func (s *scanner) str() (string, bool) {
	start := s.pos
	s.pos++
	escaped := false
	for s.pos < len(s.text) {
		c := s.text[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !escaped {
				return s.text[start+1 : s.pos-1], true
			}
			var out string
			if err := json.Unmarshal([]byte(s.text[start:s.pos]), &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			escaped = true
			if s.pos+1 >= len(s.text) {
				return "", false
			}
			switch s.text[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.text) {
					return "", false
				}
				for _, h := range []byte(s.text[s.pos+2 : s.pos+6]) {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return "", false
					}
				}
				s.pos += 6
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		default:
			s.pos++
		}
	}
	return "", false
}

// number reads a number literal (RFC 8259 grammar) and returns it as written.
func (s *scanner) number() (string, bool) {
	start := s.pos
	t := s.text
	digits := func() int {
		n := 0
		for s.pos < len(t) && t[s.pos] >= '0' && t[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if t[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(t) && t[s.pos] == '0':
		s.pos++
	case digits() == 0:
		return "", false
	}
	if s.pos < len(t) && t[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return "", false
		}
	}
	if s.pos < len(t) && (t[s.pos] == 'e' || t[s.pos] == 'E') {
		s.pos++
		if s.pos < len(t) && (t[s.pos] == '+' || t[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return "", false
		}
	}
	return t[start:s.pos], true
}

// parseTreeDecoder reads one JSON document with encoding/json's Decoder.
// It is the reference the scanner is tested against and the fallback
// should the scanner ever refuse text encoding/json accepts.
func parseTreeDecoder(text string) (*node, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber() // keep number literals as written: 1.0 is not an integer here
	return readValue(dec)
}

func readValue(dec *json.Decoder) (*node, error) {
	off := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull, off: off}, nil
	case bool:
		n := &node{kind: kindBool, off: off}
		if t {
			n.str = "true"
		}
		return n, nil
	case json.Number:
		return &node{kind: kindNumber, off: off, str: string(t)}, nil
	case string:
		return &node{kind: kindString, off: off, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{kind: kindArray, off: off}
			for dec.More() {
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
			n.end = dec.InputOffset()
			_, err := dec.Token() // ']'
			return n, err
		case '{':
			n := &node{kind: kindObject, off: off}
			for dec.More() {
				koff := dec.InputOffset()
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, errors.New("manifest: object key is not a string")
				}
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, member{key: key, off: koff, val: v})
			}
			n.end = dec.InputOffset()
			_, err := dec.Token() // '}'
			return n, err
		}
	}
	return nil, errors.New("manifest: unexpected JSON token")
}
