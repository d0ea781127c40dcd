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

// parseTree reads one JSON document. The text must already be known to be
// valid JSON (see Parse), so any error here is unexpected.
func parseTree(text string) (*node, error) {
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
