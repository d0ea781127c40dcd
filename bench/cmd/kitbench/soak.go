package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/bench/loadgen"
	"github.com/kitd/kitd/bench/soak"
	"github.com/kitd/kitd/internal/history"
)

const (
	// defaultSoak is the length of a bare -soak: long enough for memtables
	// to flush and compactions to run many times over at the soak's rate.
	defaultSoak = 10 * time.Minute
	// maxSoak bounds -soak, so that a soak always ends.
	maxSoak = 24 * time.Hour
	// defaultSoakRate is the soak's arrival rate without -rate: a steady
	// load well below saturation, so the soak watches for leaks rather
	// than queues, and fills a few hundred MB of disk in 10 minutes, not
	// tens of GB as a closed loop would.
	defaultSoakRate = 1000
)

// rateFlag is -rate: a positive number of requests per second, written
// N or N/s.
type rateFlag struct{ v *float64 }

func (f rateFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'f', -1, 64) + "/s"
}

func (f rateFlag) Set(s string) error {
	r, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || !(r > 0) || r > 1e7 {
		return errors.New("want a positive number of requests per second, e.g. 2000/s")
	}
	*f.v = r
	return nil
}

// soakArgs turns a bare -soak (last, or followed by another flag) into
// -soak=<defaultSoak>, so that both `-soak` and `-soak 30m` work.
func soakArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-soak" || a == "--soak") && (i+1 == len(args) || strings.HasPrefix(args[i+1], "-")) {
			a = "-soak=" + defaultSoak.String()
		}
		out = append(out, a)
	}
	return out
}

// soakSample is one sample of the soak series.
type soakSample struct {
	Seconds     float64 `json:"t"`
	RSSBytes    int64   `json:"rssBytes"`
	Goroutines  int     `json:"goroutines"` // -1: the pprof endpoint did not answer
	Threads     int     `json:"threads"`
	OpenFiles   int     `json:"openFiles"`
	PebbleBytes int64   `json:"pebbleBytes"`
	OK          uint64  `json:"ok"`
	Errors      uint64  `json:"errors"`
	// The history cache's series of GET /metrics; nil when kitd did not
	// answer them.
	Cache *soak.HistoryCache `json:"historyCache,omitempty"`
}

// soakSeries is one judged series of the soak.
type soakSeries struct {
	Name    string       `json:"name"`
	Unit    string       `json:"unit"`
	Rule    soak.Rule    `json:"rule"`
	First   float64      `json:"first"`
	Last    float64      `json:"last"`
	Verdict soak.Verdict `json:"verdict"`
}

// The growth rules of the soak (bench/README.md, "Soak"): the rise allowed
// over the second half is the larger of Abs and Rel × the half's mean.
var (
	rssRule        = soak.Rule{Rel: 0.10, Abs: 32 << 20, MinPoints: 6}
	goroutinesRule = soak.Rule{Rel: 0.10, Abs: 50, MinPoints: 6}
	threadsRule    = soak.Rule{Rel: 0.10, Abs: 8, MinPoints: 6}
	openFilesRule  = soak.Rule{Rel: 0.10, Abs: 16, MinPoints: 6}
	// Pebble's directory must grow under writes, by what they store; what
	// must stay bounded is its size per acknowledged write (space
	// amplification, forgotten files). Without writes, its size itself.
	pebblePerWriteRule = soak.Rule{Rel: 0.25, Abs: 64, MinPoints: 6}
	pebbleRule         = soak.Rule{Rel: 0.10, Abs: 64 << 20, MinPoints: 6}
)

// judgeSoak builds and judges the series of samples; writeShare is the
// share of the load's successes that are writes.
func judgeSoak(samples []soakSample, writeShare float64) []soakSeries {
	series := func(name, unit string, rule soak.Rule, v func(soakSample) (float64, bool)) soakSeries {
		var ps []soak.Point
		for _, s := range samples {
			if x, ok := v(s); ok {
				ps = append(ps, soak.Point{T: s.Seconds, V: x})
			}
		}
		out := soakSeries{Name: name, Unit: unit, Rule: rule, Verdict: rule.Judge(ps)}
		if len(ps) > 0 {
			out.First, out.Last = ps[0].V, ps[len(ps)-1].V
		}
		return out
	}
	out := []soakSeries{
		series("RSS", "bytes", rssRule, func(s soakSample) (float64, bool) { return float64(s.RSSBytes), true }),
		series("goroutines", "", goroutinesRule, func(s soakSample) (float64, bool) { return float64(s.Goroutines), s.Goroutines >= 0 }),
		series("threads", "", threadsRule, func(s soakSample) (float64, bool) { return float64(s.Threads), true }),
		series("open files", "", openFilesRule, func(s soakSample) (float64, bool) { return float64(s.OpenFiles), true }),
	}
	if writeShare > 0 {
		out = append(out, series("Pebble bytes per write", "bytes", pebblePerWriteRule, func(s soakSample) (float64, bool) {
			w := float64(s.OK) * writeShare
			return float64(s.PebbleBytes) / w, w >= 1
		}))
	} else {
		out = append(out, series("Pebble size", "bytes", pebbleRule, func(s soakSample) (float64, bool) { return float64(s.PebbleBytes), true }))
	}
	return out
}

// rotation interleaves scenarios request by request; writeShare is the
// share of them that write (posts and webhook posts).
func rotation(defs []scenarioDef) (sc loadgen.Scenario, writeShare float64) {
	names := make([]string, len(defs))
	writes := 0
	for i, d := range defs {
		names[i] = d.sc.Name
		if strings.HasPrefix(d.sc.Name, "post-") || strings.HasPrefix(d.sc.Name, "webhook-") {
			writes++
		}
	}
	k := uint64(len(defs))
	return loadgen.Scenario{Name: strings.Join(names, "+"), Build: func(n uint64, req *fasthttp.Request) {
		defs[n%k].sc.Build(n/k, req)
	}}, float64(writes) / float64(k)
}

// historyManyScenario reads the newest page of every write channel in
// turn, so that the windows of many conversations fill and the node's
// --cache-bytes bound has to evict (the get-history scenario reads one
// channel only).
func historyManyScenario(fx *fixture, limit int) scenarioDef {
	uris := make([]string, len(fx.Conversations))
	for i, c := range fx.Conversations {
		uris[i] = "/api/v1/conversations/" + c + "/messages?limit=" + strconv.Itoa(limit)
	}
	auth := "Bearer " + fx.BotToken
	return scenarioDef{sc: loadgen.Scenario{Name: fmt.Sprintf("get-history-%d-conversations", len(uris)), Build: func(n uint64, req *fasthttp.Request) {
		req.SetRequestURI(uris[n%uint64(len(uris))])
		req.Header.Set("Authorization", auth)
	}}, desc: fmt.Sprintf("GET /api/v1/conversations/{id}/messages?limit=%d, round-robin over the %d write channels", limit, len(uris))}
}

// cacheSlack is how far above --cache-bytes a sample of the history cache
// may be: kitd counts a window's growth before it evicts, and a window
// grows by at most its own bound at once.
const cacheSlack = history.DefaultMaxWindowBytes

// judgeCache judges the history cache's samples against their bound; nil
// when kitd never answered them.
func judgeCache(samples []soakSample) *soak.CacheVerdict {
	var cs []soak.HistoryCache
	for _, s := range samples {
		if s.Cache != nil {
			cs = append(cs, *s.Cache)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	v := soak.JudgeCache(cs, cacheSlack)
	return &v
}

// freeLoopbackAddr finds a free loopback port for kitd's --pprof.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// sampler records a soakSample every interval until stopped.
type sampler struct {
	node      *benchNode
	pprofAddr string
	live      *loadgen.Live
	every     time.Duration
	client    *http.Client
	start     time.Time
	stopCh    chan struct{}
	done      sync.WaitGroup
	samples   []soakSample
	err       error
	noCache   bool // /metrics did not answer the history cache's series
}

func startSampler(ctx context.Context, node *benchNode, pprofAddr string, every time.Duration, live *loadgen.Live) *sampler {
	s := &sampler{node: node, pprofAddr: pprofAddr, live: live, every: every, start: time.Now(),
		client: &http.Client{Timeout: 10 * time.Second}, stopCh: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for s.sample(ctx) {
			select {
			case <-tick.C:
			case <-s.stopCh:
				// No sample after the load: its connections are closing, a
				// different regime that would bend the fit.
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// sample records one sample; false when kitd can no longer be sampled.
func (s *sampler) sample(ctx context.Context) bool {
	p, err := soak.ReadProcess(s.node.pid())
	if err != nil {
		s.err = fmt.Errorf("reading kitd's /proc: %w", err)
		return false
	}
	size, err := soak.DirSize(s.node.proc.DataDir)
	if err != nil {
		s.err = fmt.Errorf("sizing kitd's data directory: %w", err)
		return false
	}
	g, err := soak.Goroutines(ctx, s.client, s.pprofAddr)
	if err != nil {
		if s.err == nil {
			logf("goroutines unknown (kitd --pprof %s: %v); threads are recorded", s.pprofAddr, err)
		}
		g = -1
	}
	var cache *soak.HistoryCache
	if !s.noCache {
		c, err := soak.ReadHistoryCache(ctx, s.client, s.node.addr, s.node.token)
		if err != nil {
			logf("history cache unknown (%v); the soak goes on without it", err)
			s.noCache = true
		} else {
			cache = &c
		}
	}
	ok, errs := s.live.Counts()
	s.samples = append(s.samples, soakSample{Seconds: time.Since(s.start).Seconds(), RSSBytes: p.RSSBytes, Goroutines: g,
		Threads: p.Threads, OpenFiles: p.OpenFiles, PebbleBytes: size, OK: ok, Errors: errs, Cache: cache})
	return true
}

func (s *sampler) stop() ([]soakSample, error) {
	close(s.stopCh)
	s.done.Wait()
	return s.samples, s.err
}

// soakReport is the soak's JSON output.
type soakReport struct {
	StartedAt   time.Time         `json:"startedAt"`
	DurationSec float64           `json:"durationSeconds"`
	Rate        float64           `json:"rate"`
	Scenario    string            `json:"scenario"`
	Machine     map[string]string `json:"machine"`
	Load        *runStats         `json:"load"`
	Series      []soakSeries      `json:"series"`
	Samples     []soakSample      `json:"samples"`
	Grew        []string          `json:"grew"`
	// HistoryCache judges kitd_history_cache_bytes against its bound.
	HistoryCache *soak.CacheVerdict `json:"historyCacheBound,omitempty"`
}

// runSoak starts kitd with its pprof endpoint, sets up as the bench does,
// and drives the selected scenarios in rotation in an open loop for
// -soak while sampling kitd; then it writes the samples and judges them.
func runSoak(ctx context.Context, o options) (int, error) {
	if o.addr != "" {
		return 2, errors.New("-soak needs a kitd of its own to read /proc of, not -addr")
	}
	if o.soak > maxSoak {
		return 2, fmt.Errorf("-soak %v: at most %v", o.soak, maxSoak)
	}
	if o.soakEvery <= 0 {
		return 2, errors.New("-soak-every must be positive")
	}
	rate := o.rate
	if rate == 0 {
		rate = defaultSoakRate
	}
	pprofAddr, err := freeLoopbackAddr()
	if err != nil {
		return 1, err
	}
	nodes := &nodeSet{o: o}
	defer nodes.close()
	node, err := nodes.start(ctx, "off", []string{"--pprof", pprofAddr})
	if err != nil {
		return 1, err
	}
	fx, err := node.setup(ctx, setupConfig{Conversations: o.conversations, Seed: o.seed, Webhooks: o.webhooks, PageLimit: o.pageLimit})
	if err != nil {
		return 1, fmt.Errorf("setup: %w", err)
	}
	o.mixed = 0 // the mixed scenario is limited by design: nothing to soak
	// The events scenario runs on a node of its own, not as requests of
	// the rotation (it has no Build: it made a bare -soak panic).
	o.events = false
	defs, err := selectScenarios(append(buildScenarios(fx, o), historyManyScenario(fx, o.limit)), o.only)
	if err != nil {
		return 2, err
	}
	sc, writeShare := rotation(defs)
	logf("soak: %s at %.0f requests/s over %d connections for %v, a sample every %v", sc.Name, rate, o.concurrency, o.soak, o.soakEvery)

	var live loadgen.Live
	smp := startSampler(ctx, node, pprofAddr, o.soakEvery, &live)
	prog := startProgress(os.Stderr, "soak", &live, o.soak)
	res, runErr := loadgen.RunOpen(ctx, loadgen.Config{Addr: node.addr, Concurrency: o.concurrency, Duration: o.soak,
		Timeout: o.timeout, Live: &live}, rate, sc)
	prog.Stop()
	samples, smpErr := smp.stop()
	if runErr != nil {
		return 1, runErr
	}
	if err := node.check(); err != nil {
		return 1, err
	}
	if smpErr != nil {
		return 1, smpErr
	}

	rep := &soakReport{StartedAt: smp.start.UTC(), DurationSec: o.soak.Seconds(), Rate: rate, Scenario: sc.Name,
		Machine: machineInfo(), Load: statsOf("kitd", res), Series: judgeSoak(samples, writeShare), Samples: samples,
		HistoryCache: judgeCache(samples)}
	for _, s := range rep.Series {
		if s.Verdict.Grows {
			rep.Grew = append(rep.Grew, s.Name)
		}
	}
	if err := writeSoakFiles(o.soakOut, rep); err != nil {
		return 1, err
	}
	logf("wrote %s.csv and %s.json", o.soakOut, o.soakOut)
	printSoak(os.Stdout, rep)
	if res.Errors > 0 {
		return 1, fmt.Errorf("%d requests failed during the soak", res.Errors)
	}
	if c := rep.HistoryCache; c != nil && c.Over > 0 {
		return 1, fmt.Errorf("kitd's history cache went beyond --cache-bytes: %s", c.Why)
	}
	if len(rep.Grew) > 0 {
		return 1, fmt.Errorf("kitd's %s grew without bound during the soak (rule: bench/README.md, \"Soak\")", strings.Join(rep.Grew, ", "))
	}
	return 0, nil
}

func writeSoakFiles(prefix string, rep *soakReport) error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"seconds", "rss_bytes", "goroutines", "threads", "open_files", "pebble_bytes", "ok", "errors",
		"cache_bytes", "cache_limit_bytes", "cache_windows", "cache_hits", "cache_misses", "cache_evictions"})
	for _, s := range rep.Samples {
		// -1: kitd did not answer the history cache's series.
		c := soak.HistoryCache{Bytes: -1, Limit: -1, Windows: -1, Hits: -1, Misses: -1, Evictions: -1}
		if s.Cache != nil {
			c = *s.Cache
		}
		_ = w.Write([]string{strconv.FormatFloat(s.Seconds, 'f', 1, 64), strconv.FormatInt(s.RSSBytes, 10),
			strconv.Itoa(s.Goroutines), strconv.Itoa(s.Threads), strconv.Itoa(s.OpenFiles),
			strconv.FormatInt(s.PebbleBytes, 10), strconv.FormatUint(s.OK, 10), strconv.FormatUint(s.Errors, 10),
			strconv.FormatInt(c.Bytes, 10), strconv.FormatInt(c.Limit, 10), strconv.FormatInt(c.Windows, 10),
			strconv.FormatInt(c.Hits, 10), strconv.FormatInt(c.Misses, 10), strconv.FormatInt(c.Evictions, 10)})
	}
	w.Flush()
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(prefix+".csv", []byte(b.String()), 0o644),
		os.WriteFile(prefix+".json", append(data, '\n'), 0o644))
}

// printSoak writes the soak's verdict as a Markdown table.
func printSoak(w io.Writer, rep *soakReport) {
	fmt.Fprintf(w, "\nkitbench soak: %s at %.0f requests/s for %v, %d samples; %.0f req/s served, p99 %s, p99.9 %s, %d errors\n\n",
		rep.Scenario, rep.Rate, time.Duration(rep.DurationSec*float64(time.Second)), len(rep.Samples),
		rep.Load.RPS, fmtDur(rep.Load.P99Ms), fmtDur(rep.Load.P999Ms), rep.Load.Errors)
	fmt.Fprintln(w, "| series | first | last | fitted rise, 2nd half | allowed | verdict |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|---|")
	for _, s := range rep.Series {
		verdict := "bounded"
		switch {
		case s.Verdict.Grows:
			verdict = "!! GROWS"
		case s.Verdict.Mean == 0 && s.Verdict.Rise == 0:
			verdict = s.Verdict.Why
		}
		allowed := max(s.Rule.Abs, s.Rule.Rel*s.Verdict.Mean)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", s.Name, fmtQty(s.First, s.Unit), fmtQty(s.Last, s.Unit),
			fmtQty(s.Verdict.Rise, s.Unit), fmtQty(allowed, s.Unit), verdict)
	}
	fmt.Fprintln(w)
	if c := rep.HistoryCache; c != nil {
		var last *soak.HistoryCache
		for _, s := range rep.Samples {
			if s.Cache != nil {
				last = s.Cache
			}
		}
		fmt.Fprintf(w, "history cache: at most %s of the %s bound (%d samples, %d beyond it); at the end %d windows, %d hits, %d misses, %d evictions\n\n",
			fmtQty(float64(c.MaxBytes), "bytes"), fmtQty(float64(c.Limit), "bytes"), c.Samples, c.Over,
			last.Windows, last.Hits, last.Misses, last.Evictions)
	}
}

// fmtQty renders a value of a series: bytes in MiB from 1 MiB up.
func fmtQty(v float64, unit string) string {
	if unit == "bytes" && (v >= 1<<20 || v <= -(1<<20)) {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	if unit == "bytes" {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.0f", v)
}
