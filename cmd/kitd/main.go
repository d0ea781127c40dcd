// Command kitd is the Kit integration platform server. `kitd serve` starts
// one node: flags and environment are read here once and handed to package
// server, which assembles the node. This package keeps the process's part
// only: flags, variables, subcommands (serve, restore, version), signals,
// the log's output and the Go runtime's settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/clientaddr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/server"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		printVersion(os.Stdout)
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "restore" {
		err := restore(os.Args[2:], os.Stdin, os.Stdout)
		if errors.Is(err, flag.ErrHelp) {
			return // asked for: the flag set printed the flags
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kitd:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, usage)
		if len(os.Args) == 2 && isHelp(os.Args[1]) {
			return
		}
		os.Exit(2)
	}
	cfg, err := parseFlags(os.Args[2:])
	if errors.Is(err, flag.ErrHelp) {
		return // asked for, not a mistake: exit 0, as Go's flag package does
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kitd:", err)
		os.Exit(2)
	}
	if cfg.logFormat == "" {
		cfg.logFormat = defaultLogFormat(os.Stderr)
	}
	runtime.GOMAXPROCS(gomaxprocs(runtime.GOMAXPROCS(0), os.Getenv("GOMAXPROCS")))
	if err := serve(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kitd:", err)
		os.Exit(1)
	}
}

const usage = "usage: kitd serve [flags] | kitd restore --from FILE --data DIR | kitd version"

// isHelp is whether a lone argument asks for the usage.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// gomaxprocs is how many Ps kitd runs with: the runtime's default (the CPUs
// it may use) plus the P the store's WAL syncer keeps while a sync is in
// flight (persistence.SyncerProcs), so that the actors keep every CPU. An
// operator's GOMAXPROCS, already applied by the runtime, is kept as it is.
// Setting it stops the runtime from following later changes of the CPU
// limit; like the rest of kitd's configuration, it is read once at start.
func gomaxprocs(current int, env string) int {
	if env != "" {
		return current
	}
	return current + persistence.SyncerProcs
}

type config struct {
	listen        string
	dataDir       string
	publicURL     string
	operatorToken string
	testClock     bool
	limits        string
	nodeName      string
	clusterBind   string
	join          string
	clusterKey    string
	peerListen    string
	downTimeout   time.Duration
	forgetAfter   time.Duration
	peerAdvertise string
	replicas      int
	replicate     bool
	demo          bool
	logLevel      string
	logFormat     string
	pprof         string
	metricsToken  string
	verifyDNS     string
	verifyResolve repeated
	deliveryAllow string
	deliveryCA    string
	verifyCA      string
	tlsCert       string
	tlsKey        string
	proxies       *clientaddr.Trusted
	cacheBytes    int64

	// deliveryTimeout: the 3 s within which a Kit must answer
	// (deliveries.Timeout), shorter only for tests.
	deliveryTimeout time.Duration
	// deliveryQueue: the events a delivery actor keeps queued in memory
	// per installation (actors.MaxQueuedInMemory).
	deliveryQueue int
	// deliveryMemory: the node's bound on its delivery queues, all
	// installations together (actors.DefaultDeliveryMemory).
	deliveryMemory int64
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// parseFlags reads flags, with the environment variables of OPERATIONS.md
// sections 1, 6, 7 and 8 as defaults.
func parseFlags(args []string) (config, error) {
	return parseFlagsEnv(args, os.LookupEnv, nil)
}

// parseFlagsEnv is parseFlags with the environment read through lookup;
// parsed, when not nil, gets the flag set once its flags are defined (the
// test that every flag has its variable reads it).
func parseFlagsEnv(args []string, lookup func(string) (string, bool), parsed func(*flag.FlagSet)) (config, error) {
	var c config
	e := &envReader{lookup: lookup}
	env := e.str
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", env("KIT_LISTEN", "127.0.0.1:8080"), "HTTP listener for every host")
	fs.StringVar(&c.dataDir, "data", env("KIT_DATA_DIR", "./data"), "Pebble data directory (created if missing)")
	fs.StringVar(&c.publicURL, "public-url", env("KIT_PUBLIC_URL", ""), "origin of {base_url}, {hooks_url} and {app_url} (default http://<listen>)")
	fs.StringVar(&c.operatorToken, "operator-token", "", "operator API token (default: generated once into <data>/operator-token; or KIT_OPERATOR_TOKEN_FILE)")
	fs.BoolVar(&c.testClock, "test-clock", e.bool("KIT_TEST_CLOCK"), "enable POST /ops/v1/clock/advance (never in production)")
	fs.StringVar(&c.limits, "limits", env("KIT_LIMITS", "spec"), "rate limits: spec, off, or a JSON file of overrides")
	fs.StringVar(&c.nodeName, "node-name", env("KIT_NODE_NAME", ""), "cluster member name")
	fs.StringVar(&c.clusterBind, "cluster-bind", env("KIT_CLUSTER_BIND", ""), "gossip bind address")
	fs.StringVar(&c.join, "join", env("KIT_JOIN", ""), "comma-separated gossip addresses of members to join (none: this node founds a cluster)")
	fs.StringVar(&c.clusterKey, "cluster-key", "", "the cluster's shared secret: encrypts gossip and authenticates node-to-node traffic (prefer KIT_CLUSTER_KEY or KIT_CLUSTER_KEY_FILE)")
	fs.StringVar(&c.peerListen, "peer-listen", env("KIT_PEER_LISTEN", ""), "node-to-node listener, host:port (default: the --cluster-bind host, any port)")
	downTimeout := fs.String("down-timeout", env("KIT_DOWN_TIMEOUT", "30s"), "how long a member may be gone before its replicas are removed from their groups (they are re-created on its return or on a spare node)")
	forgetAfter := fs.String("forget-after", env("KIT_FORGET_AFTER", "30s"), "how long a replica may hear no leader before its group's leader is asked whether it was removed, and it is deleted with its records if so")
	fs.StringVar(&c.peerAdvertise, "peer-advertise", env("KIT_PEER_ADVERTISE", ""), "node-to-node address the other members dial, host:port, when it is not --peer-listen's (a NAT or proxy in front)")
	replicas := fs.String("replicas", env("KIT_REPLICAS", "3"), "replicas of each partition, or every node when fewer are alive; 0: every node (docs/cluster.md, \"How many replicas\")")
	fs.BoolVar(&c.replicate, "replicate", e.bool("KIT_REPLICATE"), "commit every write through its partition's raft group, as a node of a cluster does, even alone")
	fs.BoolVar(&c.demo, "demo", e.bool("KIT_DEMO"), "on a fresh data directory, create and print a demo workspace")
	fs.StringVar(&c.logLevel, "log-level", env("KIT_LOG_LEVEL", "info"), "debug, info (a line per request), warn or error")
	fs.StringVar(&c.logFormat, "log-format", env("KIT_LOG_FORMAT", ""), "json or text (default: text on a terminal, else json)")
	fs.StringVar(&c.pprof, "pprof", env("KIT_PPROF", ""), "serve net/http/pprof on this loopback address (profiling only)")
	fs.StringVar(&c.metricsToken, "metrics-token", "", "a bearer token that reads GET /metrics and nothing else (or KIT_METRICS_TOKEN_FILE)")
	fs.StringVar(&c.verifyDNS, "verify-dns", env("KIT_VERIFY_DNS", ""), "DNS server (host:port) for domain verification instead of the system's")
	c.verifyResolve = e.list("KIT_VERIFY_RESOLVE")
	fs.Var(&c.verifyResolve, "verify-resolve", "HOST:PORT=ADDR: domain verification fetches of HOST:PORT connect to ADDR (repeatable)")
	fs.StringVar(&c.verifyCA, "verify-ca", env("KIT_VERIFY_CA", ""), "PEM file of extra roots trusted by domain verification fetches")
	fs.StringVar(&c.deliveryAllow, "delivery-allow", env("KIT_DELIVERY_ALLOW", ""), "comma-separated host or host:port that deliveries may reach on loopback or private addresses (tests only)")
	fs.StringVar(&c.deliveryCA, "delivery-ca", env("KIT_DELIVERY_CA", ""), "PEM file of extra roots trusted for deliveries")
	deliveryTimeout := fs.String("delivery-timeout", env("KIT_DELIVERY_TIMEOUT", deliveries.Timeout.String()), "how long a Kit has to answer an event or a call with a 2xx (tests only: the contract says 3s)")
	deliveryQueue := fs.String("delivery-queue", env("KIT_DELIVERY_QUEUE", strconv.Itoa(actors.MaxQueuedInMemory)), "events an installation keeps queued in memory for delivery (about 160 bytes each); past it they wait in the outbox, on disk")
	deliveryMemory := fs.String("delivery-memory", env("KIT_DELIVERY_MEMORY", defaultDeliveryMemory), "memory for the node's delivery queues, every installation together: bytes, or with KiB, MiB or GiB; past it an installation keeps 100 events queued (20 past twice it) and the rest wait in the outbox")
	fs.StringVar(&c.tlsCert, "tls-cert", env("KIT_TLS_CERT", ""), "PEM certificate (and chain): with --tls-key, --listen serves HTTPS only; read again on SIGHUP")
	fs.StringVar(&c.tlsKey, "tls-key", env("KIT_TLS_KEY", ""), "PEM private key of --tls-cert; read again on SIGHUP")
	proxies := fs.String("trusted-proxies", env("KIT_TRUSTED_PROXIES", ""), "comma-separated CIDRs of proxies whose X-Forwarded-For names the client (per-address limits, request lines)")
	cacheBytes := fs.String("cache-bytes", env("KIT_CACHE_BYTES", defaultCacheBytes), "memory for the newest messages of conversations, kept encoded for pages of history: bytes, or with KiB, MiB or GiB; 0: none kept")
	// The secrets' variables are no flag's default: usage prints defaults.
	secrets := map[string]string{"operator-token": e.secret("KIT_OPERATOR_TOKEN"), "cluster-key": e.secret("KIT_CLUSTER_KEY"), "metrics-token": e.secret("KIT_METRICS_TOKEN")}
	if parsed != nil {
		defer parsed(fs)
	}
	if e.err != nil {
		return c, e.err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// A word that is not a flag ends the flags: what follows it would be
	// dropped unread. Not quoted: it may be a secret that lost its flag.
	if fs.NArg() > 0 {
		return c, fmt.Errorf("kitd serve takes flags only: %d argument(s) left over after the flags (a word that is not a flag ends them)", fs.NArg())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range secrets {
		if !given[name] && v != "" {
			fs.Set(name, v)
		}
	}
	for _, t := range []struct{ flag, env, v string }{
		{"--operator-token", "KIT_OPERATOR_TOKEN", c.operatorToken},
		{"--metrics-token", "KIT_METRICS_TOKEN", c.metricsToken},
	} {
		if t.v != "" && !bearerSafe(t.v) {
			// Else kitd would start with a token no request can present.
			return c, fmt.Errorf("%s (%s) must be a token an Authorization header can carry: no space at either end and no control character", t.flag, t.env)
		}
	}
	var err error
	if c.proxies, err = clientaddr.Parse(*proxies); err != nil {
		return c, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if c.downTimeout, err = time.ParseDuration(*downTimeout); err != nil {
		return c, fmt.Errorf("--down-timeout: %w", err)
	}
	if c.forgetAfter, err = time.ParseDuration(*forgetAfter); err != nil {
		return c, fmt.Errorf("--forget-after: %w", err)
	}
	if c.deliveryTimeout, err = time.ParseDuration(*deliveryTimeout); err != nil {
		return c, fmt.Errorf("--delivery-timeout: %w", err)
	}
	if c.deliveryQueue, err = strconv.Atoi(*deliveryQueue); err != nil {
		return c, fmt.Errorf("--delivery-queue: %w", err)
	}
	if c.deliveryMemory, err = parseBytes(*deliveryMemory); err != nil {
		return c, fmt.Errorf("--delivery-memory: %w", err)
	}
	if c.replicas, err = strconv.Atoi(*replicas); err != nil {
		return c, fmt.Errorf("--replicas: %w", err)
	}
	if c.cacheBytes, err = parseBytes(*cacheBytes); err != nil {
		return c, fmt.Errorf("--cache-bytes: %w", err)
	}
	// Refused rather than ignored: a node told to join that silently runs
	// alone would serve requests its operator expects to be shared.
	switch {
	case c.clusterBind == "" && (c.join != "" || c.clusterKey != "" || c.peerListen != "" || c.peerAdvertise != ""):
		return c, errors.New("--join, --cluster-key, --peer-listen and --peer-advertise need --cluster-bind (the gossip address)")
	case c.replicas < 0:
		return c, errors.New("--replicas must be 0 (every node) or more")
	case c.deliveryTimeout <= 0:
		return c, errors.New("--delivery-timeout must be more than 0")
	case c.deliveryMemory < 1<<20:
		return c, errors.New("--delivery-memory must be at least 1MiB")
	case c.deliveryQueue < minDeliveryQueue:
		return c, fmt.Errorf("--delivery-queue must be at least %d: twice the events an installation has in flight, so that half the queue keeps them going", minDeliveryQueue)
	case c.downTimeout < time.Second:
		return c, errors.New("--down-timeout must be at least 1s: a member is gone only after gossip's failure detector says so")
	case c.forgetAfter < time.Second:
		return c, errors.New("--forget-after must be at least 1s: a replica is asked about only once it has heard no leader for longer than an election")
	case c.clusterBind != "" && c.clusterKey == "":
		return c, errors.New("--cluster-bind needs --cluster-key (KIT_CLUSTER_KEY): members authenticate each other with it")
	case c.pprof != "" && !loopback(c.pprof):
		return c, errors.New("--pprof must be a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT): its profiles and traces are not behind any token")
	case c.peerAdvertise != "" && !dialable(c.peerAdvertise):
		return c, errors.New("--peer-advertise must be host:port with a port the others can dial (not 0)")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return c, errors.New("--tls-cert and --tls-key go together: both for HTTPS, neither for plain HTTP")
	case !listenable(c.listen):
		return c, errors.New("--listen must be host:port (port 0: any free one)")
	case c.publicURL != "" && !origin(c.publicURL):
		return c, errors.New("--public-url must be an origin: http:// or https://, a host and an optional port (1 to 65535), nothing after")
	case c.clusterBind != "" && !listenable(c.clusterBind):
		return c, errors.New("--cluster-bind must be host:port (port 0: any free one)")
	case c.peerListen != "" && !listenable(c.peerListen):
		return c, errors.New("--peer-listen must be host:port (port 0: any free one)")
	case c.clusterBind != "" && len(c.clusterKey) < peer.MinClusterKey:
		// The length only: never the key.
		return c, fmt.Errorf("--cluster-key (KIT_CLUSTER_KEY) must have at least %d bytes; it has %d", peer.MinClusterKey, len(c.clusterKey))
	}
	for _, j := range commaList(c.join) {
		if !dialable(j) {
			return c, errors.New("--join takes comma-separated host:port gossip addresses with a port the others can dial (not 0)")
		}
	}
	// Else the mistake would show only when a domain is verified or an
	// endpoint refused, long after the start.
	if c.verifyDNS != "" && !dialable(c.verifyDNS) {
		return c, errors.New("--verify-dns must be host:port of a DNS server, with a port (not 0)")
	}
	for _, a := range commaList(c.deliveryAllow) {
		if !hostOrHostPort(a) {
			return c, errors.New("--delivery-allow takes comma-separated host or host:port values (a port from 1 to 65535)")
		}
	}
	return c, nil
}

// hostOrHostPort reports whether s names a host, or a host and a port, as
// an endpoint URL's authority would (deliveries compare it with both).
func hostOrHostPort(s string) bool {
	if strings.ContainsAny(s, " \t/@?#") || strings.HasSuffix(s, ":") {
		return false
	}
	if dialable(s) || net.ParseIP(s) != nil { // an IPv6 host bare, as url.Hostname gives it
		return true
	}
	u, err := url.Parse("https://" + s)
	return err == nil && u.Hostname() != "" && u.Port() == "" && u.Host == s
}

// bearerSafe reports whether a request can present s as its bearer
// token: HTTP trims whitespace around a header's value, and a control
// character cannot be sent in one.
func bearerSafe(s string) bool {
	if s != strings.Trim(s, " \t") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// listenable reports whether addr is host:port with a port from 0 to
// 65535 (an empty host: every interface).
func listenable(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// origin reports whether s is an http(s) origin: {base_url} and the others
// are built by appending paths to it. url.Parse takes any digits for a
// port and an empty host before one; no client could reach either.
func origin(s string) bool {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n > 0 && n <= 65535
	}
	return true
}

// loopback reports whether addr is host:port on a loopback host.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultCacheBytes is --cache-bytes unless set: on the reference 2-core,
// 24 GiB machine, about a million messages of a typical 250 bytes, for a
// cost in garbage collection (the kept messages are live heap, which the
// memory limit makes room for: tuneGC) that a quarter GiB keeps small.
const defaultCacheBytes = "256MiB"

// defaultDeliveryMemory is --delivery-memory unless set: about 800,000
// queued events, or fewer with their records held for a first attempt.
const defaultDeliveryMemory = "128MiB"

// minDeliveryQueue is the least --delivery-queue: a queue refills from
// the outbox at half its bound, and half must hold an installation's
// events in flight.
const minDeliveryQueue = 2 * actors.MaxInFlightPerInstallation

// parseBytes reads a size: a whole number of bytes, or of KiB, MiB or GiB.
func parseBytes(s string) (int64, error) {
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, errors.New("must be a whole number of bytes, KiB, MiB or GiB, 0 or more")
	}
	return n * unit, nil
}

// dialable reports whether addr is a host and a port from 1 to 65535.
func dialable(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}

// shutdownGrace bounds how long a stopping node waits for open requests.
const shutdownGrace = 5 * time.Second

// gcPercent trades memory, which this kind of node has plenty of, for CPU:
// the request path allocates little per request, but at tens of thousands of
// requests a second the default (100) spends a noticeable share of the two
// cores on marking. GOGC in the environment still wins.
const gcPercent = 400

// memoryLimit caps what gcPercent lets the heap grow to. Message traffic
// keeps 10-20 MB live, so its heap goal (5x that) stays under the limit and
// the GC runs no more often than gcPercent says; uploads keep tens of MB
// live for a moment and churn 10 MB of garbage each, which without a cap
// grew the heap to several hundred MB. Near the limit the GC works harder
// instead. It is soft: a live heap above it is not refused, only collected
// often. GOMEMLIMIT in the environment still wins.
const memoryLimit = 100 << 20

// clusterMemoryLimit is memoryLimit for a member of a cluster: raft keeps
// each group's recent log in memory on every replica (replica's logKept),
// some 20-40 MB more live heap under load, which under memoryLimit had the
// GC run all the time.
const clusterMemoryLimit = 400 << 20

// tuneGC applies gcPercent and memoryLimit unless the environment sets them.
func tuneGC(cfg config) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		limit := int64(memoryLimit)
		if cfg.clusterBind != "" || cfg.replicate {
			limit = clusterMemoryLimit
		}
		// The kept history is live heap for good: room for it, and as
		// much again so that a full cache does not have the GC run at the
		// limit all the time. Delivery queues full for an endpoint that
		// is down are the same, and may hold twice their budget (the
		// floors past it have a budget of their own).
		debug.SetMemoryLimit(limit + 2*cfg.cacheBytes + 3*cfg.deliveryMemory)
	}
}

// serve runs `kitd serve`: the process's part (the runtime, the log,
// the signals, what stdout announces) around a node that package server
// assembles.
func serve(cfg config, stdout io.Writer) error {
	tuneGC(cfg)
	node := nodeName(cfg)
	logger, logOut, err := newLogger(os.Stderr, cfg.logLevel, cfg.logFormat, node)
	if err != nil {
		return err
	}
	defer logOut.Close()
	requests, err := requestLog(logger, logOut, cfg.logFormat, node)
	if err != nil {
		return err
	}
	logger.Info("starting", "data", cfg.dataDir, "listen", cfg.listen)
	defer logger.Info("stopped")

	table, on, err := limits.Load(cfg.limits)
	if err != nil {
		return fmt.Errorf("--limits: %w", err)
	}
	if !on {
		table = nil
	}
	certs, err := loadTLS(cfg, logger)
	if err != nil {
		return err
	}
	if cfg.pprof != "" {
		go func() { logger.Warn("pprof stopped", "err", http.ListenAndServe(cfg.pprof, nil)) }()
	}
	b := buildOf(debug.ReadBuildInfo())
	s, err := server.Start(server.Config{
		ListenAddr: cfg.listen, DataDir: cfg.dataDir, PublicURL: cfg.publicURL, OperatorToken: cfg.operatorToken,
		TestClock: cfg.testClock, Limits: table, NodeName: node, MetricsToken: cfg.metricsToken, CacheBytes: cfg.cacheBytes, Demo: cfg.demo,
		ClusterBind: cfg.clusterBind, Join: commaList(cfg.join), ClusterKey: cfg.clusterKey, PeerListen: cfg.peerListen,
		PeerAdvertise: cfg.peerAdvertise, DownTimeout: cfg.downTimeout, ForgetAfter: cfg.forgetAfter, Replicas: cfg.replicas, Replicate: cfg.replicate,
		VerifyDNS: cfg.verifyDNS, VerifyResolve: cfg.verifyResolve, VerifyCA: cfg.verifyCA,
		DeliveryAllow: commaList(cfg.deliveryAllow), DeliveryCA: cfg.deliveryCA, DeliveryTimeout: cfg.deliveryTimeout,
		DeliveryQueue: cfg.deliveryQueue, DeliveryMemory: cfg.deliveryMemory,
		TLS: certs, TrustedProxies: cfg.proxies,
		Build:  server.Build{Version: b.version, Commit: b.commitLabel(), GoVersion: b.goVersion},
		Logger: logger, RequestLog: requests,
		Fatal: func(err error) {
			logger.Error("storage can no longer promise durability; stopping", "err", err)
			logOut.Close()
			os.Exit(1)
		},
	})
	if err != nil {
		return err
	}
	defer s.Close()
	// Signals are caught before the node says it listens: a SIGTERM sent
	// as soon as it does must drain it, not kill it.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	stopReloads := reloadTLSOnHangup(certs, logger)
	defer stopReloads()
	fmt.Fprintf(stdout, "kitd listening on %s\n", s.Addr())
	if certs != nil {
		// A line of its own: parsers of the line above read an address.
		fmt.Fprintf(stdout, "kitd TLS: HTTPS only (TLS 1.2, 1.3), certificate %s, read again on SIGHUP\n", cfg.tlsCert)
	}
	if m := s.ClusterNode(); m != nil {
		advertised := ""
		if a := m.AdvertisedPeerAddr(); a != m.PeerAddr() {
			advertised = " (advertised as " + a + ")"
		}
		fmt.Fprintf(stdout, "kitd cluster: gossip on %s, node-to-node on %s%s\n", m.GossipAddr(), m.PeerAddr(), advertised)
	}
	logger.Info("ready", "addr", s.Addr().String(), "publicUrl", s.PublicURL())
	s.Demo(stdout)

	select {
	case sig := <-stop:
		logger.Info("draining", "signal", sig.String())
	case err := <-s.Err():
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return s.Drain(ctx)
}

// commaList splits a comma-separated flag, dropping empty items; nil for
// none.
func commaList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// nodeName is the name every log line carries: --node-name, else this
// host's name (one node per host is the usual deployment), else the
// listen address.
func nodeName(cfg config) string {
	if cfg.nodeName != "" {
		return cfg.nodeName
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return cfg.listen
}
