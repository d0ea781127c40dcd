// Package blocks owns the shape and the limits of Blocks, the rich content a
// message may carry next to its text (docs/api.md "Blocks" and
// "Field and size limits", docs/blocks.md): which block types and keys exist, their lengths, counts, enums and
// patterns, the safe mrkdwn subset, the message-wide limits, and the removal
// of interactive elements when the sending Kit does not declare
// interactivity. It never stores anything and knows nothing of HTTP; the
// caller maps *Error to a 400 validation_error and decides file visibility.
//
// Blocks are checked on every message write, so validation is one pass over
// the raw bytes: each block is tokenized by internal/jsontext (Strict: no
// invalid UTF-8, no lone surrogate) into a small reused token list,
// checked against the tables in schema.go, and copied to the output only
// when it must change. A generic decode into maps would cost many times the
// time and allocations of the rest of the request. docs/blocks.md is the
// reference for every rule.
package blocks

import (
	"bytes"
	"strconv"

	"github.com/kitd/kitd/internal/jsontext"
)

// Message-wide limits (docs/api.md "Field and size limits").
const (
	MaxBlocks      = 50    // blocks per message
	MaxBytes       = 16384 // serialized size of the blocks array, in bytes
	MaxTextChars   = 3000  // characters of any text field
	MaxActions     = 5     // actions blocks per message
	MaxInteractive = 25    // buttons, selects and overflow menus per message
)

// Policy says what the surrounding message allows.
type Policy struct {
	// Interactive keeps actions blocks and button/select/overflow
	// accessories; when false they are removed before storing.
	Interactive bool
	// FileVisible reports whether an image block's fileId may be shown in
	// this message's conversation. nil means no file is visible.
	FileVisible func(fileID string) bool
}

// Error is a validation problem: Path is a JSON path relative to the request
// body, e.g. "blocks[3].fields[0].label"; Reason never contains the
// submitted value.
type Error struct{ Path, Reason string }

func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// Validate checks raw (the JSON value of the request's "blocks" member: must
// be a JSON array) and returns the normalized JSON array to store: compact,
// and without interactive elements when the policy forbids them (an actions
// block is removed entirely, a section's interactive accessory is removed).
// Every limit is counted on the input, before anything is removed. It returns
// the first problem, in document order, as *Error. The result never aliases
// raw.
func Validate(raw []byte, p Policy) ([]byte, error) {
	if len(raw) > MaxBytes {
		return nil, &Error{Path: "blocks", Reason: "must be at most " + strconv.Itoa(MaxBytes) + " bytes when serialized"}
	}
	// 128 tokens hold most blocks; the list is reused from block to block
	// and grows for larger ones.
	v := validator{raw: raw, p: p, toks: make([]jsontext.Token, 0, 128)}
	if err := v.run(); err != nil {
		return nil, err
	}
	return v.out, nil
}

// validator holds the state of one Validate call. It lives on Validate's
// stack.
type validator struct {
	raw  []byte
	toks []jsontext.Token // the tokens of the current block
	p    Policy

	// The first problem: its reason, and its path from the inside out.
	// Checks return false on failure and each level adds its own step
	// while unwinding, so the happy path never tracks a path at all.
	reason string
	trail  []seg

	scratch, scratch2 []byte // decoded strings that contain escapes

	// Uniqueness sets. Their sizes are bounded by counts checked before
	// anything is added, so fixed arrays suffice and never allocate.
	blockIDs  idSet // message-wide
	actionIDs idSet // message-wide
	options   idSet // option values of one element
	keys      idSet // metric or column keys of one block

	actions, interactive int

	drop    bool  // the current block is removed (an actions block)
	skipKey int32 // the token of the current block's removed "accessory" key, or -1

	out []byte // the result; nil while the input can be copied as it is
}

// seg is one step of a path: an object key, or an array index when key is "".
type seg struct {
	key string
	idx int32
}

// run drives the top-level array: it tokenizes and checks one block at a
// time and builds the output.
func (v *validator) run() *Error {
	raw := v.raw
	n := len(raw)
	i := skipSpace(raw, 0)
	if i >= n || raw[i] != '[' {
		if i >= n {
			return syntaxErr(i, "unexpected end")
		}
		return &Error{Path: "blocks", Reason: "must be an array"}
	}
	open := i
	// lazy: every byte so far is compact and kept, so the output is a copy
	// of raw[open:] up to the end. last is the end of the last block.
	lazy, last := true, i+1
	i++
	j := skipSpace(raw, i)
	spaced := j != i
	i = j
	count := int32(0)
	for i >= n || raw[i] != ']' {
		if count == MaxBlocks {
			return &Error{Path: "blocks", Reason: "must have at most " + strconv.Itoa(MaxBlocks) + " blocks"}
		}
		toks, end, blockSpaced, serr := jsontext.Tokenize(v.toks[:0], raw, i, maxDepth-1, jsontext.Strict)
		if serr != nil {
			return syntaxError(serr)
		}
		v.toks = toks
		v.drop, v.skipKey = false, -1
		if !v.block(0) {
			v.upIndex(count)
			return v.error()
		}
		if lazy && (spaced || blockSpaced || v.drop || v.skipKey >= 0) {
			lazy = false
			v.out = make([]byte, 0, n)
			v.out = append(v.out, raw[open:last]...) // "[" and the blocks so far
		}
		if !lazy && !v.drop {
			if len(v.out) > 1 {
				v.out = append(v.out, ',')
			}
			v.out = v.emit(v.out, 0)
		}
		count++
		i, last, spaced = end, end, false
		if i < n && raw[i] == ',' {
			j := skipSpace(raw, i+1)
			spaced, i = j != i+1, j
			if j < n && raw[j] == ']' {
				return syntaxErr(j, "unexpected character")
			}
			continue
		}
		if i >= n {
			return syntaxErr(i, "unexpected end")
		}
		if raw[i] != ']' {
			return syntaxErr(i, "unexpected character")
		}
	}
	if k := skipSpace(raw, i+1); k != n {
		return syntaxErr(k, "unexpected data after the array")
	}
	switch {
	case lazy && !spaced:
		v.out = bytes.Clone(raw[open : i+1])
	case lazy:
		v.out = append(append(make([]byte, 0, last-open+1), raw[open:last]...), ']')
	default:
		v.out = append(v.out, ']')
	}
	return nil
}

func skipSpace(raw []byte, i int) int { return jsontext.SkipSpace(raw, i) }

// maxDepth bounds nesting, the blocks array included. The deepest valid
// Blocks document has 6 levels (blocks, block, elements, select, options,
// option); the margin only makes the error about depth rather than shape.
const maxDepth = 32

func syntaxErr(at int, what string) *Error {
	return &Error{Path: "blocks", Reason: "is not valid JSON: " + what + " at byte " + strconv.Itoa(at)}
}

// syntaxError words the tokenizer's error as Blocks always have.
func syntaxError(e *jsontext.SyntaxError) *Error {
	if e.Code == jsontext.ErrDepth {
		return syntaxErr(e.Offset, "nesting deeper than "+strconv.Itoa(maxDepth)+" levels")
	}
	return syntaxErr(e.Offset, e.Code.String())
}

// fail records reason for the value being checked and returns false, so
// that checks can `return v.fail(...)`.
func (v *validator) fail(reason string) bool {
	v.reason = reason
	return false
}

// failAt records reason for the member key of the object being checked.
func (v *validator) failAt(key, reason string) bool {
	v.reason = reason
	return v.up(key)
}

// up and upIndex add a step to the path of a failure while unwinding; they
// return false to keep unwinding.
func (v *validator) up(key string) bool {
	v.trail = append(v.trail, seg{key: key})
	return false
}

func (v *validator) upIndex(i int32) bool {
	v.trail = append(v.trail, seg{idx: i})
	return false
}

func (v *validator) error() *Error {
	b := make([]byte, 0, 64)
	b = append(b, "blocks"...)
	for i := len(v.trail) - 1; i >= 0; i-- {
		if s := v.trail[i]; s.key != "" {
			b = append(b, '.')
			b = append(b, s.key...)
		} else {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.idx), 10)
			b = append(b, ']')
		}
	}
	return &Error{Path: string(b), Reason: v.reason}
}

// str returns the decoded content of string token t. It aliases the input
// when the string has no escapes; otherwise it is valid until the next call.
func (v *validator) str(t int32) []byte {
	tk := &v.toks[t]
	if tk.Flags&jsontext.Escaped != 0 {
		v.scratch = jsontext.Unescape(v.scratch[:0], tk.Body(v.raw))
		return v.scratch
	}
	return tk.Body(v.raw)
}

// member returns the value token of key name in object t, or 0.
func (v *validator) member(t int32, name string) int32 {
	for j := t + 1; j < v.toks[t].Next; j = v.toks[j+1].Next {
		if string(v.str(j)) == name {
			return j + 1
		}
	}
	return 0
}

// idEntry is one member of an idSet: the span of a string in the input
// (tokens do not outlive their block) and the hash of its decoded text.
type idEntry struct {
	start int32
	size  uint16 // quotes included
	esc   bool
	hash  uint32
}

// A string's size fits an idEntry: inputs are at most MaxBytes.
const _ = uint16(MaxBytes)

// idSet is a set of strings in a fixed array, large enough for the largest
// bounded set (select options; block ids are at most 50, action ids 25, keys
// 6).
type idSet struct {
	e [maxOptions]idEntry
	n int
}

func (s *idSet) reset() { s.n = 0 }

func hashOf(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// entry describes string token t for an idSet.
func (v *validator) entry(t int32) idEntry {
	tk := &v.toks[t]
	return idEntry{start: tk.Start, size: uint16(tk.End - tk.Start), esc: tk.Flags&jsontext.Escaped != 0, hash: hashOf(v.str(t))}
}

// addUnique adds string token t to s and reports whether it was absent.
func (v *validator) addUnique(s *idSet, t int32) bool {
	e := v.entry(t)
	if v.find(s, e) >= 0 {
		return false
	}
	if s.n < len(s.e) { // always: the counts are checked before
		s.e[s.n] = e
		s.n++
	}
	return true
}

// find returns the position in s of a string equal to e, or -1.
func (v *validator) find(s *idSet, e idEntry) int {
	for i := range s.n {
		if o := &s.e[i]; o.hash == e.hash && v.same(o, &e) {
			return i
		}
	}
	return -1
}

// same reports whether two strings of the input decode to the same text.
func (v *validator) same(a, b *idEntry) bool {
	x, y := v.raw[a.start+1:a.start+int32(a.size)-1], v.raw[b.start+1:b.start+int32(b.size)-1]
	if !a.esc && !b.esc {
		return bytes.Equal(x, y)
	}
	v.scratch = jsontext.Unescape(v.scratch[:0], x)
	v.scratch2 = jsontext.Unescape(v.scratch2[:0], y)
	return bytes.Equal(v.scratch, v.scratch2)
}

// emit appends the compact form of value t of the current block, leaving
// out the removed accessory.
func (v *validator) emit(out []byte, t int32) []byte {
	tk := &v.toks[t]
	switch tk.Kind {
	case jsontext.Object:
		out = append(out, '{')
		first := true
		for j := t + 1; j < tk.Next; j = v.toks[j+1].Next {
			if j == v.skipKey {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			k := &v.toks[j]
			out = append(out, v.raw[k.Start:k.End]...)
			out = append(out, ':')
			out = v.emit(out, j+1)
		}
		return append(out, '}')
	case jsontext.Array:
		out = append(out, '[')
		for j := t + 1; j < tk.Next; j = v.toks[j].Next {
			if j != t+1 {
				out = append(out, ',')
			}
			out = v.emit(out, j)
		}
		return append(out, ']')
	}
	return append(out, v.raw[tk.Start:tk.End]...)
}
