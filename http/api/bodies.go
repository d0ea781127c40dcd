package api

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
)

// Request bodies: every body but an upload's is read whole before its
// handler runs, an upload's is streamed, and the bytes of uploads in flight
// are bounded (docs/files.md "Files: memory").

// ---- uploads in flight ----

// maxUploadBodiesInFlight bounds the request bytes of the uploads being
// read and stored at once. An upload holds about 1.5 times its body until
// its reply (its decoded chunks, and the batch that copies them), so 24 MiB
// keeps uploads under ~40 MB of heap however many clients send at once:
// three 5 MB files at a time, or eighteen of 1 MB. The others wait their
// turn (in order) rather than fail; their bodies wait in the connection.
const maxUploadBodiesInFlight = 24 << 20

// uploadBudgetKey is the request user value under which readBody hands
// uploadFile the server's byteBudget.
type uploadBudgetKey struct{}

// byteBudget is a FIFO weighted semaphore of bytes.
type byteBudget struct {
	mu      sync.Mutex
	size    int
	free    int
	waiting []budgetWaiter
}

type budgetWaiter struct {
	n     int
	ready chan struct{}
}

func newByteBudget(size int) *byteBudget { return &byteBudget{size: size, free: size} }

// acquire waits until n bytes (at most the whole budget) are free, after
// every earlier waiter, and returns what it took.
func (b *byteBudget) acquire(n int) int {
	n = min(max(n, 1), b.size)
	b.mu.Lock()
	if len(b.waiting) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return n
	}
	w := budgetWaiter{n, make(chan struct{})}
	b.waiting = append(b.waiting, w)
	b.mu.Unlock()
	<-w.ready
	return n
}

// release gives back what acquire returned.
func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.free += n
	for len(b.waiting) > 0 && b.waiting[0].n <= b.free {
		w := b.waiting[0]
		b.waiting = b.waiting[1:]
		b.free -= w.n
		close(w.ready)
	}
	b.mu.Unlock()
}

// ---- request bodies ----

// readBody is the body step of handle. fasthttp streams request bodies
// (StreamRequestBody) so that uploadFile can decode an upload as it
// arrives; every other request has its body read whole here first, within
// the limit fasthttp applied when it read bodies itself, and answered as
// fasthttp answered (parseError, then the connection closes) when that
// fails, so that the other handlers see no difference. It reports whether
// the body is left streaming to rt's handler (drainBody after it), and
// false in ok when it answered the request.
func (s *Server) readBody(ctx *fasthttp.RequestCtx, rt *route) (streamed, ok bool) {
	limit := s.bodyLimit(&ctx.Request.Header)
	n := ctx.Request.Header.ContentLength()
	switch {
	case n > limit || n == 0 && ctx.Request.Header.Peek(bodyTooLargeHeader) != nil:
		s.refuseBody(ctx, fasthttp.ErrBodyTooLarge)
		return false, false
	case n > 0 && rt != nil && rt.body > maxJSONBody:
		// Bodies above the JSON limit are uploads: streamed.
		ctx.SetUserValue(uploadBudgetKey{}, s.uploads)
		return true, true
	}
	if err := readWholeBody(ctx, limit); err != nil {
		s.refuseBody(ctx, err)
		return false, false
	}
	return false, true
}

// drainBody reads what is left of a streamed body: whatever the answer,
// it must be read before the next request on the connection.
func drainBody(ctx *fasthttp.RequestCtx) {
	if ctx.Request.IsBodyStream() {
		if _, err := io.Copy(io.Discard, ctx.RequestBodyStream()); err != nil {
			ctx.SetConnectionClose()
		}
	}
}

// bodyLimit is the body limit fasthttp applies to a request: the server's,
// or the one hookRequestConfig sets.
func (s *Server) bodyLimit(h *fasthttp.RequestHeader) int {
	if l := hookRequestConfig(h).MaxRequestBodySize; l > 0 {
		return l
	}
	return s.srv.MaxRequestBodySize
}

// bodyTooLargeHeader marks a request whose Content-Length is over its
// limit (limitBodies, which first removes any the client sent).
const bodyTooLargeHeader = "X-Kitd-Body-Too-Large"

// limitBodies is the server's HeaderReceived hook: hookRequestConfig, and
// the refusal of a body on its Content-Length alone. When it streams bodies,
// fasthttp reads the first 8 KiB of a body before the handler runs, even of
// one over the limit, so a client waiting for the answer before it sends
// would wait until the read timeout. Such a request is made bodiless and
// marked instead; readBody answers it 413 and closes the connection,
// which is what fasthttp did without streaming. A refused request's
// "Expect: 100-continue" is dropped too: fasthttp would answer it 100
// first, inviting the body the refusal is there to spare (RFC 9110
// 10.1.1), and a client sending it as the connection closes may never
// read the refusal.
func (s *Server) limitBodies(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	c := hookRequestConfig(h)
	h.Del(bodyTooLargeHeader) // only this hook may set these
	h.Del(ambiguousLengthHeader)
	expect100(h)
	if unframed(h.ContentLength(), h.RawHeaders()) || hasBareLF(h.RawHeaders()) {
		// Made bodiless so that nothing of it is read: dispatch refuses
		// it and closes the connection.
		h.SetContentLength(0)
		h.Del(fasthttp.HeaderExpect)
		h.Set(ambiguousLengthHeader, "1")
		return c
	}
	if h.ContentLength() > s.bodyLimit(h) {
		h.SetContentLength(0)
		h.Del(fasthttp.HeaderExpect)
		h.Set(bodyTooLargeHeader, "1")
	}
	return c
}

// expect100 writes a 100-continue expectation as fasthttp knows it:
// fasthttp invites the body only for the exact value "100-continue", but
// the value is case-insensitive and may be one of a list (RFC 9110 10.1.1),
// which may span several Expect lines (RFC 9110 5.3), while fasthttp reads
// the first line only. Read otherwise, the client waits for the 100 while
// fasthttp waits for the body, until one of them times out.
//
// An HTTP/1.0 request's expectation is dropped: the server must ignore it
// and never send an HTTP/1.0 client a 1xx (RFC 9110 10.1.1, 15.2).
func expect100(h *fasthttp.RequestHeader) {
	if !h.IsHTTP11() {
		h.Del(fasthttp.HeaderExpect)
		return
	}
	lines := h.PeekAll(fasthttp.HeaderExpect)
	if len(lines) == 0 || string(lines[0]) == expect100Continue {
		return
	}
	for _, v := range lines {
		for m := range bytes.SplitSeq(v, []byte(",")) {
			if bytes.EqualFold(bytes.TrimSpace(m), []byte(expect100Continue)) {
				h.Del(fasthttp.HeaderExpect) // every line: fasthttp reads the first
				h.Set(fasthttp.HeaderExpect, expect100Continue)
				return
			}
		}
	}
}

const expect100Continue = "100-continue"

// ambiguousLengthHeader marks a request whose body length is not known
// for sure (unframed; limitBodies, which first removes any the client
// sent). fasthttp reads a request with a Content-Length and a
// Transfer-Encoding by its Transfer-Encoding, and one whose
// Transfer-Encoding is identity as bodiless, keeping the connection open
// either way; but a proxy in front may have framed it otherwise: the bytes
// the two disagree on would be another request to one of them (request
// smuggling). RFC 9112 6.1 lets a server refuse the first, 6.3 has it
// refuse the second with 400, and the connection closes either way;
// dispatch refuses them as fasthttp refuses two Content-Lengths.
const ambiguousLengthHeader = "X-Kitd-Ambiguous-Length"

// errAmbiguousLength is answered as any head fasthttp cannot read: 400
// malformed HTTP request.
var errAmbiguousLength = errors.New("request body length is ambiguous")

// unframed reports whether a request head (fasthttp's Content-Length n and
// the raw header lines) frames its body in a way a proxy may read
// otherwise: a Content-Length with a Transfer-Encoding, or a
// Transfer-Encoding that is not chunked (fasthttp refuses any coding but
// chunked and identity; n is -2 for identity, as for no length at all).
func unframed(n int, raw []byte) bool {
	var cl, te bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		key, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		cl = cl || bytes.EqualFold(key, []byte(fasthttp.HeaderContentLength))
		te = te || bytes.EqualFold(key, []byte(fasthttp.HeaderTransferEncoding))
	}
	return te && (cl || n != -1)
}

// hasBareLF reports a header line ended by a bare LF, which fasthttp reads
// as a line's end where a proxy in front may not: refused as an ambiguous
// length is (a connection's first head is refused earlier, headScan).
func hasBareLF(raw []byte) bool {
	for i := 0; ; i++ {
		n := bytes.IndexByte(raw[i:], '\n')
		if n < 0 {
			return false
		}
		if i += n; i == 0 || raw[i-1] != '\r' {
			return true
		}
	}
}

// refuseBody answers a body fasthttp would have refused to read.
func (s *Server) refuseBody(ctx *fasthttp.RequestCtx, err error) {
	s.parseError(ctx, err)
	ctx.SetConnectionClose()
}

// bodyBuffers holds the buffers bodies are read into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readWholeBody reads the streamed body into the request, as fasthttp did.
func readWholeBody(ctx *fasthttp.RequestCtx, limit int) error {
	n := ctx.Request.Header.ContentLength()
	if n == 0 {
		return ctx.Request.CloseBodyStream()
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			bodyBuffers.Put(buf)
		}
	}()
	buf.Reset()
	c, _ := ctx.Conn().(*trackedConn)
	if c != nil && n < 0 {
		// A chunked body ends with its last chunk and trailers, never
		// with the connection (RFC 9112 7.1): one cut before is not served.
		c.chunked, c.cut = true, false
		defer func() { c.chunked = false }()
	}
	got, err := buf.ReadFrom(io.LimitReader(ctx.RequestBodyStream(), int64(limit)+1))
	switch {
	case err != nil:
		return err
	case c != nil && c.cut:
		return io.ErrUnexpectedEOF
	case got > int64(limit):
		return fasthttp.ErrBodyTooLarge
	case n > 0 && got != int64(n):
		return io.ErrUnexpectedEOF
	}
	ctx.Request.SetBody(buf.Bytes())
	return nil
}
