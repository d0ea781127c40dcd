package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The wire form of one frame:
//
//	length  uint32  big-endian, the bytes after it: header rest and body
//	version uint8   wireVersion; anything else closes the connection
//	type    uint8   a frameType
//	id      uint64  big-endian; a call's or a stream's id on its connection
//	body    the type's fields (below)
//
// A frame longer than the receiver's MaxFrame is refused before its body is
// read, so a peer cannot make the receiver allocate more than MaxFrame.
const (
	wireVersion = 1
	headerLen   = 4 + 1 + 1 + 8
	// minLength is the shortest legal length field: version, type, id.
	minLength = headerLen - 4
	// maxReason bounds the text of a refusal or an abort on the wire.
	maxReason = 256
)

type frameType uint8

// Frames a dialer sends (requests and the streams it opens) and frames the
// accepting side sends back (replies, credit). A frame that arrives on the
// wrong side of a connection is a protocol error.
const (
	// dialer → acceptor
	frameRequest    frameType = 1 // timeout, request id, message name, message
	frameCancel     frameType = 2 // the caller stopped waiting for call id
	frameBatch      frameType = 3 // one-way payloads, delivered in order
	frameStreamOpen frameType = 4 // a stream's header
	frameChunk      frameType = 5 // one chunk of stream id
	frameStreamEnd  frameType = 6 // every chunk of stream id was sent
	// acceptor → dialer
	frameReply      frameType = 7 // the answer to call id
	frameCredit     frameType = 8 // the receiver took n more chunks of stream id
	frameStreamDone frameType = 9 // the receiver consumed stream id whole
	// both ways
	frameStreamAbort frameType = 10 // a reason; either side gave up stream id
)

func (t frameType) fromDialer() bool {
	return t >= frameRequest && t <= frameStreamEnd || t == frameStreamAbort
}
func (t frameType) fromAcceptor() bool {
	return t >= frameReply && t <= frameStreamDone || t == frameStreamAbort
}

// Reply kinds, the first byte of a reply's body.
const (
	replyOK      = 0 // message name, message (an empty name: no message)
	replyFailure = 1 // a kitpb.Failure: the handler's error
	replyRefused = 2 // a reason: the receiver would not run the request
)

// Errors of a frame that cannot be read; each closes the connection.
var (
	errFrameTooLarge = errors.New("frame over the maximum size")
	errFrameShort    = errors.New("frame shorter than its header")
	errVersion       = errors.New("unknown wire version")
	errFrameType     = errors.New("unknown frame type")
	errMalformed     = errors.New("malformed frame body")
)

type frame struct {
	typ  frameType
	id   uint64
	body []byte
}

// frameReader reads frames from one connection, reusing its buffers.
type frameReader struct {
	r   *bufio.Reader
	h   [headerLen]byte
	buf []byte
	max int
}

// next reads one frame. Its body aliases the reader's buffer until the
// next call.
func (fr *frameReader) next() (frame, error) {
	f, buf, err := readFrame(fr.r, &fr.h, fr.buf, fr.max)
	// A buffer grown past maxSpare for one large frame is let go.
	if cap(buf) <= maxSpare {
		fr.buf = buf
	}
	return f, err
}

// readFrame reads one frame from r into buf (grown as needed, never past
// max) and returns it with the buffer to reuse. The body aliases buf. h is
// scratch space (a local array would escape to the heap through io.Reader).
func readFrame(r *bufio.Reader, h *[headerLen]byte, buf []byte, max int) (frame, []byte, error) {
	// The length is checked before anything else is waited for: a frame
	// that cannot be valid is refused as soon as its length is known.
	if _, err := io.ReadFull(r, h[:4]); err != nil {
		return frame{}, buf, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n < minLength {
		return frame{}, buf, errFrameShort
	}
	if uint64(n) > uint64(max) {
		return frame{}, buf, errFrameTooLarge
	}
	if _, err := io.ReadFull(r, h[4:]); err != nil {
		return frame{}, buf, err
	}
	if h[4] != wireVersion {
		return frame{}, buf, errVersion
	}
	f := frame{typ: frameType(h[5]), id: binary.BigEndian.Uint64(h[6:14])}
	if !f.typ.fromDialer() && !f.typ.fromAcceptor() {
		return frame{}, buf, errFrameType
	}
	size := int(n) - minLength
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	f.body = buf[:size]
	if _, err := io.ReadFull(r, f.body); err != nil {
		return frame{}, buf, err
	}
	return f, buf, nil
}

// appendHeader starts a frame at the end of b; finishFrame writes its
// length once the body is appended.
func appendHeader(b []byte, t frameType, id uint64) []byte {
	b = append(b, 0, 0, 0, 0, wireVersion, byte(t))
	return binary.BigEndian.AppendUint64(b, id)
}

// finishFrame writes the length of the frame that starts at b[start:], or
// reports that it is over max (the caller drops b[start:]).
func finishFrame(b []byte, start, max int) error {
	n := len(b) - start - 4
	if n > max {
		return fmt.Errorf("%w: %d bytes, the maximum is %d", ErrTooLarge, n, max)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return nil
}

// request is the body of a frameRequest. Its fields alias the frame.
type request struct {
	timeout time.Duration // 0: the caller set no deadline
	id      []byte        // the caller's request id (dedup of retries)
	name    []byte        // full protobuf name of the message
	payload []byte
}

// The deadline travels as the time left, not as a time of day: the two
// nodes' clocks need not agree, and the network's delay only makes the
// receiver's deadline later by that delay.
func appendRequest(b []byte, timeout time.Duration, id, name string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(max(timeout, 0)))
	b = appendString(b, id)
	return appendString(b, name)
}

func parseRequest(body []byte) (request, error) {
	if len(body) < 8 {
		return request{}, errMalformed
	}
	var r request
	t := binary.BigEndian.Uint64(body)
	if t > uint64(1<<63-1) {
		return request{}, errMalformed
	}
	r.timeout = time.Duration(t)
	rest := body[8:]
	var ok bool
	if r.id, rest, ok = cutBytes(rest); !ok {
		return request{}, errMalformed
	}
	if r.name, rest, ok = cutBytes(rest); !ok {
		return request{}, errMalformed
	}
	r.payload = rest
	return r, nil
}

// parseBatch splits a batch's body into its payloads, copied once into one
// buffer so that the handler may keep them.
func parseBatch(body []byte) ([][]byte, error) {
	count, n := binary.Uvarint(body)
	// Each payload takes at least its one-byte length.
	if n <= 0 || count > uint64(len(body)-n) || n != uvarintLen(count) {
		return nil, errMalformed
	}
	data := make([]byte, len(body)-n)
	copy(data, body[n:])
	payloads := make([][]byte, 0, count)
	for range count {
		p, rest, ok := cutBytes(data)
		if !ok {
			return nil, errMalformed
		}
		payloads = append(payloads, p[:len(p):len(p)])
		data = rest
	}
	if len(data) != 0 {
		return nil, errMalformed
	}
	return payloads, nil
}

func appendBatch(b []byte, payloads [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(payloads)))
	for _, p := range payloads {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendReason(b []byte, reason string) []byte {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return append(b, reason...)
}

func parseReason(body []byte) (string, error) {
	if len(body) > maxReason {
		return "", errMalformed
	}
	return string(body), nil
}

func parseCredit(body []byte) (uint32, error) {
	if len(body) != 4 {
		return 0, errMalformed
	}
	return binary.BigEndian.Uint32(body), nil
}

// cutBytes splits a uvarint-length-prefixed field off b. A length in more
// bytes than it needs is refused: each frame has one encoding.
func cutBytes(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) || k != uvarintLen(n) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

func appendUint32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
