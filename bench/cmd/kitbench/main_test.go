package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // the fake kitd's --pprof, as kitd's
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for kitd: with KITBENCH_FAKE_KITD=1
// it behaves like `kitd serve` (same flags, same "listening" line, same stop
// on SIGINT) serving fakeKitd.
func TestMain(m *testing.M) {
	if dir := os.Getenv(trivialEnv); dir != "" {
		os.Exit(serveTrivialChild(dir))
	}
	if os.Getenv("KITBENCH_FAKE_KITD") == "1" {
		os.Exit(fakeServe(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeServe(args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "fake kitd: want serve")
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "")
	data := fs.String("data", "./data", "")
	limits := fs.String("limits", "spec", "")
	token := fs.String("operator-token", "", "")
	pprofAddr := fs.String("pprof", "", "")
	clusterBind := fs.String("cluster-bind", "", "as kitd: a member of a cluster prints its gossip address")
	fs.String("node-name", "", "")
	fs.String("cluster-key", "", "")
	fs.String("join", "", "")
	fakeLimits := fs.String("fake-limits", "", "with --limits spec: short-retry-after or generous, a server bug to show")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if (*limits != "off" && *limits != "spec") || *token == "" {
		fmt.Fprintln(os.Stderr, "fake kitd: want --limits off or spec, and --operator-token")
		return 2
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		return 1
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *pprofAddr != "" { // as kitd: net/http/pprof on the default mux
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }()
	}
	fk := newFakeKitd(*token)
	store, err := os.Create(filepath.Join(*data, "messages.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()
	fk.store = store
	if os.Getenv("KITBENCH_FAKE_FAIL") == "get" {
		fk.failGets = true
	}
	if *limits == "spec" {
		fk.limited = true
		switch *fakeLimits {
		case "short-retry-after":
			fk.shortRetry = true
		case "generous":
			fk.write.Capacity = 60 // 10 writes beyond the contract's burst
		}
	}
	srv := &http.Server{Handler: fk}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintln(os.Stderr, "some log line")
	fmt.Printf("kitd listening on %s\n", ln.Addr())
	if *clusterBind != "" {
		fmt.Printf("kitd cluster: gossip on 127.0.0.1:7946, node-to-node on 127.0.0.1:7947\n")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = srv.Close()
	return 0
}

// runReport runs kitbench with o, its JSON report written to a temporary
// file, and returns the report as read back (and its bytes, to show) with
// run's outcome. A run that wrote no report fails the test.
func runReport(t *testing.T, o options) (rep report, data []byte, code int, err error) {
	t.Helper()
	o.jsonPath = filepath.Join(t.TempDir(), "bench.json")
	code, err = run(o)
	data, rerr := os.ReadFile(o.jsonPath)
	if rerr != nil {
		t.Fatalf("run: code %d, %v; no report: %v", code, err, rerr)
	}
	if jerr := json.Unmarshal(data, &rep); jerr != nil {
		t.Fatal(jerr)
	}
	return rep, data, code, err
}

func TestRunEndToEndWithFakeKitd(t *testing.T) {
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	for _, mode := range []string{trivialProcess, trivialInProcess} {
		t.Run("trivial server "+mode, func(t *testing.T) { runEndToEnd(t, mode) })
	}
}

func runEndToEnd(t *testing.T, trivial string) {
	const duration = raceSlowdown * 200 * time.Millisecond
	rep, data, code, err := runReport(t, options{
		kitd: os.Args[0], concurrency: 3, duration: duration, warmup: 20 * time.Millisecond,
		timeout: 5 * time.Second, conversations: 20, seed: 60, limit: 50, pageLimit: 25, rounds: 2,
		settle: time.Second, trivial: trivial,
	})
	if err != nil || code != 0 {
		t.Fatalf("run: code %d, %v", code, err)
	}
	names := []string{"post-1-conversation", "post-20-conversations", "get-history", "get-history-pages"}
	if len(rep.Scenarios) != len(names) || rep.TotalErrors != 0 || rep.Concurrency != 3 || rep.Rounds != 2 || rep.Trivial != trivial {
		t.Fatalf("report %s", data)
	}
	for i, s := range rep.Scenarios {
		if s.Name != names[i] || s.Trivial == nil || s.Kitd == nil {
			t.Fatalf("scenario %d: %+v", i, s)
		}
		if s.Trivial.ElapsedSec != duration.Seconds() || s.Kitd.ElapsedSec != duration.Seconds() {
			t.Errorf("%s: measured %vs and %vs, want %v each", s.Name, s.Trivial.ElapsedSec, s.Kitd.ElapsedSec, duration)
		}
		if s.Trivial.Requests == 0 || s.Kitd.Requests == 0 || s.Ratio.RPS <= 0 || s.Ratio.P99 <= 0 {
			t.Errorf("%s: %+v %+v %+v", s.Name, s.Trivial, s.Kitd, s.Ratio)
		}
		if trivial == trivialInProcess && (s.Trivial.CPUMicrosPerRequest != 0 || s.Ratio.CPU != 0) {
			t.Errorf("%s: CPU of a trivial server inside kitbench reported: %v, ratio %v", s.Name, s.Trivial.CPUMicrosPerRequest, s.Ratio.CPU)
		}
		if strings.HasPrefix(s.Name, "post") {
			// The trivial POST answer mirrors the size of kitd's.
			if d := s.Trivial.RespBytes - s.Kitd.RespBytes; d < -40 || d > 40 {
				t.Errorf("%s: trivial answers %v bytes, kitd %v", s.Name, s.Trivial.RespBytes, s.Kitd.RespBytes)
			}
			if s.Kitd.Status["201"] != s.Kitd.Requests {
				t.Errorf("%s: status %v", s.Name, s.Kitd.Status)
			}
		}
	}
}

// TestRunOpenLoopWithFakeKitd: with -rate, each server gets exactly the
// requests due at that rate in the measured window, and the report says
// the rate.
func TestRunOpenLoopWithFakeKitd(t *testing.T) {
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	rep, data, code, err := runReport(t, options{
		kitd: os.Args[0], concurrency: 4, duration: 400 * time.Millisecond, warmup: 100 * time.Millisecond,
		timeout: 5 * time.Second, conversations: 5, seed: 3, limit: 50, only: "post-5",
		trivial: trivialInProcess, rate: 250,
	})
	if err != nil || code != 0 {
		t.Fatalf("run: code %d, %v", code, err)
	}
	if rep.Rate != 250 || len(rep.Scenarios) != 1 {
		t.Fatalf("report %s", data)
	}
	for _, st := range []*runStats{rep.Scenarios[0].Trivial, rep.Scenarios[0].Kitd} {
		if st.Requests+st.Errors != 100 || st.RPS != 250 {
			t.Errorf("%s: %d answers at %v req/s, want the 100 due at 250/s in 400 ms", st.Server, st.Requests+st.Errors, st.RPS)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	base := options{concurrency: 1, duration: time.Second, mixed: 1, mixedChannels: 1, pageLimit: 20}
	for _, tc := range []struct {
		name string
		bend func(*options)
	}{
		{"no connections", func(o *options) { o.concurrency = 0 }},
		{"no duration", func(o *options) { o.duration = 0 }},
		{"mixed installations without channels", func(o *options) { o.mixedChannels = 0 }},
		{"negative mixed installations", func(o *options) { o.mixed = -1 }},
		{"a page limit above the API's 200", func(o *options) { o.pageLimit = 201 }},
		{"a negative page limit", func(o *options) { o.pageLimit = -1 }},
		{"a cluster of one node", func(o *options) { o.cluster = 1 }},
		{"a cluster and a running node", func(o *options) { o.cluster, o.addr, o.operatorToken = 3, "127.0.0.1:1", "x" }},
		{"a cluster and a soak", func(o *options) { o.cluster, o.soak = 3, time.Minute }},
		{"profiles of a node alone's write load", func(o *options) { o.pprofDir = t.TempDir() }},
	} {
		o := base
		tc.bend(&o)
		if code, err := run(o); code != 2 || err == nil {
			t.Errorf("%s: code %d, %v; want 2 and an error", tc.name, code, err)
		}
	}
}

func TestRunFailsLoudlyOnErrors(t *testing.T) {
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	t.Setenv("KITBENCH_FAKE_FAIL", "get")
	code, err := run(options{
		kitd: os.Args[0], concurrency: 2, duration: 100 * time.Millisecond,
		timeout: 5 * time.Second, conversations: 3, seed: 2, limit: 50, only: "get-history", trivial: trivialInProcess,
	})
	if code != 1 || err == nil || !strings.Contains(err.Error(), "requests failed") {
		t.Fatalf("want failure, got code %d, %v", code, err)
	}
}

// The trivial server's child process serves the given answers and ends
// when kitbench closes it; a mode that does not exist is refused.
func TestTrivialServerProcess(t *testing.T) {
	srv, err := startTrivial(trivialProcess, []byte(`{"posted":true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, want string }{
		{http.MethodPost, `{"posted":true}`},
		{http.MethodGet, `{"ok":true}`},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+srv.Addr+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != tc.want {
			t.Errorf("%s: %q, want %q", tc.method, b, tc.want)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		t.Error("the trivial server still listens after Close")
	}
	if _, err := startTrivial("elsewhere", nil, nil); err == nil {
		t.Error("an unknown -trivial mode was accepted")
	}
}

func TestSelectScenarios(t *testing.T) {
	all := buildScenarios(&fixture{BotToken: "b", Conversations: []string{"a", "b"}, ReadConversation: "r"}, options{limit: 50})
	got, err := selectScenarios(all, "get-history, post-2")
	if err != nil || len(got) != 2 || got[0].sc.Name != "get-history" || got[1].sc.Name != "post-2-conversations" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := selectScenarios(all, "nope"); err == nil {
		t.Fatal("want error for unknown scenario")
	}
}

func TestCPUTimeAndSettle(t *testing.T) {
	if _, ok := cpuTime(os.Getpid()); !ok {
		t.Skip("no /proc")
	}
	// Burn some CPU so the reading moves.
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	if d, _ := cpuTime(os.Getpid()); d <= 0 {
		t.Errorf("cpu time %v (x=%d)", d, x)
	}
	// An idle child settles after one interval.
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	if waited := settle(context.Background(), cmd.Process.Pid, 3*time.Second); waited > time.Second {
		t.Errorf("idle process took %v to settle", waited)
	}
}

// scriptedSampler is a cpuSampler whose timers fire when the test says and
// whose CPU readings are the script's, in order.
type scriptedSampler struct {
	readings []time.Duration
	read     int
	waits    []time.Duration     // the durations asked for, in order
	fire     chan chan time.Time // one per timer, handed to the test
	// ios and scrapes, when set, are the /proc/<pid>/io readings and the
	// nodes' /metrics counters, in order; a reading past the end, a
	// !ok one or a nil scrape fails.
	ios     []ioReading
	scrapes []map[string]uint64
}

type ioReading struct {
	c  ioCounters
	ok bool
}

func newScriptedSampler(readings ...time.Duration) *scriptedSampler {
	return &scriptedSampler{readings: readings, fire: make(chan chan time.Time, 4)}
}

func (s *scriptedSampler) sampler() cpuSampler {
	return cpuSampler{
		cpuTime: func(int) (time.Duration, bool) {
			if s.read >= len(s.readings) {
				return 0, false
			}
			s.read++
			return s.readings[s.read-1], true
		},
		procIO: func(int) (ioCounters, bool) {
			if len(s.ios) == 0 {
				return ioCounters{}, false
			}
			r := s.ios[0]
			s.ios = s.ios[1:]
			return r.c, r.ok
		},
		metrics: func(context.Context, string, string) (map[string]uint64, bool) {
			if len(s.scrapes) == 0 {
				return nil, false
			}
			m := s.scrapes[0]
			s.scrapes = s.scrapes[1:]
			return m, m != nil
		},
		after: func(d time.Duration) <-chan time.Time {
			s.waits = append(s.waits, d)
			c := make(chan time.Time, 1)
			s.fire <- c
			return c
		},
	}
}

// tick fires the next timer the window started.
func (s *scriptedSampler) tick(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.fire:
		c <- time.Time{}
	case <-time.After(10 * time.Second):
		t.Fatal("the window started no timer")
	}
}

func TestMeasureCPU(t *testing.T) {
	t.Run("no process: nothing measured", func(t *testing.T) {
		if used, ok := measureCPU(context.Background(), nil, 0, 10*time.Millisecond).result(); ok || used != 0 {
			t.Fatalf("measured %v, %v", used, ok)
		}
	})
	t.Run("only the window after the warm-up counts", func(t *testing.T) {
		s := newScriptedSampler(700*time.Millisecond, 950*time.Millisecond)
		w := s.sampler().measure(context.Background(), []int{1}, 3*time.Second, 8*time.Second)
		s.tick(t) // warm-up over: first reading
		s.tick(t) // window over: second reading
		used, ok := w.result()
		if !ok || used != 250*time.Millisecond {
			t.Fatalf("measured %v (ok %v), want the 250ms between the two readings", used, ok)
		}
		if len(s.waits) != 2 || s.waits[0] != 3*time.Second || s.waits[1] != 8*time.Second {
			t.Fatalf("waited %v, want the warm-up then the window", s.waits)
		}
	})
	t.Run("a reading that fails measures nothing", func(t *testing.T) {
		s := newScriptedSampler(time.Second) // no second reading
		w := s.sampler().measure(context.Background(), []int{1}, 0, time.Second)
		s.tick(t)
		s.tick(t)
		if _, ok := w.result(); ok {
			t.Fatal("measured without a second reading")
		}
	})
	t.Run("every process of a cluster counts, summed", func(t *testing.T) {
		// Three nodes read at the window's start, then at its end.
		s := newScriptedSampler(100*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond,
			150*time.Millisecond, 260*time.Millisecond, 390*time.Millisecond)
		w := s.sampler().measure(context.Background(), []int{11, 12, 13}, 0, time.Second)
		s.tick(t)
		s.tick(t)
		used, ok := w.result()
		if !ok || used != 200*time.Millisecond {
			t.Fatalf("measured %v (ok %v), want 50+60+90 = 200ms", used, ok)
		}
	})
	t.Run("a process of a cluster that cannot be read measures nothing", func(t *testing.T) {
		s := newScriptedSampler(time.Second, time.Second, time.Second) // the third node's end reading fails
		w := s.sampler().measure(context.Background(), []int{11, 12}, 0, time.Second)
		s.tick(t)
		s.tick(t)
		if _, ok := w.result(); ok {
			t.Fatal("measured without every node's reading")
		}
	})
	t.Run("a pid of 0 (a server inside kitbench) measures nothing", func(t *testing.T) {
		if _, ok := measureCPU(context.Background(), []int{os.Getpid(), 0}, 0, time.Millisecond).result(); ok {
			t.Fatal("measured a process that is not one")
		}
	})
	t.Run("a cancelled context ends the measurement", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		w := measureCPU(ctx, []int{os.Getpid()}, time.Hour, time.Hour)
		cancel()
		if _, ok := w.result(); ok {
			t.Fatal("measured after cancel")
		}
	})
}

func TestCPUTimeGrowsWithWork(t *testing.T) {
	before, ok := cpuTime(os.Getpid())
	if !ok {
		t.Skip("no /proc")
	}
	// Burn CPU until /proc shows it (clock ticks are 10 ms), however long a
	// busy machine takes to give it: the reading must move forward.
	sum := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if now, ok := cpuTime(os.Getpid()); ok && now >= before+50*time.Millisecond {
			return
		}
		for i := range 1 << 20 {
			sum += i * i
		}
	}
	t.Fatalf("a minute of work (%d) did not show as 50ms of CPU time", sum)
}

func TestRatios(t *testing.T) {
	for _, tc := range []struct {
		name            string
		trivial, kitd   runStats
		rps, p99, cpuOf float64
	}{
		{"req/s and p99 are kitd over trivial",
			runStats{RPS: 1000, P99Ms: 2}, runStats{RPS: 400, P99Ms: 5}, 0.4, 2.5, 0},
		{"CPU is trivial's cost per request over kitd's",
			runStats{RPS: 1000, P99Ms: 1, CPUMicrosPerRequest: 10}, runStats{RPS: 400, P99Ms: 1, CPUMicrosPerRequest: 40}, 0.4, 1, 0.25},
		{"an unmeasured CPU gives no CPU ratio",
			runStats{RPS: 1000, P99Ms: 1}, runStats{RPS: 400, P99Ms: 1, CPUMicrosPerRequest: 40}, 0.4, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scenarioReport{Trivial: &tc.trivial, Kitd: &tc.kitd}
			s.computeRatios()
			if s.Ratio.RPS != tc.rps || s.Ratio.P99 != tc.p99 || s.Ratio.CPU != tc.cpuOf {
				t.Fatalf("ratios %+v, want rps %v p99 %v cpu %v", s.Ratio, tc.rps, tc.p99, tc.cpuOf)
			}
		})
	}
}
