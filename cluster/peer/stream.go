package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A stream carries a large value (a partition's snapshot) from the dialing
// side to a StreamHandler of the peer in chunks of at most MaxChunk bytes.
// Flow control is by credit: the receiver grants StreamWindow chunks when
// it opens the stream and one more for each it consumes, and Write waits
// for credit, so a slow receiver holds the sender back instead of filling
// its memory. Either end can abort; the other hears why.

// errStreamFinished: a Write after the stream ended without an error (the
// receiver accepted it before reading it all).
var errStreamFinished = errors.New("peer: stream already finished")

// StreamWriter is the sending end of a stream. Its methods are for one
// goroutine.
type StreamWriter struct {
	c   *conn
	id  uint64
	ctx context.Context

	credit chan struct{} // cap 1: credits grew
	done   chan struct{} // closed when the stream ended; err says how

	mu      sync.Mutex
	credits int
	ended   bool
	err     error
}

// Stream opens a stream to the member listening on addr. header says what
// the stream carries (at most MaxChunk bytes). ctx bounds the whole
// stream: when it ends, the stream is aborted.
func (t *Transport) Stream(ctx context.Context, addr string, header []byte) (*StreamWriter, error) {
	if len(header) > t.cfg.MaxChunk {
		return nil, fmt.Errorf("%w: stream header of %d bytes", ErrTooLarge, len(header))
	}
	d, err := t.dialer(addr)
	if err != nil {
		return nil, err
	}
	c, err := d.get(ctx, true)
	if err != nil {
		return nil, err
	}
	w := &StreamWriter{c: c, ctx: ctx, credit: make(chan struct{}, 1), done: make(chan struct{})}
	id, start, err := c.beginNew(frameStreamOpen, false)
	if err != nil {
		return nil, c.sendError(err)
	}
	w.id = id
	c.out = append(c.out, header...)
	c.sends[id] = w
	if err := c.commit(start); err != nil {
		c.sender(id, true)
		return nil, err
	}
	return w, nil
}

// sender returns the stream writer id of a dialed connection, taking it
// off the connection with remove.
func (c *conn) sender(id uint64, remove bool) *StreamWriter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.sends[id]
	if remove {
		delete(c.sends, id)
	}
	return w
}

// Write sends one chunk of at most MaxChunk bytes, waiting for credit. It
// fails with an *AbortedError when the receiver aborted, ErrConnLost when
// the connection broke, or ctx's error (the stream is aborted then).
func (w *StreamWriter) Write(chunk []byte) error {
	if len(chunk) > w.c.t.cfg.MaxChunk {
		return fmt.Errorf("%w: chunk of %d bytes, the maximum is %d", ErrTooLarge, len(chunk), w.c.t.cfg.MaxChunk)
	}
	for {
		w.mu.Lock()
		if w.ended {
			err := w.err
			w.mu.Unlock()
			if err == nil {
				err = errStreamFinished
			}
			return err
		}
		if w.credits > 0 {
			w.credits--
			w.mu.Unlock()
			break
		}
		w.mu.Unlock()
		select {
		case <-w.credit:
		case <-w.done:
		case <-w.ctx.Done():
			w.Abort(w.ctx.Err().Error())
			return w.ctx.Err()
		}
	}
	start, err := w.c.begin(frameChunk, w.id, false)
	if err != nil {
		return ErrConnLost
	}
	w.c.out = append(w.c.out, chunk...)
	return w.c.commit(start)
}

// Close tells the receiver that every chunk was sent and waits for it to
// accept the stream (nil) or abort it (an *AbortedError).
func (w *StreamWriter) Close() error {
	w.mu.Lock()
	ended := w.ended
	w.mu.Unlock()
	if !ended {
		w.c.sendEmpty(frameStreamEnd, w.id)
	}
	select {
	case <-w.done:
	case <-w.ctx.Done():
		w.Abort(w.ctx.Err().Error())
		return w.ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Abort gives the stream up; the receiver's Next returns an *AbortedError
// with reason. It does nothing once the stream ended.
func (w *StreamWriter) Abort(reason string) {
	if !w.finish(&AbortedError{Reason: reason}) {
		return
	}
	w.c.sender(w.id, true)
	if start, err := w.c.begin(frameStreamAbort, w.id, false); err == nil {
		w.c.out = appendReason(w.c.out, reason)
		w.c.commit(start)
	}
}

func (w *StreamWriter) grant(n int) {
	w.mu.Lock()
	w.credits += n
	w.mu.Unlock()
	select {
	case w.credit <- struct{}{}:
	default:
	}
}

// finish ends the stream with err (nil: accepted), once; it reports
// whether this call ended it.
func (w *StreamWriter) finish(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	w.ended, w.err = true, err
	close(w.done)
	return true
}

// StreamReader is the receiving end of a stream, given to the
// StreamHandler.
type StreamReader struct {
	c      *conn
	id     uint64
	chunks chan []byte        // cap StreamWindow: the sender never has more credit
	ended  chan struct{}      // closed when every chunk was sent
	gone   chan struct{}      // closed when the stream was aborted or its connection broke
	err    error              // why gone closed
	cancel context.CancelFunc // ends the handler's context
	once   sync.Once
	endOne sync.Once
	taken  int // chunks consumed since credit was last granted
}

// Next returns the next chunk, io.EOF after the last, or an error when the
// sender aborted (*AbortedError) or the connection broke (ErrConnLost).
// The chunk is the caller's to keep.
func (r *StreamReader) Next() ([]byte, error) {
	select {
	case b := <-r.chunks:
		r.took()
		return b, nil
	default:
	}
	select {
	case b := <-r.chunks:
		r.took()
		return b, nil
	case <-r.ended:
		// Every chunk was queued before the end was seen.
		select {
		case b := <-r.chunks:
			r.took()
			return b, nil
		default:
			return nil, io.EOF
		}
	case <-r.gone:
		return nil, r.err
	}
}

// took grants credit for consumed chunks, half a window at a time, so
// that a stream costs one credit frame per half window, not per chunk.
func (r *StreamReader) took() {
	r.taken++
	if r.taken < max(1, cap(r.chunks)/2) {
		return
	}
	if start, err := r.c.begin(frameCredit, r.id, false); err == nil {
		r.c.out = appendUint32(r.c.out, uint32(r.taken))
		r.c.commit(start)
	}
	r.taken = 0
}

func (r *StreamReader) end() { r.endOne.Do(func() { close(r.ended) }) }

func (r *StreamReader) abort(err error) {
	r.once.Do(func() {
		r.err = err
		r.cancel() // before gone: a Next that sees gone sees the context ended
		close(r.gone)
	})
}

// openStream starts the handler of a stream a peer opened.
func (c *conn) openStream(f frame) error {
	if len(f.body) > c.t.cfg.MaxChunk {
		return errMalformed
	}
	h := c.t.cfg.Stream
	if h == nil {
		c.t.refuse("peer: stream refused: no handler", "peer", c.peer)
		if start, err := c.begin(frameStreamAbort, f.id, false); err == nil {
			c.out = appendReason(c.out, "this node takes no streams")
			c.commit(start)
		}
		return nil
	}
	window := c.t.cfg.StreamWindow
	r := &StreamReader{
		c:      c,
		id:     f.id,
		chunks: make(chan []byte, window),
		ended:  make(chan struct{}),
		gone:   make(chan struct{}),
	}
	header := append([]byte(nil), f.body...)
	ctx, cancel := context.WithCancel(c.ctx)
	r.cancel = cancel
	if ok, err := register(c, &c.recvs, f.id, r); !ok {
		cancel()
		return err
	}
	if start, err := c.begin(frameCredit, f.id, false); err == nil {
		c.out = appendUint32(c.out, uint32(window))
		c.commit(start)
	}
	c.t.wg.Add(1)
	go func() {
		defer c.t.wg.Done()
		err := h(ctx, c.peer, header, r)
		cancel()
		c.mu.Lock()
		_, open := c.recvs[f.id]
		delete(c.recvs, f.id)
		c.mu.Unlock()
		select {
		case <-r.gone:
			return // aborted by the sender, or the connection broke
		default:
		}
		r.abort(&AbortedError{Reason: "the handler returned"})
		if !open {
			return
		}
		if err == nil {
			c.sendEmpty(frameStreamDone, f.id)
			return
		}
		if start, berr := c.begin(frameStreamAbort, f.id, false); berr == nil {
			c.out = appendReason(c.out, err.Error())
			c.commit(start)
		}
	}()
	return nil
}

// chunk queues a chunk for its stream's reader. A chunk past the credit
// granted breaks the protocol; one for a stream that already ended is
// dropped (it was in flight when the handler returned).
func (c *conn) chunk(f frame) error {
	if len(f.body) > c.t.cfg.MaxChunk {
		return errFrameTooLarge
	}
	c.mu.Lock()
	r := c.recvs[f.id]
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case r.chunks <- append([]byte(nil), f.body...):
		return nil
	default:
		return errors.New("chunk past the credit granted")
	}
}
