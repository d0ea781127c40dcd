package input

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kitd/kitd/internal/jsontext"
	"github.com/kitd/kitd/internal/kiterr"
)

// Strict keys. encoding/json matches an object key to a struct field
// case-insensitively and lets a repeated key overwrite the first; kitd's
// bodies are case-sensitive and refuse a repeated key (docs/decisions.md
// "Request bodies"). checkKeys walks the body beside the Go type it is
// decoded into, before json.Unmarshal, and
//
//   - refuses the first key given twice in one object, at any depth;
//   - notes every key of a struct's object that is not exactly one of its
//     fields but that encoding/json would fold onto one, so that DecodeJSON
//     can blank it: such keys are ignored, as unknown keys are.
//
// A json.Unmarshaler's value is walked for repeated keys only. A
// json.RawMessage value is skipped unread: it is handed whole to its own
// validator (Blocks: internal/blocks, which refuses repeated keys with the
// path of its schema). Syntax errors are left to json.Unmarshal, which words
// them. Paths name only the schema's own fields: a repeated key that is not
// one is reported at its object, never named (keys are input too).
//
// The walk allocates nothing for a body without problems, escaped keys or
// keys to blank (TestCheckKeysAllocatesNothing): unknown keys, such as the
// channel or username of a webhook post, cost nothing. The path of a problem
// is built while unwinding.

// maxDepth is encoding/json's nesting limit; a deeper body is refused at the
// path where it passes it.
const maxDepth = 10000

type keyScanner struct {
	b     []byte
	i     int
	depth int
	keys  [][]byte // the keys of the objects being read, innermost last
	blank []int    // offsets of the opening quotes of keys to blank
	err   error    // the problem found; nil for a syntax error
	trail []string // the path of err, innermost first, built while unwinding
}

// checkKeys walks body as a value of type t. It returns the problem found
// (a validation error naming its path) and the keys to blank; a syntax
// error ends the walk without a problem.
func checkKeys(body []byte, t reflect.Type) (blank []int, err error) {
	s := scanners.Get().(*keyScanner)
	defer func() {
		*s = keyScanner{keys: s.keys[:0]}
		scanners.Put(s)
	}()
	s.b = body
	if !s.value(t) && s.err != nil {
		return nil, s.invalid()
	}
	return s.blank, nil
}

// scanners keeps the key stacks of finished walks for the next ones.
var scanners = sync.Pool{New: func() any { return &keyScanner{keys: make([][]byte, 0, 32)} }}

// invalid is s.err with the path of its trail.
func (s *keyScanner) invalid() error {
	path := ""
	for i := len(s.trail) - 1; i >= 0; i-- {
		seg := s.trail[i]
		if path != "" && seg[0] != '[' {
			path += "."
		}
		path += seg
	}
	e := s.err.(*problem)
	if path == "" {
		return kiterr.Invalid("", "request body "+e.reason)
	}
	return kiterr.Invalid(path, e.reason)
}

type problem struct{ reason string }

func (p *problem) Error() string { return p.reason }

var (
	errRepeated    = &problem{"is given more than once"}
	errRepeatedKey = &problem{"has a key given more than once"}
	errDeep        = &problem{"is nested too deeply"}
)

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// value reads one value of type t (nil: any). It reports false on a
// problem (s.err) or a syntax error (s.err nil).
func (s *keyScanner) value(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t != rawMessageType && reflect.PointerTo(t).Implements(unmarshalerType) {
		t = nil // it reads its own value: keys are neither matched nor blanked
	}
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{':
		if t == rawMessageType || !fits(t, reflect.Struct, reflect.Map) {
			return s.skip()
		}
		if t != nil && t.Kind() == reflect.Struct {
			return s.object(fieldsOf(t), nil)
		}
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		return s.object(nil, elem)
	case '[':
		if t == rawMessageType || !fits(t, reflect.Slice, reflect.Array) {
			return s.skip()
		}
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		return s.array(elem)
	case '"':
		return s.skipStr()
	default:
		return s.scalar()
	}
}

// fits reports whether a value of type t (nil: any) may be an object or
// array of the given kinds. One that may not is skipped unread:
// json.Unmarshal refuses it as a type error at its field's path, which
// names the field, not a position inside a value the schema does not have.
func fits(t reflect.Type, kinds ...reflect.Kind) bool {
	return t == nil || t.Kind() == reflect.Interface || slices.Contains(kinds, t.Kind())
}

// object reads an object. With fields (a struct), a key that is one of them
// is read as its type and any other is noted for blanking; without, every
// value is read as elem (nil: any).
func (s *keyScanner) object(fields *structFields, elem reflect.Type) bool {
	if s.depth++; s.depth > maxDepth {
		s.err = errDeep
		return false
	}
	mark := len(s.keys)
	ok := s.members(fields, elem, mark)
	s.keys = s.keys[:mark]
	s.depth--
	return ok
}

// members reads the members of an object whose keys start at s.keys[mark].
func (s *keyScanner) members(fields *structFields, elem reflect.Type, mark int) bool {
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		at := s.i
		key, ok := s.str()
		if !ok {
			return false
		}
		f := -1
		if fields != nil {
			f = fields.find(key)
		}
		if s.seen(mark, key) {
			if f >= 0 {
				s.err = errRepeated
				s.trail = append(s.trail, fields.names[f])
			} else {
				s.err = errRepeatedKey
			}
			return false
		}
		s.keys = append(s.keys, key)
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		t := elem
		switch {
		case f >= 0:
			t = fields.types[f]
		case fields != nil && fields.folds(key):
			s.blank = append(s.blank, at)
		}
		if !s.value(t) {
			switch {
			case s.err == nil:
			case f >= 0:
				s.trail = append(s.trail, fields.names[f])
			default:
				// Under a key that is input, not schema: the problem is
				// this object's, and the path below the key means nothing.
				s.trail = s.trail[:0]
				if s.err == errRepeated {
					s.err = errRepeatedKey
				}
			}
			return false
		}
		if more, ok := s.after('}'); !more {
			return ok
		}
	}
}

// seen reports whether the current object, whose keys start at mark,
// already has key. Objects are small; a large one costs a map.
func (s *keyScanner) seen(mark int, key []byte) bool {
	keys := s.keys[mark:]
	if len(keys) < 64 {
		for _, k := range keys {
			if string(k) == string(key) {
				return true
			}
		}
		return false
	}
	// Rare: count on a set built once for the object.
	set := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		set[string(k)] = struct{}{}
	}
	_, dup := set[string(key)]
	return dup
}

func (s *keyScanner) array(elem reflect.Type) bool {
	if s.depth++; s.depth > maxDepth {
		s.err = errDeep
		return false
	}
	ok := s.elements(elem)
	s.depth--
	return ok
}

func (s *keyScanner) elements(elem reflect.Type) bool {
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for n := 0; ; n++ {
		if !s.value(elem) {
			if s.err != nil {
				s.trail = append(s.trail, "["+strconv.Itoa(n)+"]")
			}
			return false
		}
		if more, ok := s.after(']'); !more {
			return ok
		}
	}
}

// after reads what follows a member or element: a comma (more) or close
// (done, ok); anything else is a syntax error.
func (s *keyScanner) after(close byte) (more, ok bool) {
	s.space()
	switch {
	case s.i >= len(s.b):
		return false, false
	case s.b[s.i] == ',':
		s.i++
		return true, true
	case s.b[s.i] == close:
		s.i++
		return false, true
	}
	return false, false
}

// skip reads a value without looking at its keys.
func (s *keyScanner) skip() bool {
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			if !s.skipStr() {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		s.i++
		if depth == 0 {
			return true
		}
	}
	return false
}

// str reads a string and returns its text: a slice of the body, or the
// decoded text when it has escapes. It refuses exactly the strings
// encoding/json refuses (jsontext's Lenient mode).
func (s *keyScanner) str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i
	end, flags, err := jsontext.ScanString(s.b, start, jsontext.Lenient)
	if err != nil {
		return nil, false
	}
	s.i = end
	if flags&jsontext.Escaped == 0 {
		return s.b[start+1 : end-1], true
	}
	return jsontext.Unescape(nil, s.b[start+1:end-1]), true
}

// skipStr reads a string whose text is not needed: a value.
func (s *keyScanner) skipStr() bool {
	end, _, err := jsontext.ScanString(s.b, s.i, jsontext.Lenient)
	if err != nil {
		return false
	}
	s.i = end
	return true
}

// scalar reads a number or literal; json.Unmarshal checks its form.
func (s *keyScanner) scalar() bool {
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.i > start
		case '{', '[', '"', ':':
			return false
		}
		s.i++
	}
	return s.i > start
}

func (s *keyScanner) space() { s.i = jsontext.SkipSpace(s.b, s.i) }

// blankKeys returns a copy of body in which the keys starting at the
// offsets of blank are spaces: a key that is no field of its struct is
// then ignored by json.Unmarshal, however it folds.
func blankKeys(body []byte, blank []int) []byte {
	out := append([]byte(nil), body...)
	for _, at := range blank {
		for j := at + 1; j < len(out); j++ {
			if out[j] == '"' {
				break
			}
			if out[j] == '\\' {
				out[j+1] = ' ' // a quote may be escaped: blank it too
			}
			out[j] = ' '
		}
	}
	return out
}

// structFields are the JSON names of a struct's fields and their types, as
// encoding/json names them (the tag's name, else the Go name; "-" skipped).
type structFields struct {
	names []string
	types []reflect.Type
}

// folds reports whether encoding/json could match key, which is no field's
// exact name, to a field: it matches an ASCII key that equals a name but
// for case, and folds non-ASCII letters too (ſ is s, K is k), so every
// non-ASCII key counts. Other unknown keys are left in place: blanking
// costs a copy of the body.
func (f *structFields) folds(key []byte) bool {
	for _, c := range key {
		if c >= 0x80 {
			return true
		}
	}
	for _, n := range f.names {
		if len(n) == len(key) && asciiEqualFold(n, key) {
			return true
		}
	}
	return false
}

func asciiEqualFold(name string, key []byte) bool {
	for i := range len(name) {
		a, b := name[i], key[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

func (f *structFields) find(key []byte) int {
	for i, n := range f.names {
		if n == string(key) {
			return i
		}
	}
	return -1
}

// fieldCache holds the fields of each body type, computed once, as
// encoding/json caches its own: derived from types, never mutated after.
var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := new(structFields)
	addFields(f, t)
	v, _ := fieldCache.LoadOrStore(t, f)
	return v.(*structFields)
}

func addFields(f *structFields, t reflect.Type) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(f, ft) // promoted fields
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.names = append(f.names, name)
		f.types = append(f.types, sf.Type)
	}
}

// ValueKeys checks the keys of a JSON value that is passed on as sent (a
// json.RawMessage never decoded here): no key given twice at any depth, no
// nesting past the limit. It reads no number nor string, so any valid
// JSON value passes but for its keys; the problem is named at path.
func ValueKeys(path string, value []byte) error {
	s := scanners.Get().(*keyScanner)
	defer func() {
		*s = keyScanner{keys: s.keys[:0]}
		scanners.Put(s)
	}()
	s.b = value
	if !s.value(nil) && s.err != nil {
		return kiterr.Invalid(path, s.err.(*problem).reason)
	}
	return nil
}
