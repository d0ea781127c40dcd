// Package upload reads the body of a file upload (POST /files, docs/api.md "Files")
// as it arrives: the JSON around contentBase64 goes through the usual JSON
// rules, and the base64 text is checked and decoded on the fly into the
// chunks the conversation stores, so that an upload never holds its base64
// or a whole-file buffer (docs/files.md "Files: memory"). It owns the rules
// of an upload's fields and content and the file types allowed. It never
// touches HTTP or an actor: it gets bytes and answers chunks or the error.
package upload

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/kiterr"
)

// Reading a POST /files body as it arrives: the JSON around contentBase64
// and the base64 decoded straight into chunks (docs/files.md "Files: memory").

// ---- reading an upload as it arrives ----

// Reader splits a POST /files body as it arrives. Every byte goes to
// the skeleton except the text of the top-level "contentBase64" strings,
// which a contentDecoder checks and decodes on the fly; in the skeleton
// each such string becomes an empty string (contentPlaceholder). The
// skeleton, a few hundred bytes, then goes through decodeJSON like any other
// body, so that every answer is the one the whole body gives: a JSON syntax
// error is found where the whole body has it (its offset is moved back past
// the text left out; an error inside the text is the decoder's), and a field
// type error is decodeJSON's own. Anything the reader does not recognise as
// the shape of an upload (not an object, a broken structure) is simply kept
// in the skeleton, which decodeJSON then judges as it always did.
type Reader struct {
	size     int // Content-Length: the body's length
	pos      int // bytes of the body consumed
	state    readState
	skeleton []byte
	cuts     []cut
	keyAt    int  // where the current top-level key starts in the skeleton
	content  bool // the current top-level key is contentBase64
	depth    int  // nesting inside a top-level object or array value
	inString bool // inside a string of a nested value
	escape   bool // after a backslash in a string that is kept

	text   *contentDecoder // the contentBase64 string being read, then the last one read
	textAt int             // where that string's opening quote is in the body

	syntaxAt int // 1-based offset of a syntax error in a contentBase64 string; 0: none
}

// cut is one contentBase64 string left out of the skeleton.
type cut struct {
	at      int // where its placeholder starts in the skeleton
	removed int // bytes of the body it stands for, less the placeholder's
}

// contentPlaceholder stands for a contentBase64 string in the skeleton.
const contentPlaceholder = `""`

type readState uint8

const (
	beforeBody  readState = iota // before the top-level value
	beforeKey                    // in the top-level object, where a key is due
	inKey                        // in a top-level key
	beforeColon                  // after a key
	beforeValue                  // after the colon
	inContent                    // in a contentBase64 string: decoded, not kept
	inString                     // in another top-level string value
	inNested                     // in a top-level object or array value
	inLiteral                    // in a top-level number, true, false or null
	afterValue                   // after a top-level value
	verbatim                     // anything else: kept as it is
)

// readSize is how much of the body is read from the connection at a
// time.
const readSize = 64 << 10

func NewReader(size int) *Reader {
	return &Reader{size: size, skeleton: make([]byte, 0, 512)}
}

// ReadBody feeds the reader with the whole body. It stops early at a syntax
// error in a contentBase64 string: the answer is known, and the server
// discards the rest of the body.
func (u *Reader) ReadBody(r io.Reader) error {
	buf := make([]byte, min(readSize, u.size+1))
	for u.syntaxAt == 0 {
		n, err := r.Read(buf)
		u.Feed(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return &ReadError{Err: err}
		}
	}
	if u.syntaxAt == 0 && u.pos != u.size {
		// The connection ended before Content-Length bytes: fasthttp reports
		// that as a failed read, not as a short body.
		return &ReadError{Err: io.ErrUnexpectedEOF}
	}
	return nil
}

// Feed consumes the next bytes of the body.
func (u *Reader) Feed(p []byte) {
	for len(p) > 0 && u.syntaxAt == 0 {
		switch u.state {
		case inContent:
			n, end, bad := u.text.feed(p)
			if bad >= 0 {
				u.syntaxAt = u.pos + bad + 1
				return
			}
			u.pos += n
			p = p[n:]
			if end {
				u.cuts = append(u.cuts, cut{at: len(u.skeleton), removed: u.pos - u.textAt - len(contentPlaceholder)})
				u.skeleton = append(u.skeleton, contentPlaceholder...)
				u.state = afterValue
			}
		case verbatim:
			u.skeleton = append(u.skeleton, p...)
			u.pos += len(p)
			return
		default:
			u.step(p[0])
			u.pos++
			p = p[1:]
		}
	}
}

// step reads one byte of the structure around the content.
func (u *Reader) step(c byte) {
	keep := true
	switch u.state {
	case beforeBody:
		if c == '{' {
			u.state = beforeKey
		} else if !isJSONSpace(c) {
			u.state = verbatim
		}
	case beforeKey:
		if c == '"' {
			u.state, u.keyAt = inKey, len(u.skeleton)
		} else if !isJSONSpace(c) {
			u.state = verbatim
		}
	case inKey:
		if u.stringEnds(c) {
			u.state = beforeColon
			u.skeleton = append(u.skeleton, c)
			u.content = isContentKey(u.skeleton[u.keyAt:])
			return
		}
	case beforeColon:
		if c == ':' {
			u.state = beforeValue
		} else if !isJSONSpace(c) {
			u.state = verbatim
		}
	case beforeValue:
		switch {
		case isJSONSpace(c):
		case c == '"' && u.content:
			u.state, u.textAt, keep = inContent, u.pos, false
			u.text = newContentDecoder(u.size - u.pos)
		case c == '"':
			u.state = inString
		case c == '{' || c == '[':
			u.state, u.depth = inNested, 1
		default:
			u.state = inLiteral
		}
	case inString:
		if u.stringEnds(c) {
			u.state = afterValue
		}
	case inNested:
		switch {
		case u.inString:
			u.inString = !u.stringEnds(c)
		case c == '"':
			u.inString = true
		case c == '{' || c == '[':
			u.depth++
		case c == '}' || c == ']':
			u.depth--
			if u.depth == 0 {
				u.state = afterValue
			}
		}
	case inLiteral:
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.') {
			u.state = afterValue
			u.step(c)
			return
		}
	case afterValue:
		if c == ',' {
			u.state = beforeKey
		} else if !isJSONSpace(c) {
			u.state = verbatim // the end of the object, or something decodeJSON will refuse
		}
	}
	if keep {
		u.skeleton = append(u.skeleton, c)
	}
}

// stringEnds follows backslash escapes in a kept string and reports whether
// c is its closing quote.
func (u *Reader) stringEnds(c byte) bool {
	switch {
	case u.escape:
		u.escape = false
	case c == '\\':
		u.escape = true
	case c == '"':
		return true
	}
	return false
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isContentKey reports whether decodeJSON would store a top-level key's
// value in Body.ContentBase64: keys match exactly (input.DecodeJSON), so
// only an escaped key needs decoding first.
func isContentKey(quoted []byte) bool {
	const name = "contentBase64"
	key := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == name
}

// decode decodes the skeleton into body with the answers the whole body
// would give.
func (u *Reader) decode(body *Body) error {
	if u.syntaxAt > 0 || u.state == inContent {
		// The body is not valid JSON: a syntax error in (or the end of the
		// body within) a contentBase64 string, unless what came before it
		// already was one.
		var raw json.RawMessage
		var se *json.SyntaxError
		if err := json.Unmarshal(u.skeleton, &raw); errors.As(err, &se) && se.Error() != "unexpected end of JSON input" {
			return input.MalformedJSON(u.original(se.Offset))
		}
		if u.syntaxAt > 0 {
			return input.MalformedJSON(int64(u.syntaxAt))
		}
		return input.MalformedJSON(int64(u.pos))
	}
	if len(bytes.TrimSpace(u.skeleton)) == 0 {
		// decode's answer; the placeholders are not blank, nor was the text
		// they stand for.
		return kiterr.Invalid("", "request body is required")
	}
	var raw json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(u.skeleton, &raw); errors.As(err, &se) {
		return input.MalformedJSON(u.original(se.Offset))
	}
	return input.DecodeJSON(u.skeleton, body)
}

// original turns an offset in the skeleton into the same place in the body.
func (u *Reader) original(offset int64) int64 {
	moved := offset
	for _, c := range u.cuts {
		if offset >= int64(c.at+len(contentPlaceholder)) {
			moved += int64(c.removed)
		}
	}
	return moved
}

// contentOf returns the decoder of the contentBase64 value decodeJSON kept,
// or the answer when that value is not a string.
func (u *Reader) contentOf(raw []byte) (*contentDecoder, error) {
	const path = "contentBase64"
	if len(raw) == 0 || string(raw) == "null" {
		return nil, kiterr.Invalid(path, "is required")
	}
	if raw[0] != '"' {
		return nil, kiterr.Invalid(path, "must be of type string")
	}
	if u.text != nil && string(raw) == contentPlaceholder {
		return u.text, nil
	}
	// Every top-level contentBase64 string is read as it arrives, so this
	// is only a safety net: decode the string as it stands.
	d := newContentDecoder(len(raw))
	if _, end, bad := d.feed(raw[1:]); !end || bad >= 0 {
		return nil, kiterr.Invalid(path, "must be of type string")
	}
	return d, nil
}

// ---- decoding contentBase64 ----

// contentBase64 rules (docs/files.md): a JSON string of 4-7000000
// characters matching ^[A-Za-z0-9+/]+={0,2}$ that decodes as padded
// standard base64 with zero padding bits; at most maxFileBytes[mimeType]
// decoded bytes; the type's magic number.
const (
	minContentBase64 = 4
	maxContentBase64 = 7_000_000
)

// contentDecoder checks and decodes the text of a contentBase64 string as
// it arrives, byte by byte of the raw JSON (escapes included), into chunks
// of actors.FileChunkSize bytes. What it measures is what the rules are
// about: the text is the unescaped string when it has a backslash, and the
// raw bytes otherwise, as encoding/json leaves them. It decides nothing
// until the end (result), since the checks must come in their order.
type contentDecoder struct {
	rawLen  int  // bytes between the quotes
	textLen int  // bytes of the unescaped string
	escaped bool // a backslash was seen
	invalid bool // the text does not match the pattern
	pad     int  // '=' seen
	badPad  bool // the last quantum has non-zero padding bits

	quantum  [4]byte // characters not yet decoded
	nq       int
	chunks   [][]byte // nil once nothing needs to be kept
	size     int      // bytes decoded into chunks
	capacity int      // bytes the chunks may need at most

	esc  int  // 0; 1 after a backslash; 2-5 in the hex digits of \u
	u    rune // the \u value being read
	surr rune // a \u surrogate waiting for its pair; 0: none
	utf  [utf8.UTFMax]byte
	nutf int // bytes of an unfinished UTF-8 sequence
}

// plainBase64 marks the characters of a base64 run: the alphabet without
// '='.
var plainBase64 = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = true
	}
	return t
}()

// maxStoredBytes is the largest decoded size of any type: beyond it the
// upload is refused whatever its type, so nothing more is kept.
var maxStoredBytes = func() (n int) {
	for _, limit := range maxFileBytes {
		n = max(n, limit)
	}
	return n
}()

// newContentDecoder starts a string of at most room raw bytes.
func newContentDecoder(room int) *contentDecoder {
	return &contentDecoder{chunks: [][]byte{}, capacity: min(maxStoredBytes, room/4*3+3)}
}

// feed consumes raw bytes of the string. It reports how many it took, up
// to and including the closing quote when end, or the index in p of a byte
// that makes the JSON invalid (bad >= 0; -1 otherwise).
func (d *contentDecoder) feed(p []byte) (n int, end bool, bad int) {
	for n < len(p) {
		if d.esc == 0 && d.surr == 0 && d.nutf == 0 {
			run := n
			for run < len(p) && plainBase64[p[run]] {
				run++
			}
			if run > n {
				d.plain(p[n:run])
				n = run
				continue
			}
		}
		c := p[n]
		n++
		switch d.next(c) {
		case stringEnd:
			return n, true, -1
		case syntaxError:
			return n, false, n - 1
		}
	}
	return n, false, -1
}

type byteOutcome uint8

const (
	stringGoesOn byteOutcome = iota
	stringEnd
	syntaxError
)

// next consumes one byte outside a plain run: what encoding/json's scanner
// refuses in a string is a syntax error, and the unescaped length follows
// encoding/json's unquoting (U+FFFD for invalid UTF-8 and lone surrogates).
func (d *contentDecoder) next(c byte) byteOutcome {
	if c != '"' || d.esc != 0 {
		d.rawLen++
	}
	if c >= utf8.RuneSelf && d.esc == 0 {
		d.loneSurrogate()
		d.utf[d.nutf] = c
		d.nutf++
		d.flushUTF8(false)
		return stringGoesOn
	}
	d.flushUTF8(true)
	switch d.esc {
	case 0:
		if c != '\\' {
			d.loneSurrogate()
		}
		switch {
		case c == '"':
			return stringEnd
		case c == '\\':
			d.esc, d.escaped = 1, true
		case c < ' ':
			return syntaxError
		default:
			d.char(c)
		}
	case 1:
		d.esc = 0
		if c == 'u' {
			d.esc, d.u = 2, 0
			return stringGoesOn
		}
		d.loneSurrogate()
		switch c {
		case '"', '\\', '/':
			d.char(c)
		case 'b', 'f', 'n', 'r', 't':
			d.char('\n') // a control character: any of them breaks the pattern
		default:
			return syntaxError
		}
	default:
		v, ok := hexValue(c)
		if !ok {
			return syntaxError
		}
		d.u = d.u<<4 | v
		if d.esc++; d.esc == 6 {
			d.esc = 0
			d.escapedRune(d.u)
		}
	}
	return stringGoesOn
}

func hexValue(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// escapedRune takes the value of a \u escape.
func (d *contentDecoder) escapedRune(r rune) {
	if d.surr != 0 {
		first := d.surr
		d.surr = 0
		if pair := utf16.DecodeRune(first, r); pair != unicode.ReplacementChar {
			d.other(utf8.RuneLen(pair))
			return
		}
		d.other(3) // the first becomes U+FFFD; r stands on its own
	}
	switch {
	case utf16.IsSurrogate(r):
		d.surr = r
	case r < utf8.RuneSelf:
		d.char(byte(r))
	default:
		d.other(utf8.RuneLen(r))
	}
}

// loneSurrogate settles a \u surrogate that no second \u follows: U+FFFD.
func (d *contentDecoder) loneSurrogate() {
	if d.surr != 0 {
		d.surr = 0
		d.other(3)
	}
}

// flushUTF8 measures the complete UTF-8 sequences waiting, and all of them
// when the sequence cannot go on (end): an invalid byte unquotes to U+FFFD.
func (d *contentDecoder) flushUTF8(end bool) {
	for d.nutf > 0 && (end || utf8.FullRune(d.utf[:d.nutf])) {
		r, n := utf8.DecodeRune(d.utf[:d.nutf])
		if r == utf8.RuneError && n == 1 {
			d.other(3)
		} else {
			d.other(n)
		}
		d.nutf = copy(d.utf[:], d.utf[n:d.nutf])
	}
}

// other takes a character outside the pattern, of n bytes once unescaped.
func (d *contentDecoder) other(n int) {
	d.textLen += n
	d.mismatch()
}

func (d *contentDecoder) mismatch() {
	d.invalid = true
	d.chunks = nil
}

// char takes one unescaped ASCII character.
func (d *contentDecoder) char(c byte) {
	d.textLen++
	switch {
	case d.invalid:
	case c == '=':
		if d.pad++; d.pad > 2 {
			d.mismatch()
			return
		}
		d.push(c)
	case plainBase64[c] && d.pad == 0:
		d.push(c)
	default:
		d.mismatch()
	}
}

// plain takes a run of base64 characters other than '=', decoding whole
// quanta straight into the chunks.
func (d *contentDecoder) plain(run []byte) {
	d.rawLen += len(run)
	d.textLen += len(run)
	if d.invalid {
		return
	}
	if d.pad > 0 {
		d.mismatch()
		return
	}
	for d.nq > 0 && len(run) > 0 {
		d.push(run[0])
		run = run[1:]
	}
	for len(run) >= 4 {
		if d.chunks == nil {
			run = run[len(run)/4*4:] // nothing to keep: only the count matters
			break
		}
		dst := d.room()
		k := min(len(run)/4, len(dst)/3)
		if k == 0 {
			d.push(run[0])
			run = run[1:]
			continue
		}
		// Only alphabet characters, in whole quanta: this cannot fail.
		base64.StdEncoding.Decode(dst[:k*3], run[:k*4])
		d.wrote(k * 3)
		run = run[k*4:]
	}
	for _, c := range run {
		d.push(c)
	}
}

// push adds a character to the quantum and decodes it when complete.
func (d *contentDecoder) push(c byte) {
	d.quantum[d.nq] = c
	if d.nq++; d.nq < 4 {
		return
	}
	d.nq = 0
	var out [3]byte
	n, err := base64.StdEncoding.Strict().Decode(out[:], d.quantum[:])
	if err != nil {
		d.badPad = true
		return
	}
	for _, b := range out[:n] {
		if d.chunks == nil {
			return
		}
		d.room()[0] = b
		d.wrote(1)
	}
}

// room returns the free space of the last chunk, starting a new chunk when
// it is full. A chunk is allocated no larger than the rest of the body could
// fill, in whole quanta.
func (d *contentDecoder) room() []byte {
	if k := len(d.chunks); k > 0 {
		last := d.chunks[k-1]
		if len(last) < actors.FileChunkSize {
			if len(last) == cap(last) {
				// More than the body's length promised: grow rather than stall.
				last = slices.Grow(last, max(len(last), 3))
				d.chunks[k-1] = last
			}
			return last[len(last):min(cap(last), actors.FileChunkSize)]
		}
	}
	n := min(actors.FileChunkSize, max(d.capacity-d.size, 3))
	c := make([]byte, 0, (n+2)/3*3) // FileChunkSize is whole quanta too
	d.chunks = append(d.chunks, c)
	return c[:cap(c)]
}

// wrote extends the last chunk over n bytes written into room.
func (d *contentDecoder) wrote(n int) {
	k := len(d.chunks) - 1
	d.chunks[k] = d.chunks[k][:len(d.chunks[k])+n]
	if d.size += n; d.size > maxStoredBytes {
		d.chunks = nil // refused whatever the type: keep nothing
	}
}

// result applies the contentBase64 rules in their order and returns the
// chunks.
func (d *contentDecoder) result(mimeType string) ([][]byte, error) {
	const path = "contentBase64"
	n := d.rawLen
	if d.escaped {
		n = d.textLen
	}
	if n < minContentBase64 || n > maxContentBase64 {
		return nil, kiterr.Invalid(path, "must be 4 to 7000000 characters")
	}
	if d.invalid {
		return nil, kiterr.Invalid(path, "must match ^[A-Za-z0-9+/]+={0,2}$")
	}
	if d.pad == n || n%4 != 0 {
		return nil, kiterr.Invalid(path, "is not valid padded base64")
	}
	size := n/4*3 - d.pad
	if limit := maxFileBytes[mimeType]; size > limit {
		return nil, kiterr.New(kiterr.PayloadTooLarge, "a "+mimeType+" file may have at most "+strconv.Itoa(limit)+" bytes")
	}
	if d.badPad || d.chunks == nil || d.size != size {
		return nil, kiterr.Invalid(path, "is not valid padded base64")
	}
	if sig, ok := magic[mimeType]; ok && !bytes.HasPrefix(d.chunks[0], sig) {
		return nil, kiterr.Invalid(path, "content does not match mimeType")
	}
	return d.chunks, nil
}
