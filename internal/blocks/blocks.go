// Package blocks owns the shape and the limits of Blocks, the rich content a
// message may carry next to its text (SPEC.md section 2 "Blocks" and section
// 8): which block types and keys exist, their lengths, counts, enums and
// patterns, the safe mrkdwn subset, the message-wide limits, and the removal
// of interactive elements when the sending Kit does not declare
// interactivity. It never stores anything and knows nothing of HTTP; the
// caller maps *Error to a 400 validation_error and decides file visibility.
//
// Validation is a hand-written single pass over the raw bytes (a tokenizer,
// then a walk over the flat token list) because Blocks are checked on every
// message write and a generic decode into maps costs far more time and
// allocations than the whole rest of the request. docs/blocks.md is the
// reference for every rule.
package blocks

import (
	"bytes"
	"strconv"
)

// Message-wide limits (SPEC.md section 8).
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
// the first problem, in document order, as *Error.
func Validate(raw []byte, p Policy) ([]byte, error) {
	if len(raw) > MaxBytes {
		return nil, &Error{Path: "blocks", Reason: "must be at most " + strconv.Itoa(MaxBytes) + " bytes when serialized"}
	}
	// Realistic Blocks have a token per 10 to 15 bytes; append grows the
	// list for denser input.
	toks, spaced, serr := tokenize(raw, make([]tok, 0, len(raw)/10+16))
	if serr != nil {
		return nil, serr
	}
	v := &validator{raw: raw, toks: toks, p: p}
	root := &toks[0]
	if root.kind != kArray {
		return nil, &Error{Path: "blocks", Reason: "must be an array"}
	}
	if root.size > MaxBlocks {
		return nil, &Error{Path: "blocks", Reason: "must have at most " + strconv.Itoa(MaxBlocks) + " blocks"}
	}
	i := int32(0)
	for t := int32(1); t < root.next; t = toks[t].next {
		if !v.block(t) {
			v.upIndex(i)
			return nil, v.error()
		}
		i++
	}
	if !spaced && len(v.skip) == 0 {
		return bytes.Clone(raw), nil
	}
	return v.emit(make([]byte, 0, len(raw)), 0), nil
}

// validator holds the state of one Validate call.
type validator struct {
	raw  []byte
	toks []tok
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

	skip []int32 // tokens removed from the output, ascending: actions blocks and accessory keys
	sk   int     // emit's cursor into skip
}

// seg is one step of a path: an object key, or an array index when key is "".
type seg struct {
	key string
	idx int32
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
	if tk.flags&fEsc != 0 {
		return v.unescaped(tk)
	}
	return v.raw[tk.start+1 : tk.start+int32(tk.size)-1]
}

func (v *validator) unescaped(tk *tok) []byte {
	v.scratch = unescape(v.scratch[:0], v.raw[tk.start+1:tk.end()-1])
	return v.scratch
}

// sameString reports whether string tokens a and b decode to the same text.
func (v *validator) sameString(a, b int32) bool {
	ta, tb := &v.toks[a], &v.toks[b]
	a1, b1 := v.raw[ta.start+1:ta.end()-1], v.raw[tb.start+1:tb.end()-1]
	if (ta.flags|tb.flags)&fEsc == 0 {
		return bytes.Equal(a1, b1)
	}
	v.scratch = unescape(v.scratch[:0], a1)
	v.scratch2 = unescape(v.scratch2[:0], b1)
	return bytes.Equal(v.scratch, v.scratch2)
}

// member returns the value token of key name in object t, or 0.
func (v *validator) member(t int32, name string) int32 {
	for j := t + 1; j < v.toks[t].next; j = v.toks[j+1].next {
		if string(v.str(j)) == name {
			return j + 1
		}
	}
	return 0
}

// idEntry is one member of an idSet: a string token and its hash.
type idEntry struct {
	tok  int32
	hash uint32
}

func hashOf(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// idSet is a set of string tokens in a fixed array, large enough for the
// largest bounded set (select options; block ids are at most 50, action ids
// 25, keys 6). Slices into the validator's own arrays would make it escape
// to the heap.
type idSet struct {
	e [maxOptions]idEntry
	n int
}

func (s *idSet) reset() { s.n = 0 }

// addUnique adds string token t to s and reports whether it was absent.
func addUnique(v *validator, s *idSet, t int32) bool {
	if v.indexOf(s.e[:s.n], t) >= 0 {
		return false
	}
	if s.n < len(s.e) { // always: the counts are checked before
		s.e[s.n] = idEntry{tok: t, hash: hashOf(v.str(t))}
		s.n++
	}
	return true
}

// indexOf returns the position in set of the string equal to token t, or -1.
func (v *validator) indexOf(set []idEntry, t int32) int {
	h := hashOf(v.str(t))
	for i, e := range set {
		if e.hash == h && v.sameString(e.tok, t) {
			return i
		}
	}
	return -1
}

// emit appends the compact form of value t, leaving out skipped tokens.
func (v *validator) emit(out []byte, t int32) []byte {
	tk := &v.toks[t]
	switch tk.kind {
	case kObject:
		out = append(out, '{')
		first := true
		for j := t + 1; j < tk.next; j = v.toks[j+1].next {
			if v.skipped(j) {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			k := &v.toks[j]
			out = append(out, v.raw[k.start:k.end()]...)
			out = append(out, ':')
			out = v.emit(out, j+1)
		}
		return append(out, '}')
	case kArray:
		out = append(out, '[')
		first := true
		for j := t + 1; j < tk.next; j = v.toks[j].next {
			if v.skipped(j) {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = v.emit(out, j)
		}
		return append(out, ']')
	}
	return append(out, v.raw[tk.start:tk.end()]...)
}

// skipped reports whether token j is removed from the output. emit visits
// tokens in ascending order, so a cursor over the sorted skip list suffices.
func (v *validator) skipped(j int32) bool {
	for v.sk < len(v.skip) && v.skip[v.sk] < j {
		v.sk++
	}
	return v.sk < len(v.skip) && v.skip[v.sk] == j
}
