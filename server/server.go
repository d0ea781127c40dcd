package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/api"
	"github.com/kitd/kitd/http/clientaddr"
	"github.com/kitd/kitd/http/tlscert"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/server/clusternode"
)

// Config is a node's configuration, its values already read (cmd/kitd
// reads them from the flags and variables of OPERATIONS.md and README; a
// field's comment names its flag). The few that name a file, and
// VerifyResolve, Start reads where a start always did, so that a bad one
// fails at the same point, in words that name its flag.
type Config struct {
	ListenAddr    string // --listen
	DataDir       string // --data
	PublicURL     string // --public-url; empty: http(s)://<the listener's address>
	OperatorToken string // --operator-token; empty: <data>/operator-token, made on the first start
	TestClock     bool   // --test-clock
	Limits        limits.Table
	NodeName      string // --node-name, or what stands in for it: every log line carries it
	MetricsToken  string // --metrics-token
	CacheBytes    int64  // --cache-bytes
	Demo          bool   // --demo: on a fresh data directory (Server.Demo)

	// A cluster member (ClusterBind set), or a node alone that commits
	// through raft groups of its own (Replicate).
	ClusterBind   string   // --cluster-bind
	Join          []string // --join
	ClusterKey    string   // --cluster-key
	PeerListen    string   // --peer-listen; empty: the ClusterBind host, any port
	PeerAdvertise string   // --peer-advertise
	DownTimeout   time.Duration
	ForgetAfter   time.Duration
	Replicas      int
	Replicate     bool

	VerifyDNS     string   // --verify-dns
	VerifyResolve []string // --verify-resolve: HOST:PORT=ADDR
	VerifyCA      string   // --verify-ca: a PEM file

	DeliveryAllow   []string // --delivery-allow
	DeliveryCA      string   // --delivery-ca: a PEM file
	DeliveryTimeout time.Duration
	// DeliveryQueue bounds the events a delivery actor keeps queued in
	// memory (--delivery-queue); 0: actors.MaxQueuedInMemory.
	DeliveryQueue int
	// DeliveryMemory bounds the node's delivery queues together
	// (--delivery-memory); 0: actors.DefaultDeliveryMemory.
	DeliveryMemory int64

	TLS            *tlscert.Holder // --tls-cert, --tls-key; nil: plain HTTP
	TrustedProxies *clientaddr.Trusted

	Build      Build
	Logger     *slog.Logger    // nil: none
	RequestLog *api.RequestLog // nil: no request lines
	// Fatal is called when the store can no longer promise durability;
	// it must not return (cmd/kitd flushes the log and exits).
	Fatal func(error)
}

// Build is the build's facts, as `kitd version` prints them.
type Build struct {
	Version   string
	Commit    string // marked "+modified" when the tree held more than it
	GoVersion string
}

// String is the version and the commit on one line, as a backup's header
// records the kitd that made it.
func (b Build) String() string { return b.Version + " " + b.Commit }

// Server is a started node.
type Server struct {
	cfg       Config
	log       *slog.Logger
	fresh     bool // the data directory held nothing before Start
	store     *persistence.Store
	node      *cluster.Host
	send      *deliveries.Sender
	groups    groups
	ln        net.Listener
	http      *api.Server
	publicURL string
	opToken   string
	served    chan error
}

// Start assembles the node and serves HTTP on Config.ListenAddr. On an
// error, what it started is stopped again.
func Start(cfg Config) (_ *Server, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, fresh: isFresh(cfg.DataDir), served: make(chan error, 1)}
	defer func() {
		if err != nil {
			if s.ln != nil {
				s.ln.Close()
			}
			s.Close()
		}
	}()
	if err := refuseForeign(cfg.DataDir); err != nil {
		return nil, err
	}
	if s.store, err = persistence.Open(cfg.DataDir, persistence.Options{Logger: s.log}); err != nil {
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data %s is in use by another process (its LOCK is held): one kitd per data directory", cfg.DataDir)
		}
		return nil, err
	}
	if err := refuseGroupsUnasked(cfg, s.store); err != nil {
		return nil, err
	}
	if err := actors.Upgrade(s.store, s.log); err != nil {
		return nil, err
	}
	if s.opToken, err = operatorToken(cfg); err != nil {
		return nil, err
	}
	var clk clock.Clock = clock.System()
	var testClock *clock.Test
	if cfg.TestClock {
		testClock = clock.NewTest()
		clk = testClock
	}
	env := &actors.Env{Store: s.store, Clock: clk, Logger: s.log, Limits: cfg.Limits, Fatal: cfg.Fatal}
	env.History = history.NewBudget(history.Options{Bytes: cfg.CacheBytes})
	env.DeliveryQueueMax, env.DeliveryMemory = cfg.DeliveryQueue, cfg.DeliveryMemory
	keys, err := sealingKeys(cfg.DataDir, cfg.ClusterKey)
	if err != nil {
		return nil, err
	}
	env.SealKey, env.OpenKeys = keys.seal, keys.open
	auth := actors.NewAuthenticator(env)
	caches := &actors.Caches{Auth: auth}
	env.Invalidator = caches
	if s.node, err = cluster.Start(cluster.Config{Logger: quieter(s.log, slog.LevelWarn)}, actors.Kinds(env)...); err != nil {
		return nil, err
	}
	env.Host = s.node
	if s.send, err = sender(cfg, env); err != nil {
		return nil, err
	}
	env.Deliveries, caches.Targets = s.send, s.send
	// The cluster publishes where this node serves HTTP: listen first.
	if s.ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.publicURL = cfg.PublicURL
	if s.publicURL == "" {
		s.publicURL = "http://" + s.ln.Addr().String()
		if cfg.TLS != nil {
			s.publicURL = "https://" + s.ln.Addr().String()
		}
	}
	// The replication's info lines are chatter to an operator; the
	// membership's (members joining, leaving, failing) are not.
	if s.groups, err = startGroups(cfg, s.store, env, s.ln.Addr().String(), quieter(s.log, slog.LevelWarn), s.log); err != nil {
		return nil, err
	}
	if m := s.groups.clusterNode; m != nil {
		s.send.ShareKitSlots(m.Members)
	}
	if s.groups.clusterNode == nil && s.groups.replica == nil {
		// Events a previous process recorded but did not sequence or send
		// yet. With groups, each partition's are woken as it is hosted.
		if err := actors.WakeDeliveries(env); err != nil {
			return nil, fmt.Errorf("wake deliveries: %w", err)
		}
	}
	domains, err := domainChecker(cfg)
	if err != nil {
		return nil, err
	}
	reg := new(metrics.Registry)
	reg.Register(s.store.Collect)
	reg.Register(env.Collect)
	reg.Register(s.send.Collect)
	reg.Register(metrics.Runtime())
	reg.Register(metrics.BuildInfo(cfg.Build.Version, cfg.Build.Commit, cfg.Build.GoVersion))
	if r := s.groups.replicas(); r != nil {
		reg.Register(r.Collect)
	}
	s.http = api.New(api.Config{
		Node: s.node, Env: env, Auth: auth, Limits: cfg.Limits, OperatorToken: s.opToken, MetricsToken: cfg.MetricsToken,
		TestClock: testClock, PublicURL: s.publicURL, Logger: s.log, RequestLog: cfg.RequestLog, Domains: domains, Metrics: reg,
		NodeName: cfg.NodeName, HTTPAddr: s.ln.Addr().String(), Cluster: s.groups.view(),
		Tools: deliveries.NewTools(s.send), Kits: s.send, TrustedProxies: cfg.TrustedProxies,
		Backup: backups(s.store, keys, s.groups, cfg.Build),
	})
	httpLn := s.ln
	if cfg.TLS != nil {
		httpLn = tls.NewListener(s.ln, cfg.TLS.Config())
	}
	go func() { s.served <- s.http.Serve(httpLn) }()
	return s, nil
}

// Addr is the address HTTP is served on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// PublicURL is the origin of {base_url}, {hooks_url} and {app_url}.
func (s *Server) PublicURL() string { return s.publicURL }

// ClusterNode is this node's membership of a cluster; nil for a node alone.
func (s *Server) ClusterNode() *clusternode.Node { return s.groups.clusterNode }

// Err reports why serving HTTP stopped, unless Drain stopped it.
func (s *Server) Err() <-chan error { return s.served }

// Demo creates the demo workspace of Config.Demo and prints it to out, on
// a data directory that was fresh; nothing otherwise. It goes through the
// node's own HTTP API, so the demo exercises exactly what a client would:
// the node must be serving.
func (s *Server) Demo(out io.Writer) {
	if !s.cfg.Demo || !s.fresh {
		return
	}
	if err := createDemo(newDemoClient(s.ln.Addr(), s.cfg.TLS), s.publicURL, s.opToken, out); err != nil {
		s.log.Error("demo workspace", "err", err)
	}
}

// Drain stops taking requests and lets open ones finish, until ctx ends.
// Every acknowledged write is already durable. A member of a cluster
// first hands its leaderships over, so that no group waits for an
// election (it still answers meanwhile, forwarding).
func (s *Server) Drain(ctx context.Context) error {
	if m := s.groups.clusterNode; m != nil {
		if err := m.Drain(ctx); err != nil {
			s.log.Warn("drain", "err", err)
		}
	}
	return s.http.Shutdown(ctx)
}

// Close stops the node once HTTP no longer serves (after Drain, or once
// Err reported). The actors stop before the groups they commit through;
// the groups' wakes of deliveries stop before the groups close; the
// store closes last.
func (s *Server) Close() {
	if s.node != nil {
		s.node.Stop()
	}
	if err := s.groups.Close(); err != nil {
		s.log.Error("replication stopped on an error", "err", err)
	}
	if s.send != nil {
		s.send.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// domainChecker builds the domain verification checker of the Verify
// fields.
func domainChecker(cfg Config) (*domainproof.Checker, error) {
	vc := domainproof.Config{DNSServer: cfg.VerifyDNS, Resolve: map[string]string{}}
	for _, r := range cfg.VerifyResolve {
		hostport, addr, err := domainproof.ParseResolve(r)
		if err != nil {
			return nil, fmt.Errorf("--verify-resolve: %w", err)
		}
		vc.Resolve[hostport] = addr
	}
	if cfg.VerifyCA != "" {
		pem, err := os.ReadFile(cfg.VerifyCA)
		if err != nil {
			return nil, fmt.Errorf("--verify-ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--verify-ca: %s holds no PEM certificate", cfg.VerifyCA)
		}
		vc.RootCAs = pool
	}
	return domainproof.New(vc), nil
}

// refuseForeign refuses a --data that holds entries but no Pebble store:
// a mistyped path (a home directory, /var/lib) is not made into one.
// lost+found alone (a new volume's mount point) counts as empty.
func refuseForeign(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // missing (created) or unreadable (Open says why)
	}
	foreign := false
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest."):
			return nil // a Pebble store: kitd's, or Open and Upgrade say otherwise
		case n == "lost+found":
		default:
			foreign = true
		}
	}
	if foreign {
		return fmt.Errorf("--data %s is not empty and holds no kitd data: give a new or empty directory, or one kitd made", dir)
	}
	return nil
}

// isFresh reports whether dir holds no data yet.
func isFresh(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err != nil || len(entries) == 0
}

// operatorToken returns the configured token, or the one generated on the
// first start and kept in <data>/operator-token.
func operatorToken(cfg Config) (string, error) {
	if cfg.OperatorToken != "" {
		return cfg.OperatorToken, nil
	}
	path := filepath.Join(cfg.DataDir, "operator-token")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read operator token: %w", err)
	}
	token := ids.NewSecret(ids.OperatorToken)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write operator token: %w", err)
	}
	return token, nil
}
