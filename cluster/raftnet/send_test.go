package raftnet_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/cluster/raftnet"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
)

// sendBound is what one Send may take at most. Send never waits on the
// network, so it takes microseconds; the bound only has to hold on a busy
// shared machine (under -race too) and stay far below the one-minute dial
// and write timeouts of the sender in TestSendNeverBlocks, which a Send
// that waited on the network would wait for.
const sendBound = 5 * time.Second

func appendTo(to uint64, size int) multiraft.Message {
	return multiraft.Message{Group: 1, Msg: pb.Message{
		Type: pb.MsgApp, From: 1, To: to, Term: 1,
		Entries: []pb.Entry{{Term: 1, Index: 1, Data: make([]byte, size)}},
	}}
}

// serveLoopback listens on a loopback port and hands every connection to
// serve; the listener and the connections serve tracks are closed when the
// test ends.
func serveLoopback(t *testing.T, serve func(c net.Conn, track func(net.Conn))) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			serve(c, track)
		}
	}()
	return ln.Addr().String()
}

// proxy forwards TCP connections to target until stall, after which it
// stops reading from the client: a peer that stopped reading.
type proxy struct {
	addr string
	stop chan struct{}
	once sync.Once
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{stop: make(chan struct{})}
	p.addr = serveLoopback(t, func(c net.Conn, track func(net.Conn)) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		track(u)
		go io.Copy(c, u)
		go func() {
			buf := make([]byte, 32<<10)
			for {
				select {
				case <-p.stop:
					return // no more reads: the client's writes back up
				default:
				}
				k, err := c.Read(buf)
				if k > 0 {
					u.Write(buf[:k])
				}
				if err != nil {
					return
				}
			}
		}()
	})
	return p
}

func (p *proxy) stall() { p.once.Do(func() { close(p.stop) }) }

// blackHole accepts connections and never answers: a handshake to it hangs
// until the dial timeout.
func blackHole(t *testing.T) string {
	return serveLoopback(t, func(net.Conn, func(net.Conn)) {})
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestSendNeverBlocks: whatever the destination, Send returns at once;
// what it cannot queue it drops and counts, for raft to send again.
func TestSendNeverBlocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// addr returns where node 2 listens (""; unknown to the directory)
		// and a func that makes the next sends to it fail (or nil).
		addr    func(t *testing.T) (string, func())
		size    int  // of each message's entry
		dropped bool // Stats.Dropped must grow (else Unreachable)
	}{
		{"a node without an address", func(*testing.T) (string, func()) { return "", nil }, 100, false},
		{"a node that is down", func(t *testing.T) (string, func()) { return closedPort(t), nil }, 100, true},
		{"a node that never answers the handshake", func(t *testing.T) (string, func()) { return blackHole(t), nil }, 100, true},
		{"a node that stopped reading: its queue is full", func(t *testing.T) (string, func()) {
			rcv := newEndpoint(t, 2, options{})
			p := newProxy(t, rcv.peer.Addr())
			return p.addr, p.stall
		}, 256 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd := newEndpoint(t, 1, options{editPeer: func(c *peer.Config) {
				c.QueueBytes = 1 << 20
				// Far above sendBound: a Send that waited for a dial or a
				// write would take this long.
				c.DialTimeout, c.WriteTimeout = time.Minute, time.Minute
			}})
			addr, stall := tc.addr(t)
			if addr != "" {
				snd.dir.Set(2, addr)
			}
			if stall != nil {
				connect(t, snd, addr)
			}
			var slowest time.Duration
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; ; i++ {
				st := snd.net.Stats()
				if (tc.dropped && st.Dropped > 0 || !tc.dropped && st.Unreachable > 0) && i >= 20 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after %d sends: %+v", i, st)
				}
				if stall != nil && st.Sent > 0 {
					stall()
				}
				start := time.Now()
				snd.net.Send([]multiraft.Message{appendTo(2, tc.size)})
				slowest = max(slowest, time.Since(start))
			}
			if slowest > sendBound {
				t.Fatalf("a Send took %v", slowest)
			}
			t.Logf("slowest Send %v; %+v", slowest, snd.net.Stats())
		})
	}
}

// TestLargeCycleIsSplit: a cycle's messages to one node that together
// pass the peer's frame maximum (16 MiB) go in several batches of at most
// MaxBatch, and all arrive.
func TestLargeCycleIsSplit(t *testing.T) {
	const maxBatch = 5 << 19 // two messages of 1 MiB and a little
	var mu sync.Mutex
	var batches, largest int
	c := newCluster(t, []uint64{1, 2}, options{
		edit: func(c *raftnet.Config) { c.MaxBatch = maxBatch },
		editPeer: func(c *peer.Config) {
			deliver := c.OneWay
			c.OneWay = func(from string, payloads [][]byte) {
				mu.Lock()
				for _, p := range payloads {
					batches++
					largest = max(largest, len(p))
				}
				mu.Unlock()
				deliver(from, payloads)
			}
		},
	}, nil)
	snd, rcv := c.members[1], c.members[2]
	const n = 20
	msgs := make([]multiraft.Message, n)
	for i := range msgs {
		msgs[i] = appendTo(2, 1<<20)
	}
	snd.net.Send(msgs)
	if st := snd.net.Stats(); st.Sent != n || st.Dropped != 0 {
		t.Fatalf("sender: %+v", st)
	}
	eventually.True(t, "every message", func() bool { return rcv.net.Stats().UnknownGroup == n })
	mu.Lock()
	defer mu.Unlock()
	if batches < n/2 || largest > maxBatch {
		t.Fatalf("%d batches, the largest of %d bytes; want %d of at most %d", batches, largest, n/2, maxBatch)
	}
}

// TestSendAllocatesNothing: once its buffers have grown, encoding and
// queueing a cycle's messages allocates nothing (the driver calls Send
// every cycle).
func TestSendAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := newCluster(t, []uint64{1, 2, 3}, options{}, nil)
	snd := c.members[1]
	msgs := []multiraft.Message{appendTo(2, 256), appendTo(3, 256), appendTo(2, 64), appendTo(3, 64)}
	// On a loaded machine a measure can catch the connections' buffers
	// still growing, or a redial: a Send that allocates does so in every
	// attempt, so one clean attempt of three is the rule holding.
	var allocs float64
	for range 3 {
		allocs = testing.AllocsPerRun(1000, func() { snd.net.Send(msgs) })
		if st := snd.net.Stats(); st.Sent == 0 || st.Dropped != 0 {
			t.Fatalf("%+v", st)
		}
		if allocs == 0 {
			return
		}
		sent := snd.net.Stats().Sent
		eventually.True(t, "the peers received what was sent", func() bool {
			return c.members[2].net.Stats().UnknownGroup+c.members[3].net.Stats().UnknownGroup == sent
		})
	}
	t.Fatalf("%.1f allocations per Send", allocs)
}
