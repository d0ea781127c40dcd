package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

func TestWriteMarkdown(t *testing.T) {
	h := &loadgen.Histogram{}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	trivial := statsOf("trivial", &loadgen.Result{Elapsed: time.Second, OK: 1000, Status: map[int]uint64{201: 1000}, Latency: h})
	trivial.CPUMicrosPerRequest = 10
	hk := &loadgen.Histogram{}
	for i := 1; i <= 400; i++ {
		hk.Record(time.Duration(i) * 2 * time.Microsecond)
	}
	kitd := statsOf("kitd", &loadgen.Result{Elapsed: time.Second, OK: 400, Errors: 3,
		Status: map[int]uint64{201: 400, 500: 2, 0: 1}, Latency: hk})
	kitd.CPUMicrosPerRequest = 25
	limited := statsOf("kitd", &loadgen.Result{Elapsed: time.Second, OK: 10, Status: map[int]uint64{200: 10, 429: 4}, Latency: hk})
	s := &scenarioReport{Name: "post-1000-conversations", Trivial: trivial, Kitd: kitd}
	s.computeRatios()
	m := &scenarioReport{Name: "mixed-limits", Trivial: trivial, Kitd: limited}
	m.computeRatios()
	var buf bytes.Buffer
	writeMarkdown(&buf, &report{Scenarios: []*scenarioReport{s, m}})
	want := strings.Join([]string{
		"| scenario | server | req/s | p50 | p99 | p99.9 | errors by code | CPU/req |",
		"|---|---|--:|--:|--:|--:|---|--:|",
		"| `post-1000-conversations` | trivial | 1000 | 501µs | 989µs | 997µs | 0 | 10.0 µs |",
		"|  | kitd | 400 | 400µs | 793µs | 800µs | !! 500×2 transport×1 | 25.0 µs |",
		"| | kitd÷trivial | 0.400 | 0.80x | 0.80x | 0.80x | | 0.400 |",
		"| `mixed-limits` | trivial | 1000 | 501µs | 989µs | 997µs | 0 | 10.0 µs |",
		"|  | kitd | 10 | 400µs | 793µs | 800µs | 429×4 | - |",
		"| | kitd÷trivial | 0.010 | 0.80x | 0.80x | 0.80x | | - |",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSoakArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-soak", "-soak=10m0s"},
		{"-soak -rate 500", "-soak=10m0s -rate 500"},
		{"--soak -c 8", "-soak=10m0s -c 8"},
		{"-soak 30m", "-soak 30m"},
		{"-soak=2m -c 8", "-soak=2m -c 8"},
		{"-c 8 -- -soak", "-c 8 -- -soak"},
	} {
		if got := strings.Join(soakArgs(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRateFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // 0: refused
	}{{"2000", 2000}, {"2000/s", 2000}, {"0.5/s", 0.5}, {"0", 0}, {"-3", 0}, {"fast", 0}, {"NaN", 0}, {"2000/m", 0}} {
		var v float64
		err := rateFlag{&v}.Set(tc.in)
		if (err == nil) != (tc.want > 0) || v != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, v, err, tc.want)
		}
	}
}

func TestJudgeSoak(t *testing.T) {
	// Pebble grows with every write; RSS leaks 2 MiB a sample from the
	// start.
	var samples []soakSample
	for i := 0; i <= 60; i++ {
		samples = append(samples, soakSample{Seconds: float64(5 * i), RSSBytes: int64(100<<20 + 2*i<<20), Goroutines: 40,
			Threads: 9, OpenFiles: 30, PebbleBytes: int64(1<<20 + 5000*1000*i), OK: uint64(1000 * i)})
	}
	grew := map[string]bool{}
	for _, s := range judgeSoak(samples, 0.5) {
		grew[s.Name] = s.Verdict.Grows
	}
	want := map[string]bool{"RSS": true, "goroutines": false, "threads": false, "open files": false, "Pebble bytes per write": false}
	for k, v := range want {
		if g, ok := grew[k]; !ok || g != v {
			t.Errorf("%s: grows %v (judged %v), want %v", k, g, ok, v)
		}
	}
	// Without writes, Pebble's size itself is judged: here it grows.
	for _, s := range judgeSoak(samples, 0) {
		if s.Name == "Pebble size" && !s.Verdict.Grows {
			t.Errorf("a Pebble directory growing under reads only was judged bounded: %+v", s.Verdict)
		}
	}
}
