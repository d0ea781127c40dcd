// Command kitbench measures a local kitd node against a trivial fasthttp
// handler on the same machine, in the same run, at the same concurrency.
//
// It starts a fresh node (`kitd serve --limits off` on a loopback port with a
// temporary data directory), creates a workspace, a published private Kit,
// an installation, 1,000 channels with the Kit bot in each and a bot token
// through the operator and developer APIs, then drives three scenarios with
// a closed-loop load (one goroutine per connection):
//
//	post-1-conversation    POST /api/v1/messages, all into one channel
//	post-1000-conversations POST /api/v1/messages, round-robin over the channels
//	get-history            GET /api/v1/conversations/{id}/messages?limit=50
//	                       on a channel seeded with 200 messages
//
// Each scenario first runs the identical request stream against a trivial
// server in its own process (GET answers {"ok":true}; POST answers 201 with
// a body as large as a real kitd answer), then against kitd. The report
// gives req/s, p50, p99 for both and the ratios kitd÷trivial, which remain
// comparable across machines where the absolute figures do not. Every
// non-2xx answer is an error; any error makes kitbench exit 1.
//
// Usage (from the module root; `make bench` does this):
//
//	go run ./bench/cmd/kitbench [-kitd bin/kitd] [-c 64] [-duration 10s] [-json out.json]
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
	"syscall"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
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
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: kitbench [flags]\n\nLoad kitd and a trivial fasthttp server with the same requests; report req/s, p50, p99 and kitd÷trivial ratios.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := &report{
		StartedAt:   time.Now().UTC(),
		Concurrency: o.concurrency,
		DurationSec: o.duration.Seconds(),
		WarmupSec:   o.warmup.Seconds(),
		Rounds:      o.rounds,
		Machine:     machineInfo(),
		Trivial:     o.trivial,
	}

	// The node under test.
	addr, token := o.addr, o.operatorToken
	var node *kitdProc
	if addr == "" {
		work, err := os.MkdirTemp("", "kitbench-")
		if err != nil {
			return 1, err
		}
		defer func() {
			if o.keep {
				logf("kept %s", work)
				return
			}
			os.RemoveAll(work)
		}()
		bin := o.kitd
		if _, err := os.Stat(bin); err != nil {
			logf("%s not found; building ./cmd/kitd", bin)
			if bin, err = buildKitd(ctx, work); err != nil {
				return 1, err
			}
		}
		if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
		node, err = startKitd(ctx, bin, work, strings.Fields(o.kitdArgs))
		if err != nil {
			return 1, err
		}
		defer func() {
			if err := node.stop(15 * time.Second); err != nil {
				logf("kitd exit: %v (log: %s)", err, node.LogPath)
			}
		}()
		addr, token = node.Addr, node.Token
		rep.Kitd = bin
		logf("kitd listening on %s (data %s, log %s)", addr, node.DataDir, node.LogPath)
	} else {
		if token == "" {
			return 2, errors.New("-addr needs -operator-token")
		}
		rep.Kitd = "running node at " + addr
	}

	slug := ""
	if node == nil { // a node that may have run the bench before
		slug = "bench-kit-" + randomToken()[:8]
	}
	t0 := time.Now()
	fx, err := setup(ctx, setupConfig{
		Slug:          slug,
		BaseURL:       "http://" + addr,
		OperatorToken: token,
		Conversations: o.conversations,
		Seed:          o.seed,
		Webhooks:      o.webhooks,
		Progress:      func(f string, a ...any) { logf("setup: "+f, a...) },
	})
	if err != nil {
		if node != nil {
			logf("kitd output (tail):\n%s", tail(node.LogPath, 30))
		}
		return 1, fmt.Errorf("setup: %w", err)
	}
	logf("setup done in %v", time.Since(t0).Round(time.Millisecond))
	rep.Setup = map[string]any{
		"conversations":     len(fx.Conversations),
		"seededMessages":    o.seed,
		"postAnswerBytes":   len(fx.SamplePost),
		"historyPageBytes":  len(fx.SampleGet),
		"historyPageLimit":  o.limit,
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

	slice := o.duration / time.Duration(o.rounds)
	scenarios, err := selectScenarios(buildScenarios(fx, o.limit), o.only)
	if err != nil {
		return 2, err
	}
	for _, sd := range scenarios {
		sr := &scenarioReport{Name: sd.sc.Name, Description: sd.desc}
		rep.Scenarios = append(rep.Scenarios, sr)
		kitdPid := 0
		if node != nil {
			kitdPid = node.cmd.Process.Pid
		}
		targets := []struct {
			server, addr string
			pid          int // 0: its CPU time is not measured
		}{{"trivial", triv.Addr, triv.Pid}, {"kitd", addr, kitdPid}}
		merged := make([]*loadgen.Result, len(targets))
		// cpu is each server's CPU time over the measured windows, while
		// every window could be measured.
		cpu := make([]time.Duration, len(targets))
		cpuOK := []bool{true, true}
		for round := 0; round < o.rounds; round++ {
			warmup := o.warmup
			if round > 0 {
				warmup = min(o.warmup, 200*time.Millisecond)
			}
			for ti, target := range targets {
				if node != nil && !node.alive() {
					return 1, fmt.Errorf("kitd exited (%v); its output:\n%s", node.waitErr, tail(node.LogPath, 40))
				}
				// kitd idles while the trivial server runs; only the trivial run
				// can be disturbed by kitd's leftover work (flushes, compactions).
				if node != nil && o.settle > 0 && target.server == "trivial" {
					if waited := settle(ctx, node.cmd.Process.Pid, o.settle); waited >= o.settle {
						logf("kitd still busy after %v; measuring anyway", o.settle)
					}
				}
				roundNote := ""
				if o.rounds > 1 {
					roundNote = fmt.Sprintf(" (round %d/%d)", round+1, o.rounds)
				}
				logf("%s on %s%s: %d connections, %v + %v warm-up", sd.sc.Name, target.server, roundNote,
					o.concurrency, slice, warmup)
				window := measureCPU(ctx, target.pid, warmup, slice)
				res, err := loadgen.Run(ctx, loadgen.Config{
					Addr:        target.addr,
					Concurrency: o.concurrency,
					Duration:    slice,
					Warmup:      warmup,
					Timeout:     o.timeout,
				}, sd.sc)
				if err != nil {
					return 1, err
				}
				used, ok := window.result()
				cpu[ti] += used
				cpuOK[ti] = cpuOK[ti] && ok
				st := statsOf(target.server, res)
				logf("  %.0f req/s, p50 %s, p99 %s, %d errors", st.RPS, fmtDur(st.P50Ms), fmtDur(st.P99Ms), st.Errors)
				if merged[ti] == nil {
					merged[ti] = res
				} else {
					merged[ti].Add(res)
				}
			}
		}
		sr.Trivial, sr.Kitd = statsOf("trivial", merged[0]), statsOf("kitd", merged[1])
		for i, st := range []*runStats{sr.Trivial, sr.Kitd} {
			if cpuOK[i] && st.Requests > 0 {
				st.CPUMicrosPerRequest = float64(cpu[i]) / float64(time.Microsecond) / float64(st.Requests)
			}
		}
		rep.TotalErrors += sr.Trivial.Errors + sr.Kitd.Errors
		sr.computeRatios()
	}

	printTable(os.Stdout, rep)
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, rep); err != nil {
			return 1, err
		}
		logf("wrote %s", o.jsonPath)
	}
	if rep.TotalErrors > 0 {
		if node != nil {
			logf("kitd log: %s (pass -keep to keep it)", node.LogPath)
		}
		return 1, fmt.Errorf("%d requests failed; see the report above", rep.TotalErrors)
	}
	return 0, nil
}

// scenarioDef is a scenario with its description for the report.
type scenarioDef struct {
	sc   loadgen.Scenario
	desc string
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

func buildScenarios(fx *fixture, limit int) []scenarioDef {
	auth := "Bearer " + fx.BotToken
	getURI := "/api/v1/conversations/" + fx.ReadConversation + "/messages?limit=" + strconv.Itoa(limit)
	defs := []scenarioDef{
		{postScenario("post-1-conversation", fx.BotToken, fx.Conversations[:1]),
			"POST /api/v1/messages as the Kit bot, every message into one channel"},
		{postScenario(fmt.Sprintf("post-%d-conversations", len(fx.Conversations)), fx.BotToken, fx.Conversations),
			fmt.Sprintf("POST /api/v1/messages as the Kit bot, round-robin over %d channels", len(fx.Conversations))},
		{loadgen.Scenario{Name: "get-history", Build: func(n uint64, req *fasthttp.Request) {
			req.SetRequestURI(getURI)
			req.Header.Set("Authorization", auth)
		}}, fmt.Sprintf("GET /api/v1/conversations/{id}/messages?limit=%d on a channel of seeded messages", limit)},
	}
	if n := len(fx.HookPaths); n > 0 {
		defs = append(defs, scenarioDef{webhookScenario(fmt.Sprintf("webhook-%d", n), fx.HookPaths),
			fmt.Sprintf("POST {hooks_url}/v1/{installationId}/{webhookId}/{secret}, round-robin over %d webhooks", n)})
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
