// Package api is kitd's HTTP front end: it parses and authenticates
// requests, checks their shape, sends one typed message to the owning actor
// (two at most: a rate bucket, then the owner) and turns the answer into the
// JSON of docs/api.md and OPERATIONS.md. It holds no business rule beyond input
// shape and knows nothing about storage.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/http/clientaddr"
	"github.com/kitd/kitd/http/internal/published"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/metrics"
)

// Body limits (docs/decisions.md).
const (
	maxJSONBody  = 1 << 20
	maxFilesBody = 8 << 20
	maxHookBody  = 64 << 10
)

// Request head limits (docs/decisions.md "Request heads"), as nginx's
// large_client_header_buffers (8 KiB a line) and Node's 16 KiB head: far
// above any real client's, small enough that an idle connection's read
// buffer stays cheap.
const (
	// maxHead is fasthttp's ReadBufferSize: a head must fit in the read
	// buffer, else fasthttp reports ErrSmallBuffer (parseError: 431).
	maxHead = 16 << 10
	// maxURL bounds the request target (handle: 414).
	maxURL = 8 << 10
)

// knownWebhooks is how many webhook ids the hooks host remembers as
// existing (actors.WebhookTargets): 128 KiB of slots, plus each id once
// remembered; a node with more live webhooks reads some again.
const knownWebhooks = 1 << 14

// Config wires the front end to its node.
type Config struct {
	Node   *cluster.Host
	Env    *actors.Env
	Auth   *actors.Authenticator
	Limits limits.Table // nil: limits off
	// OperatorToken is the bearer token of the operator API.
	OperatorToken string
	// MetricsToken is a bearer token that reads GET /metrics only; "":
	// only the operator token does.
	MetricsToken string
	// TestClock enables POST /ops/v1/clock/advance when non-nil.
	TestClock *clock.Test
	PublicURL string
	// NodeName and HTTPAddr say who this node is in GET /ops/v1/cluster.
	NodeName, HTTPAddr string
	Logger             *slog.Logger
	// RequestLog writes the line of each request when Logger would log
	// it at info (cmd/kitd builds it on Logger's writer, in its format);
	// nil: request lines go through Logger.
	RequestLog *RequestLog
	// Metrics is the node's registry, which GET /metrics gathers; the
	// front end adds its own families. nil: a registry of its own.
	Metrics *metrics.Registry
	// Domains checks domain proofs; nil: domainproof.New with the system
	// resolver and roots.
	Domains DomainChecker
	// Cluster is this node's view of its cluster; nil: a node alone.
	Cluster ClusterView
	// Tools makes the calls of the tool runs members start
	// (deliveries.Tools); nil: runs stay queued.
	Tools ToolRunner
	// Kits calls a Kit's endpoint for a member action; nil: every such
	// call fails as if the Kit could not be reached.
	Kits KitCaller
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (--trusted-proxies); nil: none, every client is its TCP peer.
	TrustedProxies *clientaddr.Trusted
	// Backup makes the backups of GET /ops/v1/backup; nil: 503.
	Backup BackupFunc
}

// ToolRunner calls the Kit for a run the installation queued; it must not
// block (deliveries.Tools).
type ToolRunner interface {
	Start(deliveries.ToolCall)
}

// ClusterView is what the front end shows of the cluster
// (server/clusternode.Node).
type ClusterView interface {
	// State is joining, alive or draining.
	State() string
	Nodes() []cluster.NodeView
}

// Server is the HTTP front end of one node.
type Server struct {
	node         *cluster.Host
	env          *actors.Env
	auth         *actors.Authenticator
	limits       limits.Table
	operatorHash [32]byte
	testClock    *clock.Test
	publicURL    string
	nodeName     string
	httpAddr     string
	log          *slog.Logger
	requests     *RequestLog // nil: request lines go through log
	domains      DomainChecker
	cluster      ClusterView // nil: a node alone
	tools        ToolRunner  // nil: runs stay queued
	kits         KitCaller   // nil: member actions' calls fail
	backup       BackupFunc  // nil: GET /ops/v1/backup answers 503
	published    *published.Cache
	app          *app.Server
	corrPrefix   string
	corrSeq      atomic.Uint64
	srv          *fasthttp.Server
	uploads      *byteBudget // the bytes of uploads in flight

	proxies *clientaddr.Trusted // nil: none (clientOf)

	// Failures of the routes whose rows name a per-address bucket, by the
	// bucket's name (peers.go); nil with limits off.
	peers map[limits.Name]*peerLimit
	// hookRoute is the row of a webhook post (peerLimitOf), hookRow its
	// index.
	hookRoute *route
	hookRow   int

	stats   *frontStats
	metrics *metrics.Registry
	// metricsHash is the hash of the --metrics-token, if any
	// (hasMetricsToken), which reads /metrics only.
	metricsHash     [32]byte
	hasMetricsToken bool
	// hookTargets sends a post to its webhook, or to the stand-in.
	hookTargets *actors.WebhookTargets

	// fresh holds accepted connections that have not sent a byte yet.
	// fasthttp counts them as active, so Shutdown closes them itself rather
	// than wait for their read timeout.
	freshMu sync.Mutex
	fresh   map[*trackedConn]struct{}
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	s := &Server{
		node: cfg.Node, env: cfg.Env, auth: cfg.Auth, limits: cfg.Limits,
		operatorHash: ids.Hash(cfg.OperatorToken), testClock: cfg.TestClock,
		metricsHash: ids.Hash(cfg.MetricsToken), hasMetricsToken: cfg.MetricsToken != "",
		publicURL: strings.TrimRight(cfg.PublicURL, "/"), nodeName: cfg.NodeName, httpAddr: cfg.HTTPAddr, log: cfg.Logger,
		requests:   cfg.RequestLog,
		corrPrefix: ids.New()[24:],
		fresh:      make(map[*trackedConn]struct{}),
		domains:    cfg.Domains,
		cluster:    cfg.Cluster,
		tools:      cfg.Tools,
		kits:       cfg.Kits,
		backup:     cfg.Backup,
		uploads:    newByteBudget(maxUploadBodiesInFlight),
		published:  new(published.Cache),
		proxies:    cfg.TrustedProxies,
	}
	s.peers = newPeerLimits(cfg.Limits)
	for i := range routes {
		// The webhook post is the hooks host's row that spends the
		// webhook bucket (a responseUrl post is the other row).
		if routes[i].host == hostHooks && routes[i].family == limits.Webhook {
			s.hookRoute, s.hookRow = &routes[i], i
		}
	}
	s.stats, s.metrics = newFrontStats(), cfg.Metrics
	if s.metrics == nil {
		s.metrics = new(metrics.Registry)
	}
	s.metrics.Register(s.collect)
	s.hookTargets = actors.NewWebhookTargets(cfg.Env, knownWebhooks)
	s.app = app.New(app.Config{
		Node: cfg.Node, Env: cfg.Env, Auth: cfg.Auth, PublicURL: s.publicURL, Logger: cfg.Logger,
		Published: s.published, CorrelationID: s.correlate,
	})
	if s.domains == nil {
		s.domains = domainproof.New(domainproof.Config{})
	}
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		Name:               "kitd",
		MaxRequestBodySize: maxFilesBody + 4096,
		ReadBufferSize:     maxHead,
		HeaderReceived:     s.limitBodies,
		ReadTimeout:        30 * time.Second,
		WriteTimeout:       30 * time.Second,
		IdleTimeout:        2 * time.Minute,
		ErrorHandler:       s.unreadable,
		NoDefaultDate:      true,
		Logger:             fasthttpLogger{cfg.Logger},

		// Bodies are streamed so that an upload is decoded as it arrives;
		// readBody and limitBodies (bodies.go) keep every other request
		// as it was.
		StreamRequestBody: true,
		// Streaming would otherwise parse a multipart body of any size
		// before the handler could refuse it; no handler reads forms.
		DisablePreParseMultipartForm: true,
	}
	return s
}

// trackedConn notes its first byte read.
type trackedConn struct {
	net.Conn
	s    *Server
	used atomic.Bool
	// chunked: a chunked body is being read (readWholeBody, on the
	// connection's own goroutine); cut: the connection ended meanwhile.
	// fasthttp's chunked reader takes the connection's end where a chunk's
	// size or the trailers are due for the body's end, as if its last
	// chunk had come; it reads the connection only for bytes of the body
	// it still needs, so an end met then is the body cut short.
	chunked, cut bool
	// head watches the connection's first request head for a bare LF.
	head headScan
}

func (c *trackedConn) Read(p []byte) (int, error) {
	if c.head.bad {
		return 0, errBareLF
	}
	n, err := c.Conn.Read(p)
	if !c.head.done && n > 0 && c.head.scan(p[:n]) {
		// The bytes are withheld: fasthttp answers the error
		// (parseError: 400) and closes the connection.
		return 0, errBareLF
	}
	if err == io.EOF && c.chunked {
		if n > 0 {
			// The next read, if the body needs one, meets the end again
			// (a TLS close_notify can come with the last bytes).
			err = nil
		} else {
			c.cut = true
		}
	}
	if n > 0 && !c.used.Load() {
		c.used.Store(true)
		c.s.freshMu.Lock()
		delete(c.s.fresh, c)
		c.s.freshMu.Unlock()
	}
	return n, err
}

// errBareLF is answered as any head fasthttp cannot read: 400 malformed
// HTTP request.
var errBareLF = errors.New("a request head line ends with a bare LF")

// headScan finds a bare LF in a connection's first request head. RFC 9112
// 2.2 lets a server take a bare LF for a line's end or refuse the message;
// fasthttp finds a head's end only at CRLFCRLF, so a head ended by bare LFs
// was neither refused nor served: fasthttp waited for the read timeout.
// kitd refuses it, as a proxy in front may end the lines otherwise. A
// later head is not watched (its bytes may have been read with the body
// before it): limitBodies refuses its header lines' bare LFs.
type headScan struct {
	done, bad bool
	started   bool // the request line began (empty lines before it are skipped)
	line      int  // bytes of the current line but CRs
	prev      byte
}

// scan reads the next bytes of the head and reports a bare LF in them; it
// stops at the head's end.
func (h *headScan) scan(p []byte) (bare bool) {
	for _, b := range p {
		switch b {
		case '\n':
			if h.prev != '\r' {
				h.bad = true
				return true
			}
			if h.started && h.line == 0 {
				h.done = true
				return false
			}
			h.line = 0
		case '\r':
		default:
			h.started = true
			h.line++
		}
		h.prev = b
	}
	return false
}

func (c *trackedConn) Close() error {
	c.s.freshMu.Lock()
	delete(c.s.fresh, c)
	c.s.freshMu.Unlock()
	return c.Conn.Close()
}

type trackingListener struct {
	net.Listener
	s *Server
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s}
	l.s.freshMu.Lock()
	l.s.fresh[tc] = struct{}{}
	l.s.freshMu.Unlock()
	return tc, nil
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(trackingListener{ln, s}) }

// Shutdown stops accepting, lets open requests finish, and returns. A
// connection that never sent a request counts as open to fasthttp, so the
// wait is bounded by ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	go func() {
		// Repeat until fasthttp has stopped accepting: a connection accepted
		// meanwhile must not hold the shutdown up either.
		for ctx.Err() == nil {
			s.freshMu.Lock()
			for c := range s.fresh {
				delete(s.fresh, c)
				c.Conn.Close()
			}
			s.freshMu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	err := s.srv.ShutdownWithContext(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // only idle or stuck connections were left
	}
	return err
}

// fasthttpLogger takes fasthttp's own lines (connections it could not
// serve) at debug level.
type fasthttpLogger struct{ l *slog.Logger }

// Printf logs the line with each error cut to its first clause: fasthttp's
// parse errors go on to quote what they could not read, a header line or
// the whole request head ("contents: ..."), Authorization header and all,
// and a token is never in a line (docs/decisions.md "Logs").
func (f fasthttpLogger) Printf(format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			msg, _, _ := strings.Cut(err.Error(), ": ")
			args[i] = msg
		}
	}
	f.l.Debug(fmt.Sprintf(format, args...))
}

func (s *Server) correlationID() string {
	return s.corrPrefix + "-" + strconv.FormatUint(s.corrSeq.Add(1), 36)
}

// unreadable answers a request whose head fasthttp could not read
// (fasthttp's ErrorHandler), and counts and logs it like any other answer:
// route "none", the TCP peer as its client (its headers were not read).
func (s *Server) unreadable(ctx *fasthttp.RequestCtx, err error) {
	s.parseError(ctx, err)
	if errors.As(err, new(*net.OpError)) {
		// The connection failed (a timeout, a reset, closed by Shutdown),
		// often before a byte of a request: there is no request to count.
		return
	}
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	s.record(ctx, &served{client: peer.Unmap(), unread: true})
}

// parseError answers requests fasthttp could not parse, in the error body.
func (s *Server) parseError(ctx *fasthttp.RequestCtx, err error) {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		// The client sent no (complete) request in time: there is nobody to
		// answer, so close instead of writing an unsolicited response.
		ctx.Conn().Close()
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.fail(ctx, kiterr.New(kiterr.PayloadTooLarge, "request body is too large"))
		return
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		s.fail(ctx, kiterr.New(kiterr.HeaderTooLarge, "request head is larger than "+strconv.Itoa(maxHead)+" bytes"))
		return
	}
	s.fail(ctx, kiterr.Invalid("", "malformed HTTP request"))
}

// ask sends msg to the actor and returns its reply as R.
func ask[R proto.Message](s *Server, kind, identity string, msg proto.Message) (R, error) {
	return cluster.Call[R](s.node, kind, identity, msg)
}
