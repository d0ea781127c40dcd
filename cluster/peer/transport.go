package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/loglimit"
	"github.com/kitd/kitd/internal/workers"
)

// Handler runs a request from the member named from. requestID is the
// caller's id of the request, the same on every retry of it. An error
// reaches the caller as a *kiterr.Error (kiterr.ToFailure), except a
// *RefusedError: a request the handler will not run (one it cannot decode
// further, say) is counted, logged and answered as the transport's own
// refusals are (ErrRefused). ctx ends at the
// caller's deadline, when the caller stops waiting, or when the connection
// breaks.
type Handler func(ctx context.Context, from string, msg proto.Message, requestID string) (proto.Message, error)

// OneWayHandler takes a batch sent with Send, in the order the sender sent
// them. It runs on the connection's read loop: it must not block (hand the
// payloads to a queue), and it may keep them.
type OneWayHandler func(from string, payloads [][]byte)

// StreamHandler reads a stream opened with Transport.Stream. Returning nil
// after io.EOF accepts the stream (the sender's Close returns nil);
// returning an error aborts it (the sender's Write or Close returns an
// *AbortedError with the error's text).
type StreamHandler func(ctx context.Context, from string, header []byte, r *StreamReader) error

// Config is what a transport needs. NodeName, ListenAddr and one of
// ClusterKey or the three certificate files are required; a nil handler
// refuses its kind of traffic.
type Config struct {
	NodeName string // this member's name, in its certificate
	// ListenAddr is host:port; port 0 picks one (Addr returns it). When
	// the host is one address (not 0.0.0.0 or ::), this node's own
	// connections leave from it too, as they would from a node bound to
	// one interface: the others and the network between see one address
	// per member, whichever way a connection goes.
	ListenAddr string

	// ClusterKey is the shared secret of the cluster (--cluster-key): the
	// members' CA key is derived from it.
	ClusterKey []byte
	// CertFile, KeyFile and CAFile, instead of ClusterKey: this node's
	// certificate and key (PEM), and the CA the peers' certificates must
	// chain to. The node name of a peer is its certificate's common name.
	CertFile, KeyFile, CAFile string

	Registry *Registry // the messages a request or reply may be
	Handler  Handler
	OneWay   OneWayHandler
	Stream   StreamHandler

	Logger *slog.Logger
	Clock  clock.Clock // certificate validity, outages' warnings; default clock.System()

	// Departed, when set, reports whether a peer, by its node-to-node
	// address (for a dial) or its node name (for a connection it
	// accepted or dialed), is known to be going or gone on purpose (it
	// said goodbye, or drains): its refused dials and broken connections
	// are expected, and logged at debug rather than warned of.
	Departed func(peer string) bool

	// MaxFrame bounds one frame, a request's or reply's message with it:
	// 16 MiB, four times gRPC's default that protoactor's remote is
	// stuck with, so a Raft append of a full batch of records fits.
	MaxFrame int
	// MaxChunk bounds one chunk of a stream (1 MiB) and StreamWindow how
	// many chunks may be in flight unconsumed (8): a stream holds at most
	// MaxChunk*StreamWindow bytes of the receiver's memory.
	MaxChunk     int
	StreamWindow int
	// QueueBytes bounds the frames waiting to be written to one peer
	// (32 MiB). Past it, Send drops its batch and Call fails with
	// ErrUnavailable: a peer that stops reading must not take this node's
	// memory with it.
	QueueBytes int
	// DialTimeout bounds a connection attempt, handshake included (5 s);
	// HandshakeTimeout an accepted one's handshake (5 s); WriteTimeout one
	// write to a peer (10 s) before the connection counts as broken.
	DialTimeout, HandshakeTimeout, WriteTimeout time.Duration
	// CertValidity is the life of a derived leaf certificate (24 h); it is
	// renewed at half of it.
	CertValidity time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxFrame, 16<<20)
	def(&c.MaxChunk, 1<<20)
	def(&c.StreamWindow, 8)
	def(&c.QueueBytes, 32<<20)
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.DialTimeout, 5*time.Second)
	dur(&c.HandshakeTimeout, 5*time.Second)
	dur(&c.WriteTimeout, 10*time.Second)
	dur(&c.CertValidity, 24*time.Hour)
}

// Transport is this node's end of the node-to-node traffic: it accepts
// the connections of other members and dials its own, one per peer
// address.
type Transport struct {
	cfg    Config
	id     *identity
	server *tls.Config
	client *tls.Config
	ln     net.Listener
	addr   string       // ln's
	source *net.TCPAddr // where dialed connections leave from; nil: any
	log    *loglimit.Limiter

	closed atomic.Bool
	// peers holds a dialer per peer address. A sync.Map: every Call and
	// Send looks its peer up, and a map under the transport's mutex would
	// make that a lock all of them share.
	peers sync.Map
	// mu guards accepted, handshaking and the creation of dialers
	// against Close.
	mu          sync.Mutex
	accepted    map[*conn]struct{}
	handshaking map[net.Conn]struct{}

	wg      sync.WaitGroup
	workers workers.Pool // run request handlers
	dropped atomic.Uint64
	refused atomic.Uint64
}

// Listen starts a transport listening on cfg.ListenAddr.
func Listen(cfg Config) (*Transport, error) {
	cfg.setDefaults()
	if cfg.NodeName == "" {
		return nil, errors.New("peer: a node name is needed")
	}
	id, err := newIdentity(&cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	t := &Transport{
		cfg:         cfg,
		id:          id,
		server:      id.serverConfig(),
		client:      id.clientConfig(),
		ln:          ln,
		addr:        ln.Addr().String(),
		source:      sourceOf(ln.Addr()),
		log:         loglimit.New(cfg.Logger, cfg.Clock),
		accepted:    make(map[*conn]struct{}),
		handshaking: make(map[net.Conn]struct{}),
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// sourceOf is the local address of dialed connections for a listener on
// addr: its IP with any port, or nil when it listens on every interface.
func sourceOf(addr net.Addr) *net.TCPAddr {
	a, ok := addr.(*net.TCPAddr)
	if !ok || a.IP.IsUnspecified() {
		return nil
	}
	return &net.TCPAddr{IP: a.IP, Zone: a.Zone}
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() string { return t.addr }

// Stats counts what the transport gave up on.
type Stats struct {
	Dropped uint64 // batches Send dropped: no connection, or its queue full
	Refused uint64 // frames and connections refused: a handshake, a
	// malformed or unknown frame, an unknown message
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	return Stats{Dropped: t.dropped.Load(), Refused: t.refused.Load()}
}

// Close stops listening, breaks every connection (calls in flight fail
// with ErrClosed, handlers' contexts end) and waits for the transport's
// goroutines, handlers included, to return.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed.Swap(true) {
		t.mu.Unlock()
		return nil
	}
	var conns []*conn
	for c := range t.accepted {
		conns = append(conns, c)
	}
	for nc := range t.handshaking {
		nc.Close()
	}
	t.peers.Range(func(_, d any) bool {
		if c := d.(*dialer).current(); c != nil {
			conns = append(conns, c)
		}
		return true
	})
	t.mu.Unlock()
	err := t.ln.Close()
	for _, c := range conns {
		c.fail(ErrClosed)
	}
	t.wg.Wait()
	t.workers.Close()
	return err
}

// departed reports whether Config.Departed knows peer (an address or a
// node name) to be going on purpose.
func (t *Transport) departed(peer string) bool {
	return peer != "" && t.cfg.Departed != nil && t.cfg.Departed(peer)
}

// refuse counts and logs (rate-limited) something a peer sent that was not
// accepted.
func (t *Transport) refuse(msg string, args ...any) {
	t.refused.Add(1)
	t.log.Warn(msg, args...)
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait a little, as
			// net/http does, rather than spin.
			t.log.Warn("peer: accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.wg.Add(1)
		go t.serve(nc)
	}
}

// serve runs a connection a peer opened: the handshake, then its frames.
func (t *Transport) serve(nc net.Conn) {
	defer t.wg.Done()
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		nc.Close()
		return
	}
	t.handshaking[nc] = struct{}{}
	t.mu.Unlock()
	tc := tls.Server(nc, t.server)
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	t.mu.Lock()
	delete(t.handshaking, nc)
	t.mu.Unlock()
	if err != nil {
		t.refuse("peer: handshake refused", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	c := newConn(t, tc, nc, peerName(tc.ConnectionState()), false)
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		c.fail(ErrClosed)
		return
	}
	t.accepted[c] = struct{}{}
	t.mu.Unlock()
	c.run()
	t.mu.Lock()
	delete(t.accepted, c)
	t.mu.Unlock()
}

// dialer owns this node's connection to one peer address: it dials on
// demand, one attempt at a time, and after a failed attempt refuses new
// ones for a backoff that doubles up to maxBackoff. A connection that
// breaks after it was up is dialed again at once by the next call.
type dialer struct {
	t    *Transport
	addr string

	mu       sync.Mutex
	conn     *conn
	dialing  chan struct{} // closed when the attempt under way ends
	failures int
	retryAt  time.Time
	lastErr  error
	// downSince is when the failures began (Clock), warnedAt when they
	// were last warned of; zero when none was.
	downSince, warnedAt time.Time
}

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
	// outageReminder is how often an unreachable peer is warned of again:
	// an outage is one warning and a reminder a minute, not one line a
	// redial (up to twenty a second in the first backoff steps).
	outageReminder = time.Minute
)

func (t *Transport) dialer(addr string) (*dialer, error) {
	if t.closed.Load() {
		return nil, ErrClosed
	}
	if d, ok := t.peers.Load(addr); ok {
		return d.(*dialer), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return nil, ErrClosed
	}
	d, _ := t.peers.LoadOrStore(addr, &dialer{t: t, addr: addr})
	return d.(*dialer), nil
}

func (d *dialer) current() *conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// get returns the connection to the peer, dialing if there is none. With
// wait false it never blocks: it starts a dial and reports ErrUnavailable.
// Backoff and dial timing are in real time, not the Clock: they are about
// the network, and a test clock moved by hours must not skip them.
func (d *dialer) get(ctx context.Context, wait bool) (*conn, error) {
	for {
		d.mu.Lock()
		if c := d.conn; c != nil && !c.broken() {
			d.mu.Unlock()
			return c, nil
		}
		ch := d.dialing
		if ch == nil {
			if time.Now().Before(d.retryAt) {
				err := d.lastErr
				d.mu.Unlock()
				return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, d.addr, err)
			}
			ch = make(chan struct{})
			d.dialing = ch
			d.t.wg.Add(1)
			go d.dial(ch)
		}
		d.mu.Unlock()
		if !wait {
			return nil, fmt.Errorf("%w: %s: connecting", ErrUnavailable, d.addr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		d.mu.Lock()
		c, err := d.conn, d.lastErr
		d.mu.Unlock()
		if c == nil {
			if err == nil {
				err = ErrClosed
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, d.addr, err)
		}
	}
}

func (d *dialer) dial(done chan struct{}) {
	defer d.t.wg.Done()
	c, err := d.connect()
	d.mu.Lock()
	d.dialing = nil
	report := d.outcome(err)
	if err != nil {
		d.failures++
		d.retryAt = time.Now().Add(min(minBackoff<<min(d.failures-1, 10), maxBackoff))
		d.lastErr = err
	} else {
		d.failures, d.retryAt, d.lastErr = 0, time.Time{}, nil
		d.conn = c
	}
	d.mu.Unlock()
	close(done)
	report()
	if err != nil {
		return
	}
	// Close collects the dialers' connections under t.mu: either it saw
	// this one, or it had set closed before this check.
	d.t.mu.Lock()
	closed := d.t.closed.Load()
	d.t.mu.Unlock()
	if closed {
		c.fail(ErrClosed)
	}
	c.run()
}

// outcome keeps the account of an outage for a dial that ended with err,
// and returns what to log of it once d.mu is released: the first failure
// of an outage and a reminder every outageReminder as warnings, the
// redials between at debug, the end of a warned outage at info. A peer
// that Config.Departed says is going is expected to refuse: debug only.
// d.mu is held; d.failures counts the failures before this dial.
func (d *dialer) outcome(err error) func() {
	t := d.t
	now := t.cfg.Clock.Now()
	if err == nil {
		if d.failures == 0 {
			return func() {}
		}
		warned, failed, down := !d.warnedAt.IsZero(), d.failures, now.Sub(d.downSince)
		d.downSince, d.warnedAt = time.Time{}, time.Time{}
		level := slog.LevelDebug
		if warned {
			level = slog.LevelInfo
		}
		return func() {
			t.cfg.Logger.Log(context.Background(), level, "peer: reachable again", "addr", d.addr, "failedDials", failed, "downFor", down.Round(time.Millisecond))
		}
	}
	if d.failures == 0 {
		d.downSince = now
	}
	departed := t.departed(d.addr)
	if departed || !d.warnedAt.IsZero() && now.Sub(d.warnedAt) < outageReminder {
		return func() { t.cfg.Logger.Debug("peer: dial", "addr", d.addr, "err", err, "departed", departed) }
	}
	d.warnedAt = now
	failed, since := d.failures+1, d.downSince
	return func() { t.log.Warn("peer: dial", "addr", d.addr, "err", err, "failedDials", failed, "since", since) }
}

func (d *dialer) connect() (*conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.t.cfg.DialTimeout)
	defer cancel()
	nd := net.Dialer{}
	if d.t.source != nil {
		nd.LocalAddr = d.t.source
	}
	nc, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, d.t.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return newConn(d.t, tc, nc, peerName(tc.ConnectionState()), true), nil
}
