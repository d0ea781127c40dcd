package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestTwoNodesCallEachOther(t *testing.T) {
	a, b := start(t, "a", nil), start(t, "b", nil)
	mustCall(t, a, b.Addr(), "a", "u1")
	mustCall(t, b, a.Addr(), "b", "u2")
	mustCall(t, a, b.Addr(), "a", "u3") // the connection is reused
}

func TestThreeNodesCallEachOtherConcurrently(t *testing.T) {
	nodes := []*node{start(t, "n0", nil), start(t, "n1", nil), start(t, "n2", nil)}
	var wg sync.WaitGroup
	for i, from := range nodes {
		for j, to := range nodes {
			if i == j {
				continue
			}
			for k := range 20 {
				wg.Go(func() {
					mustCall(t, from, to.Addr(), from.cfg.NodeName, fmt.Sprintf("%d-%d-%d", i, j, k))
				})
			}
		}
	}
	wg.Wait()
}

// TestCallAnswers: what a handler returns, or what the receiver makes of a
// request, reaches the caller.
func TestCallAnswers(t *testing.T) {
	decision := limits.Decision{Policy: "messages.post", RetryAfter: 7}
	tests := []struct {
		name    string
		handler Handler
		msg     proto.Message
		check   func(t *testing.T, res proto.Message, err error)
	}{
		{"a reply message arrives whole", echo, &kitpb.GetUser{UserId: "u"}, func(t *testing.T, res proto.Message, err error) {
			if err != nil || res.(*kitpb.UserReply).GetUser().GetId() != "u" {
				t.Fatalf("got %v, %v", res, err)
			}
		}},
		{"a nil reply arrives as nil", func(context.Context, string, proto.Message, string) (proto.Message, error) { return nil, nil },
			&kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
				if err != nil || res != nil {
					t.Fatalf("got %v, %v", res, err)
				}
			}},
		{"a validation error keeps its code and path", func(context.Context, string, proto.Message, string) (proto.Message, error) {
			return nil, kiterr.Invalid("blocks[2].text", "is too long")
		}, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			var e *kiterr.Error
			if !errors.As(err, &e) || e.Code != kiterr.Validation || e.Path != "blocks[2].text" || e.Message != "blocks[2].text: is too long" {
				t.Fatalf("got %v, %#v", res, err)
			}
		}},
		{"a rate-limit error keeps its decision", func(context.Context, string, proto.Message, string) (proto.Message, error) {
			return nil, kiterr.OverLimit(decision)
		}, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			var e *kiterr.Error
			if !errors.As(err, &e) || e.Code != kiterr.RateLimited || e.Limit == nil || e.Limit.RetryAfter != 7 || e.Limit.Policy != "messages.post" {
				t.Fatalf("got %v, %#v", res, err)
			}
		}},
		{"a plain error is an internal error", func(context.Context, string, proto.Message, string) (proto.Message, error) {
			return nil, errors.New("disk on fire")
		}, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			if kiterr.CodeOf(err) != kiterr.Internal || errors.Is(err, ErrConnLost) {
				t.Fatalf("got %v, %#v", res, err)
			}
		}},
		{"a reply over the maximum frame is an internal error", func(context.Context, string, proto.Message, string) (proto.Message, error) {
			return &kitpb.UserReply{User: &kitpb.User{DisplayName: strings.Repeat("x", 70<<10)}}, nil
		}, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			if kiterr.CodeOf(err) != kiterr.Internal || !strings.Contains(err.Error(), "reply not sent") {
				t.Fatalf("got %v, %#v", res, err)
			}
		}},
		{"a message of an unknown name is refused", echo, &kitpb.ListUsers{}, func(t *testing.T, res proto.Message, err error) {
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "unknown message type kit.v1.ListUsers") {
				t.Fatalf("got %v, %v", res, err)
			}
		}},
		{"a handler's refusal is a refusal, with its reason", func(context.Context, string, proto.Message, string) (proto.Message, error) {
			return nil, fmt.Errorf("decoding: %w", &RefusedError{Reason: "unknown kind"})
		}, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "unknown kind") {
				t.Fatalf("got %v, %v", res, err)
			}
		}},
		{"a request without a handler is refused", nil, &kitpb.GetUser{}, func(t *testing.T, res proto.Message, err error) {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("got %v, %v", res, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := start(t, "b", func(c *Config) { c.Handler = tt.handler; c.MaxFrame = 64 << 10 })
			a := start(t, "a", nil)
			res, err := a.Call(ctxFor(t), b.Addr(), tt.msg, "r1")
			tt.check(t, res, err)
			mustCallAfter(t, a, b, tt.handler)
		})
	}
}

// mustCallAfter checks the connection still serves after an answer.
func mustCallAfter(t *testing.T, a, b *node, h Handler) {
	t.Helper()
	if h == nil {
		return
	}
	if _, err := a.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{UserId: "again"}, "r2"); errors.Is(err, ErrConnLost) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("the connection did not survive: %v", err)
	}
}

func TestUnknownMessageIsLoggedAtTheReceiver(t *testing.T) {
	b := start(t, "b", nil)
	a := start(t, "a", nil)
	if _, err := a.Call(ctxFor(t), b.Addr(), &kitpb.DeactivateUser{UserId: "u"}, "r"); !errors.Is(err, ErrRefused) {
		t.Fatalf("got %v", err)
	}
	if l := b.log.String(); !strings.Contains(l, "unknown message type") || !strings.Contains(l, "kit.v1.DeactivateUser") || !strings.Contains(l, "peer=a") {
		t.Fatalf("no log line at the receiver: %q", l)
	}
	if b.Stats().Refused != 1 {
		t.Fatalf("refused %d, want 1", b.Stats().Refused)
	}
}

func TestMalformedPayloadIsRefused(t *testing.T) {
	b := start(t, "b", nil)
	a := start(t, "a", nil)
	c, err := a.conn(t, b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// A GetUser whose field 1 claims more bytes than there are.
	cl := rawCall(t, c, "kit.v1.GetUser", []byte{0x0a, 0x7f, 'x'})
	res, err := c.wait(ctxFor(t), cl)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "malformed message") {
		t.Fatalf("got %v, %v", res, err)
	}
	mustCall(t, a, b.Addr(), "a", "after")
}

func TestTooLargeRequestIsNotSent(t *testing.T) {
	var ran atomic.Int32
	b := start(t, "b", func(c *Config) {
		c.Handler = func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
			ran.Add(1)
			return echo(ctx, from, msg, id)
		}
	})
	a := start(t, "a", func(c *Config) { c.MaxFrame = 1 << 10 })
	_, err := a.Call(ctxFor(t), b.Addr(), &kitpb.CreateWorkspace{Name: strings.Repeat("n", 2<<10)}, "r")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	mustCall(t, a, b.Addr(), "a", "after")
	if n := ran.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once (the call after)", n)
	}
}

func TestRequestIDAndDeadlineReachTheHandler(t *testing.T) {
	type seen struct {
		id       string
		deadline time.Time
		has      bool
	}
	got := make(chan seen, 2)
	b := start(t, "b", func(c *Config) {
		c.Handler = func(ctx context.Context, _ string, _ proto.Message, id string) (proto.Message, error) {
			d, ok := ctx.Deadline()
			got <- seen{id, d, ok}
			return nil, nil
		}
	})
	a := start(t, "a", nil)
	if _, err := a.Call(context.Background(), b.Addr(), &kitpb.GetUser{}, "no-deadline"); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.id != "no-deadline" || s.has {
		t.Fatalf("got %+v, want the id and no deadline", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, err := a.Call(ctx, b.Addr(), &kitpb.GetUser{}, "an-hour"); err != nil {
		t.Fatal(err)
	}
	// The deadline travels as the time left: never later than the caller's,
	// and earlier by no more than the trip took.
	if s := <-got; s.id != "an-hour" || !s.has || s.deadline.After(want.Add(time.Second)) || s.deadline.Before(want.Add(-time.Minute)) {
		t.Fatalf("got %+v, want a deadline near %v", s, want)
	}
}

// TestCancelledCallStopsTheHandler: a caller that stops waiting gets its
// context's error at once, and the handler's context ends.
func TestCancelledCallStopsTheHandler(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan error, 1)
	b := start(t, "b", func(c *Config) {
		c.Handler = func(ctx context.Context, _ string, _ proto.Message, _ string) (proto.Message, error) {
			close(started)
			<-ctx.Done()
			stopped <- ctx.Err()
			return nil, nil
		}
	})
	a := start(t, "a", nil)
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() {
		_, err := a.Call(ctx, b.Addr(), &kitpb.GetUser{}, "r")
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the call returned %v before its handler started", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("call returned %v, want context.Canceled", err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler context ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's context did not end")
	}
}

// TestBrokenConnection: calls in flight fail with ErrConnLost, and the
// next call connects again.
func TestBrokenConnection(t *testing.T) {
	started := make(chan struct{}, 8)
	release := make(chan struct{})
	b := start(t, "b", func(c *Config) {
		c.Handler = func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
			if msg.(*kitpb.GetUser).GetUserId() == "block" {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return echo(ctx, from, msg, id)
		}
	})
	p := peertest.NewProxy(t, b.Addr())
	a := start(t, "a", nil)
	mustCall(t, a, p.Addr(), "a", "before")
	const inFlight = 4
	errs := make(chan error, inFlight)
	for range inFlight {
		go func() {
			_, err := a.Call(ctxFor(t), p.Addr(), &kitpb.GetUser{UserId: "block"}, "r")
			errs <- err
		}()
	}
	for range inFlight {
		<-started
	}
	p.Cut()
	for range inFlight {
		if err := <-errs; !errors.Is(err, ErrConnLost) {
			t.Fatalf("call in flight returned %v, want ErrConnLost", err)
		}
	}
	close(release)
	mustCall(t, a, p.Addr(), "a", "after")
}

func TestCallToNothingIsUnavailableAndBacksOff(t *testing.T) {
	b := start(t, "b", nil)
	addr := b.Addr()
	b.Close()
	a := start(t, "a", nil)
	for range 3 {
		if _, err := a.Call(ctxFor(t), addr, &kitpb.GetUser{}, "r"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	}
	d, _ := a.dialer(addr)
	d.mu.Lock()
	failures := d.failures
	d.mu.Unlock()
	if failures < 1 {
		t.Fatal("no failed dial recorded")
	}
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	started := make(chan struct{})
	b := start(t, "b", func(c *Config) {
		c.Handler = func(ctx context.Context, _ string, _ proto.Message, _ string) (proto.Message, error) {
			close(started)
			<-ctx.Done()
			return nil, nil
		}
	})
	a := start(t, "a", nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{}, "r")
		done <- err
	}()
	<-started
	a.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if _, err := a.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{}, "r"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// conn returns a's connection to addr, dialing it.
func (tr *Transport) conn(t testing.TB, addr string) (*conn, error) {
	d, err := tr.dialer(addr)
	if err != nil {
		return nil, err
	}
	return d.get(ctxFor(t), true)
}

// rawCall sends a request frame with the given name and payload bytes.
func rawCall(t testing.TB, c *conn, name string, payload []byte) *call {
	t.Helper()
	id, start, err := c.beginNew(frameRequest, false)
	if err != nil {
		t.Fatal(err)
	}
	c.out = appendRequest(c.out, 0, "raw", name)
	c.out = append(c.out, payload...)
	cl := calls.Get().(*call)
	cl.id = id
	c.calls[id] = cl
	if err := c.commit(start); err != nil {
		t.Fatal(err)
	}
	return cl
}
