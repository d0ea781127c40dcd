package peer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/eventually"
)

// TestStreamArrivesWhole: many chunks, a small window, a slow reader: the
// receiver gets every byte in order and the sender's Close returns nil.
func TestStreamArrivesWhole(t *testing.T) {
	const chunks, size = 300, 16 << 10
	got := make(chan [32]byte, 1)
	var header string
	b := start(t, "b", func(c *Config) {
		c.StreamWindow = 4
		c.Stream = func(ctx context.Context, from string, h []byte, r *StreamReader) error {
			header = from + ":" + string(h)
			sum := sha256.New()
			for {
				chunk, err := r.Next()
				if err == io.EOF {
					var s [32]byte
					copy(s[:], sum.Sum(nil))
					got <- s
					return nil
				}
				if err != nil {
					return err
				}
				sum.Write(chunk)
			}
		}
	})
	a := start(t, "a", nil)
	w, err := a.Stream(ctxFor(t), b.Addr(), []byte("partition 7"))
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	for i := range chunks {
		chunk := bytes.Repeat([]byte{byte(i)}, size)
		want.Write(chunk)
		if err := w.Write(chunk); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if s := <-got; !bytes.Equal(s[:], want.Sum(nil)) {
		t.Fatal("the stream arrived changed")
	}
	if header != "a:partition 7" {
		t.Fatalf("header %q", header)
	}
}

// TestStreamBackPressure: the sender never gets more than the window
// ahead of what the receiver consumed.
func TestStreamBackPressure(t *testing.T) {
	const window, chunks = 4, 64
	var written atomic.Int32
	violation := make(chan string, 1)
	gate := make(chan struct{})
	b := start(t, "b", func(c *Config) {
		c.StreamWindow = window
		c.Stream = func(ctx context.Context, _ string, _ []byte, r *StreamReader) error {
			<-gate
			for consumed := 0; ; consumed++ {
				if n := written.Load(); int(n) > consumed+window {
					select {
					case violation <- fmt.Sprintf("%d chunks written with %d consumed", n, consumed):
					default:
					}
				}
				if _, err := r.Next(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}
	})
	a := start(t, "a", nil)
	w, err := a.Stream(ctxFor(t), b.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range chunks {
			if err := w.Write([]byte("chunk")); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
		done <- w.Close()
	}()
	eventually.True(t, "a full window", func() bool { return written.Load() >= window })
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-violation:
		t.Fatal(v)
	default:
	}
}

// TestStreamAborts: an abort by either end reaches the other.
func TestStreamAborts(t *testing.T) {
	t.Run("the sender aborts: the receiver's Next fails", func(t *testing.T) {
		seen := make(chan streamEnd, 1)
		b := start(t, "b", func(c *Config) { c.Stream = readToError(seen) })
		a := start(t, "a", nil)
		w, err := a.Stream(ctxFor(t), b.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("one"))
		w.Abort("snapshot superseded")
		end := <-seen
		var ae *AbortedError
		if !errors.As(end.err, &ae) || !ae.ByPeer || ae.Reason != "snapshot superseded" {
			t.Fatalf("receiver got %v", end.err)
		}
		if !end.ctxEnded {
			t.Fatal("the handler's context did not end")
		}
		if err := w.Write([]byte("two")); !errors.Is(err, ErrAborted) {
			t.Fatalf("write after abort: %v", err)
		}
	})
	t.Run("the receiver aborts: the sender's Write or Close fails", func(t *testing.T) {
		b := start(t, "b", func(c *Config) {
			c.StreamWindow = 2
			c.Stream = func(ctx context.Context, _ string, _ []byte, r *StreamReader) error {
				r.Next()
				return errors.New("disk full")
			}
		})
		a := start(t, "a", nil)
		w, err := a.Stream(ctxFor(t), b.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			err = w.Write([]byte("chunk"))
		}
		var ae *AbortedError
		if !errors.As(err, &ae) || !ae.ByPeer || ae.Reason != "disk full" {
			t.Fatalf("sender got %v", err)
		}
		if err := w.Close(); !errors.As(err, &ae) {
			t.Fatalf("close: %v", err)
		}
	})
	t.Run("a broken connection aborts both ends", func(t *testing.T) {
		seen := make(chan streamEnd, 1)
		b := start(t, "b", func(c *Config) { c.Stream = readToError(seen) })
		p := peertest.NewProxy(t, b.Addr())
		a := start(t, "a", nil)
		w, err := a.Stream(ctxFor(t), p.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("one"))
		p.Cut()
		if end := <-seen; !errors.Is(end.err, ErrConnLost) {
			t.Fatalf("receiver got %v", end.err)
		}
		if err := w.Close(); !errors.Is(err, ErrConnLost) {
			t.Fatalf("sender got %v", err)
		}
	})
	t.Run("a node without a stream handler refuses streams", func(t *testing.T) {
		b := start(t, "b", nil)
		a := start(t, "a", nil)
		w, err := a.Stream(ctxFor(t), b.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "no streams") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a chunk over the maximum is not sent", func(t *testing.T) {
		b := start(t, "b", nil)
		a := start(t, "a", func(c *Config) { c.MaxChunk = 16 })
		w, err := a.Stream(ctxFor(t), b.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(make([]byte, 17)); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("got %v", err)
		}
	})
}

// streamEnd is how a stream ended for its reader.
type streamEnd struct {
	err      error
	ctxEnded bool // the handler's context had ended when Next failed
}

// readToError is a stream handler that reads until Next fails, and says
// how on seen (once).
func readToError(seen chan<- streamEnd) StreamHandler {
	return func(ctx context.Context, _ string, _ []byte, r *StreamReader) error {
		for {
			if _, err := r.Next(); err != nil {
				seen <- streamEnd{err, ctx.Err() != nil}
				return err
			}
		}
	}
}
