package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// call is one request waiting for its reply. Calls are pooled: the
// forwarded-request path allocates no waiter per request.
type call struct {
	id   uint64
	done chan struct{} // cap 1: res and err are set
	res  proto.Message
	err  error
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func (cl *call) finish(res proto.Message, err error) {
	cl.res, cl.err = res, err
	cl.done <- struct{}{}
}

// Call sends msg to the member listening on addr and waits for its reply.
// requestID is the caller's id of the request: a retry of the same
// request carries the same id, so that the peer can answer it without
// running it twice.
//
// ctx's deadline travels with the request, and when ctx ends first the
// peer is told to stop. The error is the handler's as a *kiterr.Error, or
// one of the transport's: ErrUnavailable (nothing was sent), ErrConnLost
// (the request may have run), ErrRefused, ErrTooLarge, ErrClosed, or
// ctx's error.
func (t *Transport) Call(ctx context.Context, addr string, msg proto.Message, requestID string) (proto.Message, error) {
	d, err := t.dialer(addr)
	if err != nil {
		return nil, err
	}
	// A connection can break between get and begin: nothing was sent on
	// it then, so one more connection is tried.
	for attempt := 0; ; attempt++ {
		c, err := d.get(ctx, true)
		if err != nil {
			return nil, err
		}
		cl, err := c.sendRequest(ctx, msg, requestID)
		if errors.Is(err, errBroken) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, c.sendError(err)
		}
		return c.wait(ctx, cl)
	}
}

// sendError is the caller's form of an error from begin.
func (c *conn) sendError(err error) error {
	switch {
	case errors.Is(err, errBroken):
		return fmt.Errorf("%w: %s: connection broke before the request was sent", ErrUnavailable, c.peer)
	case errors.Is(err, errQueueFull):
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, c.peer, err)
	}
	return err
}

func (c *conn) sendRequest(ctx context.Context, msg proto.Message, requestID string) (*call, error) {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	id, start, err := c.beginNew(frameRequest, true)
	if err != nil {
		return nil, err
	}
	c.out = appendRequest(c.out, timeout, requestID, string(msg.ProtoReflect().Descriptor().FullName()))
	if c.out, err = (proto.MarshalOptions{}).MarshalAppend(c.out, msg); err != nil {
		c.abandon(start)
		return nil, fmt.Errorf("peer: marshal %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	// Registered before commit unlocks: the reply may come at once.
	cl := calls.Get().(*call)
	cl.id = id
	c.calls[id] = cl
	if err := c.commit(start); err != nil {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		calls.Put(cl)
		return nil, err
	}
	return cl, nil
}

// wait waits for cl's reply or the end of ctx. When ctx ends first, the
// peer is told to stop, and a reply that comes later is dropped.
func (c *conn) wait(ctx context.Context, cl *call) (proto.Message, error) {
	select {
	case <-cl.done:
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.calls[cl.id]
		delete(c.calls, cl.id)
		c.mu.Unlock()
		if !waiting {
			// The reader or fail took it first and is finishing it.
			<-cl.done
		} else {
			cl.res, cl.err = nil, ctx.Err()
			c.sendEmpty(frameCancel, cl.id)
		}
	}
	res, err := cl.res, cl.err
	cl.res, cl.err = nil, nil
	calls.Put(cl)
	return res, err
}

// reply finishes the call a reply frame answers.
func (c *conn) reply(f frame) error {
	c.mu.Lock()
	cl := c.calls[f.id]
	delete(c.calls, f.id)
	c.mu.Unlock()
	if len(f.body) == 0 {
		return errMalformed
	}
	if cl == nil {
		return nil // the caller stopped waiting: nothing to decode it for
	}
	res, err, perr := c.decodeReply(f.body)
	if perr != nil {
		cl.finish(nil, ErrConnLost)
		return perr
	}
	cl.finish(res, err)
	return nil
}

// decodeReply returns a reply's message or error, or a protocol error.
func (c *conn) decodeReply(body []byte) (res proto.Message, err, protoErr error) {
	switch body[0] {
	case replyOK:
		name, payload, ok := cutBytes(body[1:])
		if !ok {
			return nil, nil, errMalformed
		}
		if len(name) == 0 {
			return nil, nil, nil
		}
		mt := c.t.cfg.Registry.lookup(name)
		if mt == nil {
			c.t.refuse("peer: reply of an unknown message type", "peer", c.peer, "name", clip(name))
			return nil, fmt.Errorf("%w: reply of unknown message type %q", ErrRefused, clip(name)), nil
		}
		m := mt.New().Interface()
		if err := proto.Unmarshal(payload, m); err != nil {
			c.t.refuse("peer: malformed reply", "peer", c.peer, "name", clip(name))
			return nil, fmt.Errorf("%w: malformed reply %s", ErrRefused, clip(name)), nil
		}
		return m, nil, nil
	case replyFailure:
		var fl kitpb.Failure
		if err := proto.Unmarshal(body[1:], &fl); err != nil {
			return nil, nil, errMalformed
		}
		return nil, kiterr.FromFailure(&fl), nil
	case replyRefused:
		reason, err := parseReason(body[1:])
		if err != nil {
			return nil, nil, err
		}
		return nil, &RefusedError{Reason: reason}, nil
	}
	return nil, nil, errMalformed
}

// clip is a peer-given name fit for a log line or an error: bounded.
func clip(name []byte) string {
	const max = 128
	if len(name) > max {
		return string(name[:max]) + "..."
	}
	return string(name)
}

// request starts the handler of a request frame. A request this node
// cannot run is answered with a refusal, and the connection stays up: in
// a rolling upgrade a peer may know a message this node does not yet.
func (c *conn) request(f frame) error {
	req, err := parseRequest(f.body)
	if err != nil {
		return err
	}
	h := c.t.cfg.Handler
	if h == nil {
		c.t.refuse("peer: request refused: no handler", "peer", c.peer)
		c.writeRefused(f.id, "this node takes no requests")
		return nil
	}
	mt := c.t.cfg.Registry.lookup(req.name)
	if mt == nil {
		c.t.refuse("peer: request of an unknown message type refused", "peer", c.peer, "name", clip(req.name))
		c.writeRefused(f.id, "unknown message type "+clip(req.name))
		return nil
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(req.payload, msg); err != nil {
		c.t.refuse("peer: malformed request refused", "peer", c.peer, "name", clip(req.name))
		c.writeRefused(f.id, "malformed message "+clip(req.name))
		return nil
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if req.timeout > 0 {
		ctx, cancel = context.WithTimeout(c.ctx, req.timeout)
	} else {
		ctx, cancel = context.WithCancel(c.ctx)
	}
	if ok, err := register(c, &c.running, f.id, cancel); !ok {
		cancel()
		return err
	}
	c.t.wg.Add(1)
	requestID := string(req.id)
	c.t.workers.Run(func() { c.handle(ctx, cancel, h, f.id, msg, requestID) })
	return nil
}

func (c *conn) handle(ctx context.Context, cancel context.CancelFunc, h Handler, id uint64, msg proto.Message, requestID string) {
	defer c.t.wg.Done()
	res, herr := h(ctx, c.peer, msg, requestID)
	cancel()
	c.mu.Lock()
	_, waiting := c.running[id]
	delete(c.running, id)
	c.mu.Unlock()
	if !waiting {
		return // the caller stopped waiting, or the connection broke
	}
	var refused *RefusedError
	if errors.As(herr, &refused) {
		c.t.refuse("peer: request refused by its handler", "peer", c.peer, "reason", refused.Reason)
		c.writeRefused(id, refused.Reason)
		return
	}
	c.writeReply(id, res, herr)
}

func (c *conn) writeReply(id uint64, res proto.Message, herr error) {
	start, err := c.begin(frameReply, id, false)
	if err != nil {
		return
	}
	if herr != nil {
		c.out = append(c.out, replyFailure)
		c.out, err = (proto.MarshalOptions{}).MarshalAppend(c.out, kiterr.ToFailure(herr))
	} else {
		c.out = append(c.out, replyOK)
		if res == nil {
			c.out = appendString(c.out, "")
		} else {
			c.out = appendString(c.out, string(res.ProtoReflect().Descriptor().FullName()))
			c.out, err = (proto.MarshalOptions{}).MarshalAppend(c.out, res)
		}
	}
	if err == nil {
		err = c.commit(start)
	} else {
		c.abandon(start)
	}
	if err != nil {
		// The caller must hear something: a reply over MaxFrame, or one
		// that does not marshal, is the handler's internal error.
		c.t.log.Warn("peer: reply not sent", "peer", c.peer, "err", err)
		c.writeReply(id, nil, kiterr.New(kiterr.Internal, "peer: reply not sent: "+err.Error()))
	}
}

func (c *conn) writeRefused(id uint64, reason string) {
	start, err := c.begin(frameReply, id, false)
	if err != nil {
		return
	}
	c.out = append(c.out, replyRefused)
	c.out = appendReason(c.out, reason)
	c.commit(start)
}

// Send queues a batch of one-way payloads for the member listening on
// addr and returns at once. Batches to one peer arrive in the order they
// were sent, each whole, or not at all: when there is no connection yet
// (one is started), or its queue is full, the batch is dropped and
// counted (Stats.Dropped) and the error says why. Raft retries what it
// does not hear back about.
func (t *Transport) Send(addr string, payloads ...[]byte) error {
	d, err := t.dialer(addr)
	if err != nil {
		return err
	}
	c, err := d.get(context.Background(), false)
	if err != nil {
		t.dropped.Add(1)
		return err
	}
	start, err := c.begin(frameBatch, 0, true)
	if err != nil {
		t.dropped.Add(1)
		return c.sendError(err)
	}
	c.out = appendBatch(c.out, payloads)
	if err := c.commit(start); err != nil {
		t.dropped.Add(1)
		return err
	}
	return nil
}

// batch delivers a one-way batch on the read loop, so batches are handed
// over in the order they arrived.
func (c *conn) batch(f frame) error {
	payloads, err := parseBatch(f.body)
	if err != nil {
		return err
	}
	if h := c.t.cfg.OneWay; h != nil {
		h(c.peer, payloads)
	} else {
		c.t.refuse("peer: one-way batch refused: no handler", "peer", c.peer)
	}
	return nil
}
