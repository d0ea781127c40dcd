package peer

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/eventually"
)

// TestOneWayBatchesArriveInOrder: batches to one peer arrive whole and in
// the order they were sent, from the first one accepted on.
func TestOneWayBatchesArriveInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []uint64
	var from string
	b := start(t, "b", func(c *Config) {
		c.OneWay = func(f string, payloads [][]byte) {
			mu.Lock()
			defer mu.Unlock()
			from = f
			for _, p := range payloads {
				got = append(got, binary.BigEndian.Uint64(p))
			}
		}
	})
	a := start(t, "a", nil)
	// The first Send starts the connection and may be dropped.
	eventually.True(t, "a connection", func() bool { return a.Send(b.Addr()) == nil })
	const batches, per = 500, 4
	for i := range batches {
		payloads := make([][]byte, per)
		for j := range payloads {
			payloads[j] = binary.BigEndian.AppendUint64(nil, uint64(i*per+j))
		}
		if err := a.Send(b.Addr(), payloads...); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	eventually.True(t, "every batch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == batches*per
	})
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("payload %d is %d", i, v)
		}
	}
	if from != "a" {
		t.Fatalf("from %q", from)
	}
}

// TestSendNeverBlocks: to a peer that stopped reading, Send drops and
// counts once the queue is full, instead of blocking or growing.
func TestSendNeverBlocks(t *testing.T) {
	b := start(t, "b", func(c *Config) { c.OneWay = func(string, [][]byte) {} })
	p := peertest.NewProxy(t, b.Addr())
	// A write to the stopped peer never times out here: only the queue's
	// bound can stop the loop below.
	a := start(t, "a", func(c *Config) { c.QueueBytes = 256 << 10; c.WriteTimeout = time.Hour })
	eventually.True(t, "a connection", func() bool { return a.Send(p.Addr()) == nil })
	p.Pause()
	defer p.Unpause()
	payload := make([]byte, 64<<10)
	var err error
	// The socket buffers fill first; then the queue; then Send refuses.
	for i := 0; i < 100000 && err == nil; i++ {
		err = a.Send(p.Addr(), payload)
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "queue to the peer is full") {
		t.Fatalf("got %v, want ErrUnavailable (queue full)", err)
	}
	if a.Stats().Dropped == 0 {
		t.Fatal("the dropped batch was not counted")
	}
}

func TestSendToNothingIsDropped(t *testing.T) {
	b := start(t, "b", nil)
	addr := b.Addr()
	b.Close()
	a := start(t, "a", nil)
	if err := a.Send(addr, []byte("x")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
	if a.Stats().Dropped != 1 {
		t.Fatalf("dropped %d", a.Stats().Dropped)
	}
}
