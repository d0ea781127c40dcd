package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/kitd/kitd/internal/jsontext"
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

// parseTree reads one JSON document with the shared tokenizer
// (internal/jsontext). When it refuses the text, errTree is returned and
// Parse asks encoding/json for the error offset; encoding/json is the
// reference for what valid JSON is (FuzzReadersAgree in http/api checks
// the two agree). Strings without escapes are substrings of the text;
// strings with escapes are decoded as encoding/json decodes them.
func parseTree(text string) (*node, error) {
	b := treeBufs.Get().(*bufs)
	defer treeBufs.Put(b)
	b.raw = append(b.raw[:0], text...)
	toks, end, _, err := jsontext.Tokenize(b.toks[:0], b.raw, 0, maxDepth, jsontext.Lenient)
	if err != nil || end != len(b.raw) {
		return nil, errTree
	}
	b.toks = toks
	t := tree{text: text, raw: b.raw, toks: toks}
	n, _ := t.node(0)
	return n, nil
}

// bufs are the bytes and tokens of one parse: the tree keeps neither (its
// strings are substrings of the text or copies), so parses reuse them.
type bufs struct {
	raw  []byte
	toks []jsontext.Token
}

var treeBufs = sync.Pool{New: func() any { return new(bufs) }}

var errTree = errors.New("manifest: not valid JSON")

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// tree builds nodes from the tokens of a document.
type tree struct {
	text string
	raw  []byte
	toks []jsontext.Token
	buf  []byte // decoded escapes
}

// node builds the value at token i and returns it with the index of the
// token after it.
func (t *tree) node(i int32) (*node, int32) {
	tk := &t.toks[i]
	n := &node{off: int64(tk.Start)}
	switch tk.Kind {
	case jsontext.Object:
		n.kind, n.end = kindObject, int64(tk.End)
		if tk.N > 0 {
			n.members = make([]member, 0, tk.N)
		}
		for j := i + 1; j < tk.Next; {
			key := t.str(j)
			v, next := t.node(j + 1)
			n.members = append(n.members, member{key: key, off: int64(t.toks[j].Start), val: v})
			j = next
		}
	case jsontext.Array:
		n.kind, n.end = kindArray, int64(tk.End)
		if tk.N > 0 {
			n.elems = make([]*node, 0, tk.N)
		}
		for j := i + 1; j < tk.Next; {
			v, next := t.node(j)
			n.elems = append(n.elems, v)
			j = next
		}
	case jsontext.String:
		n.kind, n.str = kindString, t.str(i)
	case jsontext.Number:
		n.kind, n.str = kindNumber, t.text[tk.Start:tk.End]
	case jsontext.True:
		n.kind, n.str = kindBool, "true"
	case jsontext.False:
		n.kind = kindBool
	default:
		n.kind = kindNull
	}
	return n, tk.Next
}

// str is the decoded text of string token i.
func (t *tree) str(i int32) string {
	tk := &t.toks[i]
	if tk.Flags&jsontext.Escaped == 0 {
		return t.text[tk.Start+1 : tk.End-1]
	}
	t.buf = jsontext.Unescape(t.buf[:0], tk.Body(t.raw))
	return string(t.buf)
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
