package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

// The events scenario (docs/deliveries.md "Cost on the write path"): what events cost the write
// path, and whether deliveries keep up. On a node of its own, started with
// --delivery-allow and --delivery-ca for kitbench's own https receiver,
// two Kits of two workspaces each have their bot in -conversations
// channels; one subscribes to message.posted, delivered to the receiver,
// which answers 200 at once; the other subscribes to nothing. The same
// post load goes to the one and to the other in alternating rounds. Each
// side's CPU counts from its warm-up's start until the node is idle again
// after it (for the subscribed side, once every event arrived), so the
// deliveries' work is charged to the posts that caused them; it is divided
// by every post answered 2xx, warm-up included. With -cluster N the node
// is a cluster of N nodes of its own, every node started with those flags,
// the connections spread over them round-robin, and the CPU is all its
// nodes'.

// eventsScenarioName is the events scenario's name, over conversations
// channels.
func eventsScenarioName(conversations int) string {
	return fmt.Sprintf("events-%d-conversations", conversations)
}

// eventsNodes are the nodes the events scenario runs on: one, or a
// cluster's.
type eventsNodes []*benchNode

// addrs are the nodes' HTTP addresses, for the connections to spread over.
func (ns eventsNodes) addrs() []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.addr
	}
	return out
}

// check fails when a node has exited.
func (ns eventsNodes) check() error {
	for _, n := range ns {
		if err := n.check(); err != nil {
			return err
		}
	}
	return nil
}

// cpuTime is the CPU time of all the nodes so far; ok is false when one
// could not be read.
func (ns eventsNodes) cpuTime() (time.Duration, bool) {
	var sum time.Duration
	for _, n := range ns {
		t, ok := cpuTime(n.pid())
		if !ok {
			return 0, false
		}
		sum += t
	}
	return sum, true
}

// storeBytes sums storeCounters over the nodes; ok is false when a node's
// /metrics, or a counter in it, could not be read.
func (ns eventsNodes) storeBytes(ctx context.Context) (sum [len(storeCounters)]uint64, ok bool) {
	for _, n := range ns {
		m, ok := nodeMetrics(ctx, n.addr, n.token)
		if !ok {
			return sum, false
		}
		for i, name := range storeCounters {
			v, ok := m[name]
			if !ok {
				return sum, false
			}
			sum[i] += v
		}
	}
	return sum, true
}

// eventsReport is the events scenario's own figures.
type eventsReport struct {
	// Plain is the run without subscribers; the scenario's Kitd the run
	// with one.
	Plain *runStats `json:"plain"`
	// CPURatio is CPU per post with a subscriber ÷ without (goal of issue
	// 29: ≤ 2.0).
	CPURatio float64 `json:"cpuRatio"`
	// Installations are the subscribed installations the conversations
	// are spread over (-event-installations).
	Installations int `json:"installations"`
	// Rate is the posts due a second of an open loop (-rate); 0: closed
	// loops. The goals differ (eventGoals).
	Rate float64 `json:"rate,omitempty"`
	// Nodes are the nodes both sides ran on (-cluster; 1: a node alone).
	Nodes int `json:"nodes"`
	// Posts are the subscribed side's posts answered 2xx, warm-up
	// included; Events those whose event arrived; Missing the rest.
	Posts   uint64 `json:"posts"`
	Events  uint64 `json:"events"`
	Missing uint64 `json:"missing"`
	// PostsPerSec is the subscribed side's posts over its load time;
	// EventsPerSec its events over the time from the load's start to the
	// last event's arrival.
	PostsPerSec  float64 `json:"postsPerSecond"`
	EventsPerSec float64 `json:"eventsPerSecond"`
	// ArrivalP50Ms and ArrivalP99Ms: from a post's 2xx answer to its
	// event's arrival at the receiver.
	ArrivalP50Ms float64 `json:"arrivalP50Ms"`
	ArrivalP99Ms float64 `json:"arrivalP99Ms"`
	// PlainStore and Store are what each side's posts had the nodes'
	// stores write, per post; nil when a node's /metrics could not be
	// read.
	PlainStore *storeBytes `json:"plainStore,omitempty"`
	Store      *storeBytes `json:"store,omitempty"`
}

// storeBytes are the bytes the nodes' stores wrote per post of a side,
// every node's together, from the load's start until the nodes were idle
// again: what its compactions rewrote is the largest share of what an
// event costs the store.
type storeBytes struct {
	WAL       float64 `json:"walBytesPerPost"`
	Flushed   float64 `json:"flushedBytesPerPost"`
	Compacted float64 `json:"compactedBytesPerPost"`
}

func (e *eventsReport) print(w io.Writer, s *scenarioReport) {
	on := ""
	if e.Nodes > 1 {
		on = fmt.Sprintf(" on a cluster of %d, all nodes' CPU", e.Nodes)
	}
	cpuGoal, p99Goal := eventGoals(e.Rate)
	fmt.Fprintf(w, "%s (%d subscribed installations)%s: CPU per post %.1f µs with a subscriber, %.1f µs without: %.2fx (goal ≤ %.2fx)\n",
		s.Name, max(e.Installations, 1), on, s.Kitd.CPUMicrosPerRequest, e.Plain.CPUMicrosPerRequest, e.CPURatio, cpuGoal)
	fmt.Fprintf(w, "  %d of %d events delivered (%d missing): %.0f events/s while posting %.0f posts/s; post 2xx → event arrival p50 %s, p99 %s (goal ≤ %s)\n",
		e.Events, e.Posts, e.Missing, e.EventsPerSec, e.PostsPerSec, fmtDur(e.ArrivalP50Ms), fmtDur(e.ArrivalP99Ms), fmtDur(p99Goal))
	if e.PlainStore != nil && e.Store != nil {
		fmt.Fprintf(w, "  the store's bytes per post, with a subscriber / without: WAL %.0f / %.0f, flushed %.0f / %.0f, compacted %.0f / %.0f\n",
			e.Store.WAL, e.PlainStore.WAL, e.Store.Flushed, e.PlainStore.Flushed, e.Store.Compacted, e.PlainStore.Compacted)
	}
	if e.Missing > 0 {
		fmt.Fprintf(w, "!! %d events never arrived: the figures above are NOT valid\n", e.Missing)
	}
}

// eventGoals are issue 29's goals for the events scenario at rate posts
// due a second (0: closed loops): CPU per subscribed post ÷ a plain one,
// and the arrival p99 in ms.
func eventGoals(rate float64) (cpuRatio, arrivalP99Ms float64) {
	if rate > 0 {
		return 1.17, 10
	}
	return 2.0, 100
}

// drainTimeout bounds the wait for a round's events after its load.
const drainTimeout = 2 * time.Minute

// runEventsScenario runs the events scenario; nil (said so) when kitbench
// drives a running node (-addr), which it cannot start with the delivery
// flags.
func runEventsScenario(ctx context.Context, o options, nodes *nodeSet, sd scenarioDef) (*scenarioReport, error) {
	if o.addr != "" {
		logf("%s skipped: it needs a node of its own with --delivery-allow, and -addr gives a running one", sd.sc.Name)
		return nil, nil
	}
	rcv, err := startEventReceiver(nodes.work)
	if err != nil {
		return nil, err
	}
	defer rcv.close()
	delivery := []string{"--delivery-allow", rcv.addr, "--delivery-ca", rcv.caPath}
	var ns eventsNodes
	names := []string{"alone"} // the nodes' names, for their profiles (-pprof)
	if o.cluster > 0 {
		cl, err := startCluster(ctx, nodes, o, delivery...)
		if err != nil {
			return nil, err
		}
		ns, names = cl.nodes, cl.names
	} else {
		node, err := nodes.start(ctx, "off", delivery)
		if err != nil {
			return nil, err
		}
		ns = eventsNodes{node}
	}
	node := ns[0] // the set-up goes through the first: any node serves any request
	plainFx, err := node.setup(ctx, setupConfig{Conversations: o.conversations, Slug: "bench-plain"})
	if err != nil {
		return nil, fmt.Errorf("setup of %s: %w", sd.sc.Name, err)
	}
	subCfg := setupConfig{Conversations: o.conversations, Slug: "bench-events", EventsEndpoint: "https://" + rcv.addr + "/events"}
	if o.eventInstallations > 1 {
		// The posting Kit subscribes to nothing; the N Kits below do.
		subCfg.EventsEndpoint = ""
	}
	subFx, err := node.setup(ctx, subCfg)
	if err != nil {
		return nil, fmt.Errorf("setup of %s: %w", sd.sc.Name, err)
	}
	if o.eventInstallations > 1 {
		if err := setupEventInstallations(ctx, node.client, subFx, o.eventInstallations, "https://"+rcv.addr); err != nil {
			return nil, fmt.Errorf("setup of %s: %w", sd.sc.Name, err)
		}
	}

	sides := []*eventsSide{
		{name: "kitd, no subscriber", tag: "plain", fx: plainFx, cpuOK: true, storeOK: true},
		{name: "kitd, subscribed", tag: "subscribed", fx: subFx, events: true, cpuOK: true, storeOK: true},
	}
	slice := o.duration / time.Duration(o.rounds)
	for round := range o.rounds {
		warmup := o.warmup
		if round > 0 {
			warmup = min(o.warmup, 200*time.Millisecond)
		}
		for _, s := range sides {
			if err := ns.check(); err != nil {
				return nil, err
			}
			load := fmt.Sprintf("%d connections", o.concurrency)
			if o.rate > 0 {
				load = fmt.Sprintf("%.0f posts/s over %d connections", o.rate, o.concurrency)
			}
			logf("%s on %s (round %d/%d): %s, %v + %v warm-up", sd.sc.Name, s.name, round+1, o.rounds, load, slice, warmup)
			cfg := loadgen.Config{Addrs: ns.addrs(), Concurrency: o.concurrency, Duration: slice, Warmup: warmup, Timeout: o.timeout}
			var profile func() (wait func())
			if o.pprofDir != "" {
				suffix := fmt.Sprintf("-%s-round%d", s.tag, round+1)
				profile = func() func() { return profileCPU(ctx, o.pprofDir, ns, names, suffix, warmup, slice) }
			}
			if err := s.run(ctx, ns, rcv, sd.sc.Name, cfg, o.rate, profile); err != nil {
				return nil, err
			}
		}
	}
	plain, sub := sides[0], sides[1]
	sr := &scenarioReport{Name: sd.sc.Name, Description: sd.desc, Kitd: statsOf(sub.name, sub.res)}
	ev := &eventsReport{
		Plain: statsOf(plain.name, plain.res), Installations: o.eventInstallations, Nodes: len(ns), Rate: o.rate,
		Posts: sub.posts, Events: sub.arrived, Missing: sub.posts - min(sub.arrived, sub.posts),
		PostsPerSec:  float64(sub.posts) / sub.loadFor.Seconds(),
		EventsPerSec: float64(sub.arrived) / sub.spanFor.Seconds(),
		ArrivalP50Ms: ms(sub.arrival.Quantile(0.50)),
		ArrivalP99Ms: ms(sub.arrival.Quantile(0.99)),
	}
	ev.Plain.CPUMicrosPerRequest, sr.Kitd.CPUMicrosPerRequest = plain.cpuPerPost(), sub.cpuPerPost()
	ev.CPURatio = div(sr.Kitd.CPUMicrosPerRequest, ev.Plain.CPUMicrosPerRequest)
	ev.PlainStore, ev.Store = plain.storePerPost(), sub.storePerPost()
	sr.Events = ev
	return sr, nil
}

// setupEventInstallations spreads f's conversations over n more Kits of
// f's workspace, each subscribed to message.posted at its own endpoint of
// the receiver (origin + /events/<k>) with a signing secret of its own,
// and with its bot in the conversations spreadOver gives it. f's bot
// (subscribed to nothing) still writes every post, so the load is the
// same as with one installation, and each conversation's events go to
// exactly one installation.
func setupEventInstallations(ctx context.Context, c *setupClient, f *fixture, n int, origin string) error {
	op := c.cfg.OperatorToken
	base := c.cfg.Slug
	if base == "" {
		base = "bench-kit"
	}
	shares := spreadOver(f.Conversations, n)
	start := time.Now()
	err := parallel(ctx, c.cfg.Parallel, n, func(ctx context.Context, k int) error {
		manifest := withEvents(manifestWithSlug(base+"-ev"+strconv.Itoa(k)), eventEndpoint(origin, k))
		kitID, instID, err := c.installKitOf(ctx, f, manifest)
		if err != nil {
			return err
		}
		if _, err := c.call(ctx, "POST", "/ops/v1/kits/"+kitID+"/signing-secret", op, nil, http.StatusCreated, nil); err != nil {
			return err
		}
		for _, ch := range shares[k] {
			if _, err := c.call(ctx, "POST", "/ops/v1/installations/"+instID+"/channels", op,
				map[string]any{"conversationId": ch}, http.StatusOK, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.cfg.Progress("%d subscribed installations over %d channels in %v", n, len(f.Conversations),
		time.Since(start).Round(time.Millisecond))
	return nil
}

// eventEndpoint is the events endpoint of the k-th installation of the
// events scenario at the receiver's origin.
func eventEndpoint(origin string, k int) string {
	return origin + "/events/" + strconv.Itoa(k)
}

// spreadOver deals convs round-robin over n installations: conversation i
// to installation i mod n, so the round-robin posts give each the same
// share.
func spreadOver(convs []string, n int) [][]string {
	out := make([][]string, n)
	for i, c := range convs {
		out[i%n] = append(out[i%n], c)
	}
	return out
}

// eventsSide is one side of the events scenario: the posts into one Kit's
// channels, over the rounds.
type eventsSide struct {
	name    string
	tag     string // names its profiles (-pprof)
	fx      *fixture
	events  bool // its Kit subscribes: wait for the events after each run
	res     *loadgen.Result
	cpu     time.Duration
	cpuOK   bool
	posts   uint64 // answered 2xx, warm-up included
	arrived uint64
	loadFor time.Duration // from the load's start to its end
	spanFor time.Duration // from the load's start to the last event
	arrival loadgen.Histogram
	// store sums the deltas of storeCounters over the rounds, every
	// node's; storeOK is false once one could not be read.
	store   [len(storeCounters)]uint64
	storeOK bool
}

// run runs one round of the side on idle nodes: the load (closed loops,
// or posts due at rate a second when rate > 0), then (with events) the
// wait for them, then the nodes' return to idle; their CPU counts over
// all of it. profile, when not nil, starts the nodes' CPU profiles of the
// load's window once they are idle, and returns what waits for them.
func (s *eventsSide) run(ctx context.Context, ns eventsNodes, rcv *eventReceiver, name string, cfg loadgen.Config, rate float64, profile func() (wait func())) error {
	settleAll(ctx, ns)
	profiled := func() {}
	if profile != nil {
		profiled = profile()
	}
	defer profiled()
	arr := newArrivals()
	rcv.tracker.Store(arr)
	sc := postScenario(name, s.fx.BotToken, s.fx.Conversations)
	sc.Answered = arr.answered
	var live loadgen.Live
	cfg.Live = &live
	store0, storeOK0 := ns.storeBytes(ctx)
	cpu0, ok0 := ns.cpuTime()
	start := time.Now()
	prog := startProgress(os.Stderr, name+" on "+s.name, &live, cfg.Warmup+cfg.Duration)
	var res *loadgen.Result
	var err error
	if rate > 0 {
		res, err = loadgen.RunOpen(ctx, cfg, rate, sc)
	} else {
		res, err = loadgen.Run(ctx, cfg, sc)
	}
	prog.Stop()
	if err != nil {
		return err
	}
	loadEnd := time.Now()
	posts, _ := live.Counts()
	if s.events {
		arr.wait(ctx, posts, drainTimeout)
	}
	settleAll(ctx, ns)
	cpu1, ok1 := ns.cpuTime()
	s.cpu += cpu1 - cpu0
	s.cpuOK = s.cpuOK && ok0 && ok1
	store1, storeOK1 := ns.storeBytes(ctx)
	for i := range s.store {
		s.store[i] += store1[i] - store0[i]
	}
	s.storeOK = s.storeOK && storeOK0 && storeOK1
	s.posts += posts
	s.loadFor += loadEnd.Sub(start)
	if s.res == nil {
		s.res = res
	} else {
		s.res.Add(res)
	}
	if s.events {
		n, last := arr.done(&s.arrival)
		s.arrived += n
		s.spanFor += max(last.Sub(start), loadEnd.Sub(start))
		logf("  %d posts, %d events arrived, the last %v after the load", posts, n, max(last.Sub(loadEnd), 0).Round(time.Millisecond))
	}
	return nil
}

// cpuPerPost is the side's CPU per post in µs; 0 when not measured.
func (s *eventsSide) cpuPerPost() float64 {
	if !s.cpuOK || s.posts == 0 {
		return 0
	}
	return float64(s.cpu) / float64(time.Microsecond) / float64(s.posts)
}

// storePerPost is the side's store bytes per post; nil when not measured.
func (s *eventsSide) storePerPost() *storeBytes {
	if !s.storeOK || s.posts == 0 {
		return nil
	}
	per := func(i int) float64 { return float64(s.store[i]) / float64(s.posts) }
	return &storeBytes{WAL: per(0), Flushed: per(1), Compacted: per(2)}
}

// arrivals pairs the posts of one run with their events: the time of each
// post's 2xx answer and of its event's arrival, whichever comes first
// (the event may arrive before the client notes the answer).
type arrivals struct {
	mu      sync.Mutex
	acked   map[uint64]time.Time
	arrived map[uint64]time.Time
	hist    loadgen.Histogram
	n       uint64
	last    time.Time
	grew    chan struct{} // closed and replaced when n grows; nil: none waits
}

func newArrivals() *arrivals {
	return &arrivals{acked: map[uint64]time.Time{}, arrived: map[uint64]time.Time{}}
}

func (a *arrivals) answered(n uint64, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if got, ok := a.arrived[n]; ok {
		delete(a.arrived, n)
		a.hist.Record(max(got.Sub(at), 0))
		return
	}
	a.acked[n] = at
}

func (a *arrivals) arrive(n uint64, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	a.last = at
	if a.grew != nil {
		close(a.grew)
		a.grew = nil
	}
	if acked, ok := a.acked[n]; ok {
		delete(a.acked, n)
		a.hist.Record(at.Sub(acked))
		return
	}
	a.arrived[n] = at
}

// wait returns once want events arrived, or after timeout.
func (a *arrivals) wait(ctx context.Context, want uint64, timeout time.Duration) {
	deadline := time.After(timeout)
	for {
		a.mu.Lock()
		if a.n >= want {
			a.mu.Unlock()
			return
		}
		if a.grew == nil {
			a.grew = make(chan struct{})
		}
		grew := a.grew
		a.mu.Unlock()
		select {
		case <-grew:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// done merges the latencies into h and returns the events that arrived and
// when the last did.
func (a *arrivals) done(h *loadgen.Histogram) (uint64, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h.Merge(&a.hist)
	return a.n, a.last
}

// eventReceiver is the Kit's events endpoint: https on loopback with a
// self-signed certificate (its PEM at caPath, for --delivery-ca), answering
// 200 at once and telling the current run's arrivals of each bench post's
// event.
type eventReceiver struct {
	srv     *http.Server
	addr    string
	caPath  string
	tracker atomic.Pointer[arrivals]
}

func startEventReceiver(dir string) (*eventReceiver, error) {
	cert, pemBytes, err := selfSigned()
	if err != nil {
		return nil, err
	}
	r := &eventReceiver{caPath: filepath.Join(dir, "receiver-ca.pem")}
	if err := os.WriteFile(r.caPath, pemBytes, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{
		Handler:           http.HandlerFunc(r.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := r.srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("event receiver: %v", err)
		}
	}()
	return r, nil
}

func (r *eventReceiver) close() { r.srv.Close() }

// benchText is the start of every bench post's text (postScenario).
const benchText = "bench message "

func (r *eventReceiver) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	var ev struct {
		Data struct {
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
		} `json:"data"`
	}
	err := json.NewDecoder(req.Body).Decode(&ev)
	w.WriteHeader(http.StatusOK)
	if err != nil || !strings.HasPrefix(ev.Data.Message.Text, benchText) {
		return
	}
	n, err := strconv.ParseUint(ev.Data.Message.Text[len(benchText):], 10, 64)
	if a := r.tracker.Load(); err == nil && a != nil {
		a.arrive(n, at)
	}
}

// selfSigned makes a certificate for 127.0.0.1 that is its own root.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
