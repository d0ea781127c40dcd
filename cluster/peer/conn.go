package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// conn is one TLS connection between two members. The side that dialed
// sends requests, batches and streams on it and reads their answers; the
// side that accepted runs them. Frames to write are appended to out under
// mu and written by one goroutine, so concurrent calls share a write (and
// a TLS record) instead of taking turns at the socket.
type conn struct {
	t      *Transport
	tc     *tls.Conn
	raw    net.Conn // closed to break the connection: tls.Conn.Close would wait for a blocked write
	peer   string   // the node name in the peer's certificate
	dialed bool     // this side dialed

	wake chan struct{} // cap 1: out has frames
	done chan struct{} // closed when the connection breaks

	// ctx is the parent of the accepting side's handler contexts; it ends
	// when the connection breaks.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	err    error  // why the connection broke; nil while it is up
	out    []byte // frames waiting for the writer
	spare  []byte // the writer's last buffer, for reuse
	nextID uint64
	// The dialing side's calls waiting for replies and streams it sends.
	calls map[uint64]*call
	sends map[uint64]*StreamWriter
	// The accepting side's handlers running and streams it reads.
	running map[uint64]context.CancelFunc
	recvs   map[uint64]*StreamReader
}

func newConn(t *Transport, tc *tls.Conn, raw net.Conn, peer string, dialed bool) *conn {
	c := &conn{
		t:      t,
		tc:     tc,
		raw:    raw,
		peer:   peer,
		dialed: dialed,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if dialed {
		c.calls = make(map[uint64]*call)
		c.sends = make(map[uint64]*StreamWriter)
	} else {
		c.ctx, c.cancel = context.WithCancel(context.Background())
		c.running = make(map[uint64]context.CancelFunc)
		c.recvs = make(map[uint64]*StreamReader)
	}
	return c
}

// run writes and reads the connection until it breaks. It is called on a
// goroutine counted in t.wg.
func (c *conn) run() {
	c.t.wg.Add(1)
	go c.writeLoop()
	err := c.readLoop()
	c.fail(err)
}

func (c *conn) broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// errBroken: the connection broke before the frame was queued, so
// nothing of it was sent.
var errBroken = errors.New("peer: connection broken")

// errQueueFull: the frames waiting for the peer are over QueueBytes.
var errQueueFull = errors.New("peer: queue to the peer is full")

// begin locks the connection for appending one frame of type typ and
// returns where it starts in out. With bounded, a full queue refuses it.
// The caller appends the body and calls commit, or abandon.
func (c *conn) begin(typ frameType, id uint64, bounded bool) (int, error) {
	c.mu.Lock()
	return c.beginLocked(typ, id, bounded)
}

// beginNew is begin for a frame that starts a call or a stream: it takes
// the next id of the connection.
func (c *conn) beginNew(typ frameType, bounded bool) (id uint64, start int, err error) {
	c.mu.Lock()
	c.nextID++
	id = c.nextID
	start, err = c.beginLocked(typ, id, bounded)
	return id, start, err
}

// beginLocked is begin with mu held; it unlocks mu when it fails.
func (c *conn) beginLocked(typ frameType, id uint64, bounded bool) (int, error) {
	if c.err != nil {
		c.mu.Unlock()
		return 0, errBroken
	}
	if bounded && len(c.out) >= c.t.cfg.QueueBytes {
		c.mu.Unlock()
		return 0, errQueueFull
	}
	start := len(c.out)
	c.out = appendHeader(c.out, typ, id)
	return start, nil
}

// commit ends the frame begun at start and unlocks. A frame over MaxFrame
// is taken back out.
func (c *conn) commit(start int) error {
	err := finishFrame(c.out, start, c.t.cfg.MaxFrame)
	if err != nil {
		c.out = c.out[:start]
	}
	c.mu.Unlock()
	if err == nil {
		c.signal()
	}
	return err
}

// abandon takes the frame begun at start back out and unlocks.
func (c *conn) abandon(start int) {
	c.out = c.out[:start]
	c.mu.Unlock()
}

// sendEmpty queues a frame without a body; a broken connection drops it
// (the peer has seen the break too).
func (c *conn) sendEmpty(typ frameType, id uint64) {
	if start, err := c.begin(typ, id, false); err == nil {
		c.commit(start)
	}
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// maxSpare is the largest write buffer kept for reuse: a burst of large
// frames must not pin its memory for the connection's life.
const maxSpare = 1 << 20

func (c *conn) writeLoop() {
	defer c.t.wg.Done()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		// Let the goroutines that are ready run first: under load they
		// are the handlers and the raft driver about to queue frames of
		// their own, which then leave in this write instead of one each
		// (bench/README.md "The writer yields first"). With nothing else
		// ready it returns at once.
		runtime.Gosched()
		c.mu.Lock()
		buf := c.out
		c.out, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		c.raw.SetWriteDeadline(time.Now().Add(c.t.cfg.WriteTimeout))
		_, err := c.tc.Write(buf)
		if err != nil {
			c.fail(err)
			return
		}
		if cap(buf) <= maxSpare {
			c.mu.Lock()
			c.spare = buf[:0]
			c.mu.Unlock()
		}
	}
}

// readLoop reads frames until the connection breaks or the peer breaks
// the protocol, and returns why.
func (c *conn) readLoop() error {
	fr := &frameReader{r: bufio.NewReaderSize(c.tc, 32<<10), max: c.t.cfg.MaxFrame}
	for {
		f, err := fr.next()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.broken():
			case c.t.departed(c.peer):
				// A peer that stops resets what it had open.
				c.t.cfg.Logger.Debug("peer: connection closed", "peer", c.peer, "err", err, "departed", true)
			default:
				c.t.refuse("peer: connection closed", "peer", c.peer, "err", err)
			}
			return err
		}
		if c.dialed {
			err = c.fromAcceptor(f)
		} else {
			err = c.fromDialer(f)
		}
		if err != nil {
			c.t.refuse("peer: protocol violation, connection closed", "peer", c.peer, "frame", f.typ, "err", err)
			return err
		}
	}
}

// fromDialer runs a frame that arrived on an accepted connection.
func (c *conn) fromDialer(f frame) error {
	switch f.typ {
	case frameRequest:
		return c.request(f)
	case frameCancel:
		c.mu.Lock()
		cancel := c.running[f.id]
		delete(c.running, f.id)
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return nil
	case frameBatch:
		return c.batch(f)
	case frameStreamOpen:
		return c.openStream(f)
	case frameChunk:
		return c.chunk(f)
	case frameStreamEnd:
		c.mu.Lock()
		r := c.recvs[f.id]
		c.mu.Unlock()
		if r != nil {
			r.end()
		}
		return nil
	case frameStreamAbort:
		reason, err := parseReason(f.body)
		if err != nil {
			return err
		}
		c.mu.Lock()
		r := c.recvs[f.id]
		c.mu.Unlock()
		if r != nil {
			r.abort(&AbortedError{ByPeer: true, Reason: reason})
		}
		return nil
	}
	return errFrameType
}

// fromAcceptor runs a frame that arrived on a dialed connection.
func (c *conn) fromAcceptor(f frame) error {
	switch f.typ {
	case frameReply:
		return c.reply(f)
	case frameCredit:
		n, err := parseCredit(f.body)
		if err != nil {
			return err
		}
		if w := c.sender(f.id, false); w != nil {
			w.grant(int(n))
		}
		return nil
	case frameStreamDone:
		if len(f.body) != 0 {
			return errMalformed
		}
		if w := c.sender(f.id, true); w != nil {
			w.finish(nil)
		}
		return nil
	case frameStreamAbort:
		reason, err := parseReason(f.body)
		if err != nil {
			return err
		}
		if w := c.sender(f.id, true); w != nil {
			w.finish(&AbortedError{ByPeer: true, Reason: reason})
		}
		return nil
	}
	return errFrameType
}

// fail breaks the connection for err, once: every call waiting on it
// fails, every stream on it is aborted, every handler's context ends.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	calls, sends, recvs := c.calls, c.sends, c.recvs
	c.calls, c.sends, c.recvs, c.running = nil, nil, nil, nil
	c.mu.Unlock()
	close(c.done)
	c.raw.Close()
	if c.cancel != nil {
		c.cancel()
	}
	lost := ErrConnLost
	if errors.Is(err, ErrClosed) {
		lost = ErrClosed
	}
	for _, cl := range calls {
		cl.finish(nil, lost)
	}
	for _, w := range sends {
		w.finish(lost)
	}
	for _, r := range recvs {
		r.abort(lost)
	}
}

// errIDInUse: a peer started a request or stream under the id of one that
// is still running.
var errIDInUse = errors.New("id in use")

// register adds v under id to one of the accepting side's tables (running,
// recvs). It reports false with no error when the connection broke (fail
// took the tables), and a protocol error when the id is in use.
func register[V any](c *conn, table *map[uint64]V, id uint64, v V) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false, nil
	}
	if _, dup := (*table)[id]; dup {
		return false, errIDInUse
	}
	(*table)[id] = v
	return true, nil
}
