// Command kitbench measures a local kitd node against a trivial fasthttp
// handler on the same machine, in the same run, at the same concurrency.
//
// It starts a fresh node (`kitd serve --limits off` on a loopback port with a
// temporary data directory), creates a workspace, a published private Kit,
// an installation, 1,000 channels with the Kit bot in each and a bot token
// through the operator and developer APIs, then drives these scenarios with
// a closed-loop load (one goroutine per connection), or an open loop at a
// fixed arrival rate with -rate:
//
//	post-1-conversation     POST /api/v1/messages, all into one channel
//	post-1000-conversations POST /api/v1/messages, round-robin over the channels
//	get-history             GET /api/v1/conversations/{id}/messages?limit=50
//	                        on a channel seeded with 200 messages
//	get-history-pages       every page of that channel at -page-limit, by cursor
//	webhook-1000            incoming webhook posts over 1,000 webhooks (the storm)
//	events-1000-conversations
//	                        post-1000-conversations on a node of its own,
//	                        into the channels of a Kit subscribed to
//	                        message.posted (delivered to kitbench's own
//	                        https receiver) and of a Kit without one:
//	                        CPU per post of both, events/s, post → event p99
//	mixed-limits            Kit backends posting, editing and reading on a
//	                        second node with the limits of docs/api.md "Limits"
//	                        on; checks budgets and Retry-After
//
// -soak runs a bounded soak instead (bench/README.md). -cluster N also
// starts N nodes as a cluster and runs post-1000-conversations on it too,
// the connections spread over its nodes, reporting the CPU per post of
// all its processes against the node alone's (cluster.go); with -only
// events-1000-conversations it runs the events scenario on a cluster of
// its own instead, every node's CPU counted.
//
// Each scenario first runs the identical request stream against a trivial
// server in its own process (GET answers {"ok":true}; POST answers 201 with
// a body as large as a real kitd answer), then against kitd. The report, a
// Markdown table (and JSON with -json), gives req/s, p50, p99, p99.9 and
// the non-2xx answers by code for both, and the ratios kitd÷trivial, which
// remain comparable across machines where the absolute figures do not.
// Every non-2xx answer is an error, except the mixed scenario's 429s, which
// the limit checks judge; any error or limit violation makes kitbench
// exit 1.
//
// Usage (from the module root; `make bench` does this):
//
//	go run ./bench/cmd/kitbench [-kitd bin/kitd] [-c 64] [-duration 10s] [-rate N/s] [-json out.json]
//	go run ./bench/cmd/kitbench -soak [30m]
//	go run ./bench/cmd/kitbench -cluster 3 [-pprof dir]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
	"github.com/kitd/kitd/bench/ratecheck"
	"github.com/valyala/fasthttp"
)

type options struct {
	kitd          string
	addr          string
	operatorToken string
	concurrency   int
	duration      time.Duration
	warmup        time.Duration
	timeout       time.Duration
	conversations int
	seed          int
	limit         int
	only          string
	jsonPath      string
	matchGet      bool
	keep          bool
	kitdArgs      string
	settle        time.Duration
	rounds        int
	webhooks      int
	trivial       string
	rate          float64 // open-loop arrivals per second; 0: closed loops
	pageLimit     int
	mixed         int // installations of the mixed scenario; 0: none
	mixedChannels int
	events        bool // run the events scenario
	soak          time.Duration
	soakEvery     time.Duration
	soakOut       string
	cluster       int    // nodes of the cluster compared with a node alone; 0: none
	pprofDir      string // -pprof: save each node's CPU profile of the measured windows here
	// clusterEntry is how many of the cluster's nodes, from the first,
	// the write load's connections enter; 0: every node.
	clusterEntry int

	// eventInstallations are the subscribed installations the events
	// scenario spreads its conversations over.
	eventInstallations int
}

func main() {
	if dir := os.Getenv(trivialEnv); dir != "" {
		os.Exit(serveTrivialChild(dir))
	}
	var o options
	flag.StringVar(&o.kitd, "kitd", "bin/kitd", "kitd binary to start (built from ./cmd/kitd into a temporary directory when missing)")
	flag.StringVar(&o.addr, "addr", "", "drive an already running node at host:port instead of starting one (needs -operator-token; start it with --limits off)")
	flag.StringVar(&o.operatorToken, "operator-token", "", "operator token of the node given by -addr")
	flag.IntVar(&o.concurrency, "c", 64, "connections (one closed-loop goroutine each)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per scenario and server")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measured run")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout (exceeding it is an error)")
	flag.IntVar(&o.conversations, "conversations", 1000, "channels the spread write load goes to")
	flag.IntVar(&o.webhooks, "webhooks", 1000, "incoming webhooks the webhook scenario posts to, round-robin over the write channels (0: no webhook scenario)")
	flag.IntVar(&o.seed, "seed", 200, "messages seeded into the channel read by get-history")
	flag.IntVar(&o.limit, "limit", 50, "page size of get-history")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario names to run (default: all)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.BoolVar(&o.matchGet, "match-get-body", false, "trivial GET answers with a body as large as kitd's page instead of {\"ok\":true}")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary data directory and kitd.log")
	flag.IntVar(&o.rounds, "rounds", 1, "split each measured -duration into this many alternating trivial/kitd slices (more rounds: background noise hits both sides alike)")
	flag.DurationVar(&o.settle, "settle", 15*time.Second, "before each trivial run, wait up to this long for kitd to go idle after its previous run (0: do not wait)")
	flag.StringVar(&o.trivial, "trivial", trivialProcess, "where the trivial server runs: process (its own, as kitd) or in-process (inside kitbench, the method of figures before 2026-11-22)")
	flag.StringVar(&o.kitdArgs, "kitd-args", "", "extra space-separated arguments for `kitd serve`")
	flag.Var(rateFlag{&o.rate}, "rate", "open loop: requests due at this fixed rate (N or N/s) instead of closed loops; latency counts from each request's due time")
	flag.IntVar(&o.pageLimit, "page-limit", 20, "page size of get-history-pages, which walks the read channel by cursor (0: no paging scenario)")
	flag.IntVar(&o.mixed, "mixed", 20, "installations of the mixed scenario on a node with --limits spec (0: no mixed scenario)")
	flag.IntVar(&o.mixedChannels, "mixed-channels", 10, "channels per installation in the mixed scenario")
	flag.BoolVar(&o.events, "events", true, "run the events scenario: the cost of a message.posted subscription on POST /messages, and the deliveries' rate and delay, on a node of its own")
	flag.IntVar(&o.eventInstallations, "event-installations", 1, "events scenario: spread the conversations over this many subscribed installations (N Kits, each with its own endpoint on the receiver); 1: the bench Kit's own, as before")
	flag.DurationVar(&o.soak, "soak", 0, "soak for this long (bare -soak: "+defaultSoak.String()+", at most "+maxSoak.String()+") instead of benchmarking: record kitd's RSS, goroutines, open files and Pebble size, fail if any grows without bound")
	flag.DurationVar(&o.soakEvery, "soak-every", 5*time.Second, "soak: time between samples")
	flag.StringVar(&o.soakOut, "soak-out", "soak", "soak: write the samples to this path plus .csv and .json")
	flag.IntVar(&o.cluster, "cluster", 0, "also start a cluster of this many nodes (at least 2) on loopback and run post-<conversations>-conversations on it, the connections spread over its nodes, beside the node alone and the trivial server: CPU per post of all its processes and the ratios cluster÷alone; with -only events-<conversations>-conversations, the events scenario on a cluster of its own instead")
	flag.IntVar(&o.clusterEntry, "cluster-entry", 0, "with -cluster: spread the write load's connections over the first N nodes only (1: every post enters n1, which forwards what the others lead: each role's cost, per node in the report); 0: every node")
	const pprofUsage = "with -cluster or the events scenario: start every node with --pprof and save each one's CPU profile of the measured windows into this directory (alone.pprof, n1.pprof, ...; for the events scenario alone-subscribed-round1.pprof or n1-subscribed-round1.pprof, ...)"
	flag.StringVar(&o.pprofDir, "pprof", "", pprofUsage)
	flag.StringVar(&o.pprofDir, "cluster-pprof", "", "the same as -pprof (its earlier name)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: kitbench [flags]\n\nLoad kitd and a trivial fasthttp server with the same requests; report req/s, p50, p99 and kitd÷trivial ratios.\n\n")
		flag.PrintDefaults()
	}
	flag.CommandLine.Parse(soakArgs(os.Args[1:]))
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	code, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kitbench:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kitbench: "+format+"\n", args...)
}

func run(o options) (int, error) {
	if o.rounds < 1 {
		o.rounds = 1
	}
	if o.concurrency < 1 || o.duration <= 0 {
		return 2, errors.New("-c must be >= 1 and -duration > 0")
	}
	if o.eventInstallations < 1 {
		o.eventInstallations = 1
	}
	if o.eventInstallations > o.conversations {
		return 2, errors.New("-event-installations must be at most -conversations")
	}
	if o.mixed < 0 || o.mixed > 0 && o.mixedChannels < 1 {
		return 2, errors.New("-mixed must be >= 0, and -mixed-channels >= 1")
	}
	if o.pageLimit < 0 || o.pageLimit > 200 {
		return 2, errors.New("-page-limit must be 0 (no paging scenario) to 200 (docs/api.md, Lists)")
	}
	o, err := clusterOptions(o)
	if err != nil {
		return 2, err
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return 1, err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.soak > 0 {
		return runSoak(ctx, o)
	}

	rep := &report{
		StartedAt:   time.Now().UTC(),
		Concurrency: o.concurrency,
		DurationSec: o.duration.Seconds(),
		WarmupSec:   o.warmup.Seconds(),
		Rounds:      o.rounds,
		Rate:        o.rate,
		Machine:     machineInfo(),
		Trivial:     o.trivial,
	}

	nodes := &nodeSet{o: o}
	defer nodes.close()
	node, err := nodes.start(ctx, "off", nil)
	if err != nil {
		return 1, err
	}
	rep.Kitd = node.label

	t0 := time.Now()
	fx, err := node.setup(ctx, setupConfig{
		Conversations: o.conversations,
		Seed:          o.seed,
		Webhooks:      o.webhooks,
		PageLimit:     o.pageLimit,
	})
	if err != nil {
		return 1, fmt.Errorf("setup: %w", err)
	}
	logf("setup done in %v", time.Since(t0).Round(time.Millisecond))
	rep.Setup = map[string]any{
		"conversations":     len(fx.Conversations),
		"seededMessages":    o.seed,
		"postAnswerBytes":   len(fx.SamplePost),
		"historyPageBytes":  len(fx.SampleGet),
		"historyPageLimit":  o.limit,
		"historyPages":      len(fx.HistoryPages),
		"trivialGetMatched": o.matchGet,
	}

	var getBody []byte
	if o.matchGet {
		getBody = fx.SampleGet
	}
	triv, err := startTrivial(o.trivial, fx.SamplePost, getBody)
	if err != nil {
		return 1, err
	}
	defer triv.Close()

	scenarios, err := selectScenarios(buildScenarios(fx, o), o.only)
	if err != nil {
		return 2, err
	}
	var cl *benchCluster
	if o.cluster > 0 && !o.events { // the events scenario starts a cluster of its own
		if cl, err = startCluster(ctx, nodes, o); err != nil {
			return 1, err
		}
		t0 := time.Now()
		cfx, err := cl.nodes[0].setup(ctx, setupConfig{Conversations: o.conversations})
		if err != nil {
			return 1, fmt.Errorf("setup of the cluster: %w", err)
		}
		logf("setup of the cluster (through %s) done in %v; %s", cl.names[0], time.Since(t0).Round(time.Millisecond), cl.leaders(ctx))
		rep.Setup["clusterNodes"] = o.cluster
		for _, csd := range buildScenarios(cfx, o) {
			for i := range scenarios {
				if scenarios[i].sc.Name == csd.sc.Name {
					scenarios[i].cluster = &csd.sc
				}
			}
		}
	}
	for _, sd := range scenarios {
		var sr *scenarioReport
		switch {
		case sd.mixed:
			sr, err = runMixedScenario(ctx, o, nodes, triv, sd)
		case sd.events:
			sr, err = runEventsScenario(ctx, o, nodes, sd)
		default:
			sr, err = runScenario(ctx, o, node, triv, cl, sd)
		}
		if err != nil {
			return 1, err
		}
		if sr == nil {
			continue
		}
		rep.Scenarios = append(rep.Scenarios, sr)
		rep.TotalErrors += sr.errors()
		if sr.Limits != nil {
			rep.LimitViolations += sr.Limits.ViolationsN
		}
	}

	printTable(os.Stdout, rep)
	if o.pprofDir != "" {
		logf("CPU profiles of the measured windows in %s, one a node and window (go tool pprof -top %s)", o.pprofDir, filepath.Join(o.pprofDir, "<file>"))
	}
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, rep); err != nil {
			return 1, err
		}
		logf("wrote %s", o.jsonPath)
	}
	if rep.TotalErrors > 0 || rep.LimitViolations > 0 {
		for _, n := range nodes.started {
			logf("kitd log: %s (pass -keep to keep it)", n.proc.LogPath)
		}
	}
	if rep.TotalErrors > 0 {
		return 1, fmt.Errorf("%d requests failed; see the report above", rep.TotalErrors)
	}
	if rep.LimitViolations > 0 {
		return 1, fmt.Errorf("%d violations of the rate limits of docs/api.md; see the report above", rep.LimitViolations)
	}
	return 0, nil
}

// target is one server a scenario runs against: a process, or the nodes
// of a cluster.
type target struct {
	server string
	addrs  []string // the connections go round-robin over these
	pids   []int    // its processes; none, or a 0: its CPU time is not measured
	sc     loadgen.Scenario
	// nodes are its kitd nodes (named names in profiles), checked before
	// each run and let settle before the trivial server's (and, with a
	// cluster, before every) run.
	nodes []*benchNode
	names []string
}

// watched is what a window samples of the target: its kitd nodes, with
// their /metrics, or else its processes.
func (tg target) watched() []watched {
	if len(tg.nodes) == 0 {
		out := make([]watched, len(tg.pids))
		for i, pid := range tg.pids {
			out[i] = watched{name: tg.server, pid: pid}
		}
		return out
	}
	out := make([]watched, len(tg.nodes))
	for i, n := range tg.nodes {
		out[i] = watched{name: tg.names[i], pid: n.pid(), addr: n.addr, token: n.token}
	}
	return out
}

// runScenario runs one scenario against the trivial server and kitd (and,
// when the scenario has a stream for it, the cluster) in alternating
// rounds and merges each server's rounds.
func runScenario(ctx context.Context, o options, node *benchNode, triv *trivialServer, cl *benchCluster, sd scenarioDef) (*scenarioReport, error) {
	sr := &scenarioReport{Name: sd.sc.Name, Description: sd.desc}
	targets := []target{
		{server: "trivial", addrs: []string{triv.Addr}, pids: []int{triv.Pid}, sc: sd.sc},
		{server: "kitd", addrs: []string{node.addr}, pids: []int{node.pid()}, sc: sd.sc, nodes: []*benchNode{node}, names: []string{"alone"}},
	}
	if cl != nil && sd.cluster != nil {
		targets = append(targets, cl.target(*sd.cluster))
	}
	var kitds []*benchNode
	for _, tg := range targets {
		kitds = append(kitds, tg.nodes...)
	}
	merged := make([]*loadgen.Result, len(targets))
	// cpu is each server's CPU time over the measured windows, while
	// every window could be measured.
	cpu := make([]time.Duration, len(targets))
	cpuOK := make([]bool, len(targets))
	for ti := range cpuOK {
		cpuOK[ti] = true
	}
	// usage is each server's processes' system calls and syncs over the
	// measured windows.
	usage := make([][]procUsage, len(targets))
	slice := o.duration / time.Duration(o.rounds)
	for round := 0; round < o.rounds; round++ {
		warmup := o.warmup
		if round > 0 {
			warmup = min(o.warmup, 200*time.Millisecond)
		}
		for ti, tg := range targets {
			for _, n := range kitds {
				if err := n.check(); err != nil {
					return nil, err
				}
			}
			// The kitd nodes idle while another server runs; their
			// leftover work (flushes, compactions) must not disturb it.
			if tg.server == "trivial" || len(kitds) > 1 {
				settleAll(ctx, kitds)
			}
			roundNote, suffix := "", ""
			if o.rounds > 1 {
				roundNote, suffix = fmt.Sprintf(" (round %d/%d)", round+1, o.rounds), fmt.Sprintf("-round%d", round+1)
			}
			load := fmt.Sprintf("%d connections", o.concurrency)
			if o.rate > 0 {
				load = fmt.Sprintf("%.0f requests/s over %d connections", o.rate, o.concurrency)
			}
			logf("%s on %s%s: %s, %v + %v warm-up", sd.sc.Name, tg.server, roundNote, load, slice, warmup)
			window := measureWindow(ctx, tg.watched(), warmup, slice)
			profiled := func() {}
			if o.pprofDir != "" {
				profiled = profileCPU(ctx, o.pprofDir, tg.nodes, tg.names, suffix, warmup, slice)
			}
			var live loadgen.Live
			cfg := loadgen.Config{
				Addrs:       tg.addrs,
				Concurrency: o.concurrency,
				Duration:    slice,
				Warmup:      warmup,
				Timeout:     o.timeout,
				Live:        &live,
			}
			prog := startProgress(os.Stderr, sd.sc.Name+" on "+tg.server, &live, warmup+slice)
			var res *loadgen.Result
			var err error
			if o.rate > 0 {
				res, err = loadgen.RunOpen(ctx, cfg, o.rate, tg.sc)
			} else {
				res, err = loadgen.Run(ctx, cfg, tg.sc)
			}
			prog.Stop()
			if err != nil {
				return nil, err
			}
			used, ok := window.result()
			profiled()
			cpu[ti] += used
			cpuOK[ti] = cpuOK[ti] && ok
			usage[ti] = addUsage(usage[ti], window.usage())
			st := statsOf(tg.server, res)
			logf("  %.0f req/s, p50 %s, p99 %s, p99.9 %s, %d errors", st.RPS, fmtDur(st.P50Ms), fmtDur(st.P99Ms), fmtDur(st.P999Ms), st.Errors)
			if merged[ti] == nil {
				merged[ti] = res
			} else {
				merged[ti].Add(res)
			}
		}
	}
	stats := make([]*runStats, len(targets))
	for i, tg := range targets {
		st := statsOf(tg.server, merged[i])
		if cpuOK[i] && st.Requests > 0 {
			st.CPUMicrosPerRequest = float64(cpu[i]) / float64(time.Microsecond) / float64(st.Requests)
		}
		st.setIO(usage[i])
		stats[i] = st
	}
	sr.Trivial, sr.Kitd = stats[0], stats[1]
	if len(stats) > 2 {
		sr.Cluster, sr.ClusterEntry = stats[2], cl.entryNames()
	}
	sr.computeRatios()
	return sr, nil
}

// settleAll waits, up to -settle, for every node of nodes to go idle (all
// at once).
func settleAll(ctx context.Context, nodes []*benchNode) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.settle(ctx)
		}()
	}
	wg.Wait()
}

// runMixedScenario starts a second node with the limits of docs/api.md on,
// sets up its installations, runs the mixed backends against the trivial
// server and then against it, and judges kitd's history. It returns nil
// (and says so) when it cannot start a node of its own (-addr).
func runMixedScenario(ctx context.Context, o options, nodes *nodeSet, triv *trivialServer, sd scenarioDef) (*scenarioReport, error) {
	if o.addr != "" {
		logf("%s skipped: it needs a node of its own with --limits spec, and -addr gives a running one", sd.sc.Name)
		return nil, nil
	}
	node, err := nodes.start(ctx, "spec", nil)
	if err != nil {
		return nil, err
	}
	fx, err := node.setup(ctx, setupConfig{Conversations: o.mixed * o.mixedChannels})
	if err != nil {
		return nil, fmt.Errorf("setup of %s: %w", sd.sc.Name, err)
	}
	installs, err := setupMixed(ctx, node.client, fx, o.mixed, o.mixedChannels)
	if err != nil {
		return nil, fmt.Errorf("setup of %s: %w", sd.sc.Name, err)
	}
	sr := &scenarioReport{Name: sd.sc.Name, Description: sd.desc}
	var kitdCalls []ratecheck.Call
	for _, tg := range []target{{server: "trivial", addrs: []string{triv.Addr}, pids: []int{triv.Pid}},
		{server: "kitd", addrs: []string{node.addr}, pids: []int{node.pid()}}} {
		if err := node.check(); err != nil {
			return nil, err
		}
		logf("%s on %s: %d installations, one sequential client each, %v + %v warm-up", sd.sc.Name, tg.server,
			len(installs), o.duration, o.warmup)
		window := measureCPU(ctx, tg.pids, o.warmup, o.duration)
		var live loadgen.Live
		prog := startProgress(os.Stderr, sd.sc.Name+" on "+tg.server, &live, o.warmup+o.duration)
		mr := runMixed(ctx, tg.addrs[0], installs, o.warmup, o.duration, o.timeout, &live)
		prog.Stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := statsOf(tg.server, mr.res)
		if used, ok := window.result(); ok && st.Requests > 0 {
			st.CPUMicrosPerRequest = float64(used) / float64(time.Microsecond) / float64(st.Requests)
		}
		logf("  %.0f req/s, p50 %s, p99 %s, p99.9 %s, %d errors, %d refused (429)", st.RPS, fmtDur(st.P50Ms),
			fmtDur(st.P99Ms), fmtDur(st.P999Ms), st.Errors, mr.res.Status[429])
		if tg.server == "trivial" {
			sr.Trivial = st
		} else {
			sr.Kitd, kitdCalls = st, mr.calls
		}
	}
	sr.computeRatios()
	sr.Limits = checkLimits(kitdCalls, len(installs))
	return sr, nil
}

// scenarioDef is a scenario with its description for the report.
type scenarioDef struct {
	sc   loadgen.Scenario
	desc string
	// mixed marks the mixed scenario, which runs its own clients on a
	// node of its own (sc.Build is unused).
	mixed bool
	// events marks the events scenario, also on a node of its own
	// (events.go).
	events bool
	// cluster is the same request stream on the cluster's set-up (with
	// -cluster); nil: the scenario does not run on the cluster.
	cluster *loadgen.Scenario
}

// postScenario posts "bench message <n>" as the Kit bot, into convs[n % len].
func postScenario(name, botToken string, convs []string) loadgen.Scenario {
	auth := "Bearer " + botToken
	prefixes := make([]string, len(convs))
	for i, c := range convs {
		prefixes[i] = `{"conversationId":"` + c + `","text":"bench message `
	}
	return loadgen.Scenario{Name: name, Build: func(n uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("/api/v1/messages")
		req.Header.Set("Authorization", auth)
		req.Header.SetContentType("application/json")
		var num [20]byte
		req.AppendBodyString(prefixes[n%uint64(len(prefixes))])
		req.AppendBody(strconv.AppendUint(num[:0], n, 10))
		req.AppendBodyString(`"}`)
	}}
}

func buildScenarios(fx *fixture, o options) []scenarioDef {
	auth := "Bearer " + fx.BotToken
	getURI := "/api/v1/conversations/" + fx.ReadConversation + "/messages?limit=" + strconv.Itoa(o.limit)
	defs := []scenarioDef{
		{sc: postScenario("post-1-conversation", fx.BotToken, fx.Conversations[:1]),
			desc: "POST /api/v1/messages as the Kit bot, every message into one channel"},
		{sc: postScenario(fmt.Sprintf("post-%d-conversations", len(fx.Conversations)), fx.BotToken, fx.Conversations),
			desc: fmt.Sprintf("POST /api/v1/messages as the Kit bot, round-robin over %d channels", len(fx.Conversations))},
		{sc: loadgen.Scenario{Name: "get-history", Build: func(n uint64, req *fasthttp.Request) {
			req.SetRequestURI(getURI)
			req.Header.Set("Authorization", auth)
		}}, desc: fmt.Sprintf("GET /api/v1/conversations/{id}/messages?limit=%d on a channel of seeded messages", o.limit)},
	}
	if pages := fx.HistoryPages; len(pages) > 0 {
		defs = append(defs, scenarioDef{sc: loadgen.Scenario{Name: "get-history-pages", Build: func(n uint64, req *fasthttp.Request) {
			req.SetRequestURI(pages[n%uint64(len(pages))])
			req.Header.Set("Authorization", auth)
		}}, desc: fmt.Sprintf("the %d pages of that channel at limit=%d, round-robin, each with the cursor the page before gave", len(pages), o.pageLimit)})
	}
	if n := len(fx.HookPaths); n > 0 {
		defs = append(defs, scenarioDef{sc: webhookScenario(fmt.Sprintf("webhook-%d", n), fx.HookPaths),
			desc: fmt.Sprintf("webhook storm: POST {hooks_url}/v1/{installationId}/{webhookId}/{secret}, round-robin over %d webhooks", n)})
	}
	if o.events {
		subscribers := "a Kit subscribed"
		if o.eventInstallations > 1 {
			subscribers = fmt.Sprintf("%d Kits (installations) subscribed, each in 1/%d of the channels with its own endpoint,", o.eventInstallations, o.eventInstallations)
		}
		where := "a node of its own"
		if o.cluster > 0 {
			where = fmt.Sprintf("a cluster of %d nodes of its own, the connections spread over them", o.cluster)
		}
		defs = append(defs, scenarioDef{sc: loadgen.Scenario{Name: eventsScenarioName(len(fx.Conversations))}, events: true,
			desc: fmt.Sprintf("events, on %s: POST /api/v1/messages round-robin over %d channels of %s to message.posted, delivered to kitbench's https receiver (200 at once), against the same without a subscriber", where, len(fx.Conversations), subscribers)})
	}
	if o.mixed > 0 {
		defs = append(defs, scenarioDef{sc: loadgen.Scenario{Name: "mixed-limits"}, mixed: true,
			desc: fmt.Sprintf("limits ON (--limits spec, second node): %d Kit backends, one sequential client each, cycle post / read history / edit / list over %d channels each, honouring Retry-After", o.mixed, o.mixedChannels)})
	}
	return defs
}

func selectScenarios(all []scenarioDef, only string) ([]scenarioDef, error) {
	if only == "" {
		return all, nil
	}
	var out []scenarioDef
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, sd := range all {
			if sd.sc.Name == name || strings.HasPrefix(sd.sc.Name, name) {
				out, found = append(out, sd), true
				break
			}
		}
		if !found {
			names := make([]string, len(all))
			for i, sd := range all {
				names[i] = sd.sc.Name
			}
			return nil, fmt.Errorf("-only: no scenario %q (have %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}
