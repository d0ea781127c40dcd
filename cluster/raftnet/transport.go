package raftnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/loglimit"
	"github.com/kitd/kitd/multiraft"
)

// Config is what a Transport needs. NodeID and Directory are required.
type Config struct {
	NodeID    uint64 // this node's raft id: every message it takes is To it
	Directory Directory

	// OnUnknownGroup hears of a message for a group this node holds no
	// replica of, with the raft id of its sender: the cluster joins a group
	// it is being added to from there. It runs on a peer connection's read
	// loop and must not block. Nil: such messages are dropped (and counted
	// either way).
	OnUnknownGroup func(g multiraft.GroupID, from uint64)

	// MaxBatch bounds the bytes of one batch (4 MiB): a cycle's messages
	// to one node go in as many batches as it takes. It must stay under the
	// peer transport's MaxFrame (16 MiB); a single message over it goes
	// alone.
	MaxBatch int
	// ChunkSize bounds one chunk of a snapshot stream (1 MiB). It must not
	// exceed the peer transport's MaxChunk (1 MiB by default).
	ChunkSize int
	// SnapshotTimeout bounds one snapshot stream (5 min): a receiver that
	// stops granting credit must not hold the sender's goroutine forever.
	// raft sends the snapshot again after a failure.
	SnapshotTimeout time.Duration

	Logger *slog.Logger
	Clock  clock.Clock // of the log rate limit; default clock.System()
}

// Transport is multiraft.Transport over a peer.Transport, and the
// handlers that deliver what peers send to this node's multiraft.Node.
// The two halves are bound after construction, because each needs the
// other first: Config.OneWay and Config.Stream of the peer transport are
// HandleBatch and HandleStream; the multiraft.Node is opened with this
// Transport; then Bind(peerTransport) and Attach(node). Until then, sends
// and receipts are dropped and counted.
type Transport struct {
	cfg  Config
	warn *loglimit.Limiter // refusals, at a bounded rate

	peer atomic.Pointer[peer.Transport]
	node atomic.Pointer[multiraft.Node]

	ctx    context.Context // ends at Close: snapshot streams in flight abort
	cancel context.CancelFunc

	// mu serializes Send (the driver's, one cycle at a time) over the
	// reused batch buffers.
	mu    sync.Mutex
	dests []dest

	// decoded keeps HandleBatch's slices of decoded messages (*[]Message)
	// from batch to batch: a message is a large value, and every peer
	// connection's read loop decodes batch after batch.
	decoded sync.Pool

	stats stats
}

// dest is the batch being built for one destination in a Send.
type dest struct {
	to   uint64
	addr string
	buf  []byte
	n    uint64 // messages in buf
}

type stats struct {
	sent, dropped, unreachable                          atomic.Uint64
	received, unknownGroup, refused, undelivered        atomic.Uint64
	snapsSent, snapsFailed, snapsReceived, snapsRefused atomic.Uint64
	chunks                                              atomic.Uint64
}

// Stats counts the messages and snapshots of a Transport. Sent and
// Received count messages handed to the peer transport and to the node;
// a message sent may still be lost with its connection, which raft
// tolerates.
type Stats struct {
	Sent        uint64 // messages queued to a peer
	Dropped     uint64 // messages the peer transport would not queue: no connection yet, its queue full, too large
	Unreachable uint64 // messages to a node the Directory does not know

	Received     uint64 // messages handed to the node
	UnknownGroup uint64 // messages and snapshots for a group this node does not hold
	Refused      uint64 // batches and snapshot streams refused as malformed or not acceptable (logged, rate-limited)
	Undelivered  uint64 // messages that arrived before Attach or after the node stopped

	SnapshotsSent, SnapshotsFailed      uint64 // streams this node sent: accepted by the receiver, or not
	SnapshotsReceived, SnapshotsRefused uint64 // streams handed to the node, or refused (malformed, unknown group)
	Chunks                              uint64 // snapshot chunks sent, each of at most ChunkSize bytes
}

// New returns a transport for node cfg.NodeID; see Transport for what
// to bind before it carries anything.
func New(cfg Config) (*Transport, error) {
	if cfg.NodeID == 0 || cfg.Directory == nil {
		return nil, errors.New("raftnet: NodeID and Directory are required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4 << 20
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 1 << 20
	}
	if cfg.SnapshotTimeout <= 0 {
		cfg.SnapshotTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Transport{
		cfg:    cfg,
		warn:   loglimit.New(cfg.Logger, cfg.Clock),
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

// Bind makes p the transport that carries this node's messages.
func (t *Transport) Bind(p *peer.Transport) { t.peer.Store(p) }

// Attach makes n the node that receives the messages peers send.
func (t *Transport) Attach(n *multiraft.Node) { t.node.Store(n) }

// Close aborts the snapshot streams this node is sending. The peer
// transport is its owner's to close (that ends the streams it receives).
func (t *Transport) Close() { t.cancel() }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	return Stats{
		Sent: s.sent.Load(), Dropped: s.dropped.Load(), Unreachable: s.unreachable.Load(),
		Received: s.received.Load(), UnknownGroup: s.unknownGroup.Load(),
		Refused: s.refused.Load(), Undelivered: s.undelivered.Load(),
		SnapshotsSent: s.snapsSent.Load(), SnapshotsFailed: s.snapsFailed.Load(),
		SnapshotsReceived: s.snapsReceived.Load(), SnapshotsRefused: s.snapsRefused.Load(),
		Chunks: s.chunks.Load(),
	}
}

// Send encodes the cycle's messages into one batch per destination (more
// when one would exceed MaxBatch) and queues each with the peer
// transport's one-way Send, which never blocks: a message to a node the
// Directory does not know, or that the peer transport cannot queue (no
// connection yet, its queue full), is dropped and counted, and raft sends
// again.
func (t *Transport) Send(msgs []multiraft.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peer.Load()
	ds := t.dests[:0]
	for i := range msgs {
		m := &msgs[i]
		var d *dest
		ds, d = t.dest(ds, m.Msg.To)
		if d.addr == "" {
			t.stats.unreachable.Add(1)
			continue
		}
		if d.n == 0 {
			d.buf = append(d.buf[:0], batchV1)
		}
		mark := len(d.buf)
		var err error
		if d.buf, err = appendMessage(d.buf, m.Group, &m.Msg); err != nil {
			// A message raft built always encodes; say so if one did not.
			t.warn.Warn("raftnet: message not encoded", "group", m.Group, "to", d.to, "err", err)
			t.stats.dropped.Add(1)
			d.buf = d.buf[:mark]
			continue
		}
		if d.n > 0 && len(d.buf) > t.cfg.MaxBatch {
			// It does not fit: send the batch without it, and start the
			// next one with it (the version byte stays).
			t.queue(p, d.addr, d.buf[:mark], d.n)
			d.buf, d.n = append(d.buf[:1], d.buf[mark:]...), 0
		}
		d.n++
	}
	for i := range ds {
		d := &ds[i]
		if d.n > 0 {
			t.queue(p, d.addr, d.buf, d.n)
		}
		d.n = 0
		if cap(d.buf) > 2*t.cfg.MaxBatch {
			d.buf = nil // a burst must not pin its memory
		}
	}
	t.dests = ds
}

// dest returns the batch of this Send for node to, adding it to ds (and
// reusing a previous cycle's buffer) if it is the first message for to.
// Its addr is "" when the Directory does not know to.
func (t *Transport) dest(ds []dest, to uint64) ([]dest, *dest) {
	for i := range ds {
		if ds[i].to == to {
			return ds, &ds[i]
		}
	}
	addr, ok := t.cfg.Directory.Addr(to)
	if !ok {
		addr = ""
	}
	if len(ds) < cap(ds) {
		ds = ds[:len(ds)+1]
		d := &ds[len(ds)-1]
		d.to, d.addr, d.buf, d.n = to, addr, d.buf[:0], 0
		return ds, d
	}
	ds = append(ds, dest{to: to, addr: addr})
	return ds, &ds[len(ds)-1]
}

// queue hands a batch of n messages to the peer transport.
func (t *Transport) queue(p *peer.Transport, addr string, batch []byte, n uint64) {
	if p != nil && p.Send(addr, batch) == nil {
		t.stats.sent.Add(n)
		return
	}
	t.stats.dropped.Add(n)
}

// SendSnapshot streams m (a MsgSnap) and the state read from state to
// m.Msg.To through the peer transport's stream, in chunks of at most
// ChunkSize bytes, and returns once the receiver has handed it to its node
// (nil), or why not.
func (t *Transport) SendSnapshot(m multiraft.Message, state io.Reader) (err error) {
	defer func() {
		if err != nil {
			t.stats.snapsFailed.Add(1)
			return
		}
		t.stats.snapsSent.Add(1)
	}()
	p := t.peer.Load()
	if p == nil {
		return fmt.Errorf("raftnet: snapshot of group %d: %w", m.Group, peer.ErrUnavailable)
	}
	to := m.Msg.To
	addr, ok := t.cfg.Directory.Addr(to)
	if !ok {
		t.stats.unreachable.Add(1)
		return fmt.Errorf("raftnet: snapshot of group %d: node %d has no address", m.Group, to)
	}
	header, err := appendSnapshotHeader(nil, m)
	if err != nil {
		return fmt.Errorf("raftnet: snapshot of group %d: %w", m.Group, err)
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.SnapshotTimeout)
	defer cancel()
	w, err := p.Stream(ctx, addr, header)
	if err != nil {
		return fmt.Errorf("raftnet: snapshot of group %d to %d: %w", m.Group, to, err)
	}
	buf := make([]byte, t.cfg.ChunkSize)
	for {
		k, rerr := io.ReadFull(state, buf)
		if k > 0 {
			if err := w.Write(buf[:k]); err != nil {
				w.Abort(err.Error())
				return fmt.Errorf("raftnet: snapshot of group %d to %d: %w", m.Group, to, err)
			}
			t.stats.chunks.Add(1)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			w.Abort("the sender could not read its state")
			return fmt.Errorf("raftnet: snapshot of group %d: %w", m.Group, rerr)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("raftnet: snapshot of group %d to %d: %w", m.Group, to, err)
	}
	return nil
}

// HandleBatch is the peer transport's OneWayHandler: it decodes each
// payload as a raft batch and steps its messages into the node. A payload
// that does not decode, or holds a message not acceptable from the network
// (checkMessage), is refused whole, counted and logged, rate-limited.
// Node.Step does not block, so neither does this.
func (t *Transport) HandleBatch(from string, payloads [][]byte) {
	n := t.node.Load()
	kept, _ := t.decoded.Get().(*[]multiraft.Message)
	if kept == nil {
		kept = new([]multiraft.Message)
	}
	msgs := *kept
	for _, p := range payloads {
		var err error
		if msgs, err = decodeBatch(p, t.cfg.NodeID, msgs[:0]); err != nil {
			t.refuse("raftnet: batch refused", from, err)
			continue
		}
		for i := range msgs {
			t.deliver(n, &msgs[i])
		}
	}
	clear(msgs[:cap(msgs)]) // the pool holds no entries
	*kept = msgs[:0]
	t.decoded.Put(kept)
}

func (t *Transport) deliver(n *multiraft.Node, m *multiraft.Message) {
	if n == nil {
		t.stats.undelivered.Add(1)
		return
	}
	switch err := n.Step(*m); {
	case err == nil:
		t.stats.received.Add(1)
	case errors.Is(err, multiraft.ErrUnknownGroup):
		t.unknownGroup(m)
	default:
		t.stats.undelivered.Add(1)
	}
}

func (t *Transport) unknownGroup(m *multiraft.Message) {
	t.stats.unknownGroup.Add(1)
	if h := t.cfg.OnUnknownGroup; h != nil {
		h(m.Group, m.Msg.From)
	}
}

func (t *Transport) refuse(msg, from string, err error) {
	t.stats.refused.Add(1)
	t.warn.Warn(msg, "peer", from, "err", err)
}

// HandleStream is the peer transport's StreamHandler: it decodes the
// header of a snapshot stream and hands the MsgSnap and the chunks to the
// node, which reads them to the end before it returns. Returning nil
// accepts the stream, so the sender's SendSnapshot returns once the node
// has the snapshot.
func (t *Transport) HandleStream(_ context.Context, from string, header []byte, r *peer.StreamReader) error {
	m, err := decodeSnapshotHeader(header, t.cfg.NodeID)
	if err != nil {
		t.stats.snapsRefused.Add(1)
		t.refuse("raftnet: snapshot stream refused", from, err)
		return fmt.Errorf("raftnet: refused: %w", err)
	}
	n := t.node.Load()
	if n == nil {
		t.stats.snapsRefused.Add(1)
		return errors.New("raftnet: the node is not started")
	}
	err = n.ReceiveSnapshot(m, &chunkReader{r: r})
	switch {
	case err == nil:
		t.stats.snapsReceived.Add(1)
	case errors.Is(err, multiraft.ErrUnknownGroup):
		t.stats.snapsRefused.Add(1)
		t.unknownGroup(&m)
	default:
		t.stats.snapsRefused.Add(1)
	}
	return err
}

// chunkReader reads a stream's chunks as one io.Reader.
type chunkReader struct {
	r    *peer.StreamReader
	left []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.left) == 0 {
		b, err := c.r.Next()
		if err != nil {
			return 0, err
		}
		c.left = b
	}
	k := copy(p, c.left)
	c.left = c.left[k:]
	return k, nil
}
