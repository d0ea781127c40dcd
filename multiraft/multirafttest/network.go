// Package multirafttest holds what tests of package multiraft and of
// its consumers need: an in-memory network that can cut, drop and hold
// messages, a key-value state machine, and a filesystem that counts WAL
// syncs.
package multirafttest

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/kitd/kitd/multiraft"
)

// Network connects nodes in memory. Every message is copied, as a wire
// would, so no two nodes share raft's structures.
type Network struct {
	// ChunkSize bounds one chunk of a snapshot stream (default 1 MiB).
	ChunkSize int

	mu    sync.Mutex
	nodes map[uint64]*multiraft.Node
	cut   map[[2]uint64]bool // from, to
	held  map[uint64][]multiraft.Message
	hold  map[uint64]bool
	drop  func(multiraft.Message) bool

	delivered atomic.Uint64
	chunks    atomic.Uint64
	maxChunk  atomic.Int64
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{
		ChunkSize: 1 << 20,
		nodes:     make(map[uint64]*multiraft.Node),
		cut:       make(map[[2]uint64]bool),
		held:      make(map[uint64][]multiraft.Message),
		hold:      make(map[uint64]bool),
	}
}

// Transport returns node id's side of the network.
func (nw *Network) Transport(id uint64) multiraft.Transport { return endpoint{nw, id} }

// Attach routes messages for id to n (replacing a previous node of that id).
func (nw *Network) Attach(id uint64, n *multiraft.Node) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.nodes[id] = n
}

// Detach stops delivering to id.
func (nw *Network) Detach(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.nodes, id)
}

// Isolate cuts every link to and from id.
func (nw *Network) Isolate(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for other := range nw.nodes {
		nw.cut[[2]uint64{id, other}] = true
		nw.cut[[2]uint64{other, id}] = true
	}
}

// Heal restores every link and stops dropping.
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
	nw.drop = nil
}

// Drop discards every message for which fn returns true (nil: none).
func (nw *Network) Drop(fn func(multiraft.Message) bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.drop = fn
}

// Hold delays every message to id until Release.
func (nw *Network) Hold(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.hold[id] = true
}

// Release delivers the messages held for id, in order, and stops holding.
func (nw *Network) Release(id uint64) {
	nw.mu.Lock()
	msgs := nw.held[id]
	delete(nw.held, id)
	delete(nw.hold, id)
	n := nw.nodes[id]
	nw.mu.Unlock()
	for _, m := range msgs {
		if n != nil && n.Step(m) == nil {
			nw.delivered.Add(1)
		}
	}
}

// Held counts the messages held for id.
func (nw *Network) Held(id uint64) int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return len(nw.held[id])
}

// Delivered counts the messages handed to a node so far.
func (nw *Network) Delivered() uint64 { return nw.delivered.Load() }

// Chunks reports the snapshot chunks sent so far and the largest one.
func (nw *Network) Chunks() (count uint64, largest int) {
	return nw.chunks.Load(), int(nw.maxChunk.Load())
}

// route says where a message from from goes: the node, or nil if it is lost.
func (nw *Network) route(from uint64, m multiraft.Message) *multiraft.Node {
	to := m.Msg.To
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.cut[[2]uint64{from, to}] || (nw.drop != nil && nw.drop(m)) {
		return nil
	}
	if nw.hold[to] {
		nw.held[to] = append(nw.held[to], copyMessage(m))
		return nil
	}
	return nw.nodes[to]
}

// copyMessage copies m deeply, as the wire would: the receiver must share
// no slice with the sender.
func copyMessage(m multiraft.Message) multiraft.Message {
	b, err := m.Msg.Marshal()
	if err != nil {
		panic(fmt.Sprintf("multirafttest: encode a message: %v", err)) // a message raft built always encodes
	}
	c := multiraft.Message{Group: m.Group}
	if err := c.Msg.Unmarshal(b); err != nil {
		panic(fmt.Sprintf("multirafttest: decode a message: %v", err))
	}
	return c
}

type endpoint struct {
	nw   *Network
	from uint64
}

func (e endpoint) Send(msgs []multiraft.Message) {
	for _, m := range msgs {
		if n := e.nw.route(e.from, m); n != nil && n.Step(copyMessage(m)) == nil {
			e.nw.delivered.Add(1)
		}
	}
}

var errUnreachable = errors.New("multirafttest: unreachable")

// SendSnapshot streams the state in chunks of at most ChunkSize bytes
// through a pipe to the receiver's ReceiveSnapshot.
func (e endpoint) SendSnapshot(m multiraft.Message, state io.Reader) error {
	n := e.nw.route(e.from, m)
	if n == nil {
		return errUnreachable
	}
	pr, pw := io.Pipe()
	recv := make(chan error, 1)
	go func() {
		err := n.ReceiveSnapshot(copyMessage(m), pr)
		pr.CloseWithError(err)
		recv <- err
	}()
	buf := make([]byte, e.nw.ChunkSize)
	for {
		k, err := io.ReadFull(state, buf)
		if k > 0 {
			e.nw.chunks.Add(1)
			if int64(k) > e.nw.maxChunk.Load() {
				e.nw.maxChunk.Store(int64(k))
			}
			if _, werr := pw.Write(buf[:k]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			pw.CloseWithError(err)
			<-recv
			return err
		}
	}
	pw.Close()
	if err := <-recv; err != nil {
		return err
	}
	e.nw.delivered.Add(1)
	return nil
}
