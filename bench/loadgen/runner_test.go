package loadgen

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestRunAgainstTrivial(t *testing.T) {
	srv, err := StartTrivial([]byte(`{"message":{"id":"x"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	for _, sc := range []Scenario{
		{Name: "get", Build: func(n uint64, req *fasthttp.Request) {
			req.SetRequestURI("/ok?limit=50")
		}},
		{Name: "post", Build: func(n uint64, req *fasthttp.Request) {
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI("/api/v1/messages")
			req.Header.SetContentType("application/json")
			req.SetBodyString(`{"text":"hi"}`)
		}},
	} {
		res, cfg := runAtLeast(t, Config{
			Addr: srv.Addr, Concurrency: 4, Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond,
		}, sc, 50)
		if res.Errors != 0 || res.OK < 50 {
			t.Fatalf("%s: ok %d errors %d %+v", sc.Name, res.OK, res.Errors, res.FirstErrors)
		}
		if res.Latency.Count() != res.OK {
			t.Errorf("%s: histogram holds %d, ok %d", sc.Name, res.Latency.Count(), res.OK)
		}
		if res.Elapsed != cfg.Duration || res.RPS() <= 0 {
			t.Errorf("%s: elapsed %v rps %v", sc.Name, res.Elapsed, res.RPS())
		}
		p50, p99 := res.Latency.Quantile(0.5), res.Latency.Quantile(0.99)
		if p50 <= 0 || p99 < p50 {
			t.Errorf("%s: p50 %v p99 %v", sc.Name, p50, p99)
		}
		wantSize := float64(len(DefaultGetBody))
		if sc.Name == "post" {
			wantSize = float64(len(`{"message":{"id":"x"}}`))
			if res.Status[201] != res.OK {
				t.Errorf("post: status %v", res.Status)
			}
		}
		if res.MeanRespBytes() != wantSize {
			t.Errorf("%s: mean body %v want %v", sc.Name, res.MeanRespBytes(), wantSize)
		}
	}
}

func TestRunCountsErrorsAndSpreadsRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits [10]atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		p := string(ctx.Path())
		i := int(p[len(p)-1] - '0')
		hits[i].Add(1)
		if i == 3 { // every tenth request fails
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
			ctx.SetBodyString(`{"code":"rate_limited"}`)
			return
		}
		ctx.SetBodyString("{}")
	}}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()

	res, _ := runAtLeast(t, Config{
		Addr: ln.Addr().String(), Concurrency: 3, Duration: 200 * time.Millisecond,
	}, Scenario{Name: "spread", Build: func(n uint64, req *fasthttp.Request) {
		req.SetRequestURI("/c/" + string(rune('0'+n%10)))
	}}, 200)
	if res.Errors == 0 || res.Status[429] != res.Errors || res.Status[200] != res.OK {
		t.Fatalf("errors %d status %v", res.Errors, res.Status)
	}
	frac := float64(res.Errors) / float64(res.Errors+res.OK)
	if frac < 0.08 || frac > 0.12 {
		t.Errorf("error fraction %.3f, want ~0.1", frac)
	}
	if len(res.FirstErrors) == 0 || res.FirstErrors[0].Status != 429 ||
		!strings.Contains(res.FirstErrors[0].Answer, "rate_limited") || res.FirstErrors[0].URI != "/c/3" {
		t.Errorf("samples %+v", res.FirstErrors)
	}
	for i := range hits {
		if hits[i].Load() == 0 {
			t.Errorf("path %d never hit", i)
		}
	}
}

func TestRunTransportErrorAndCancel(t *testing.T) {
	// A closed port: every request is a transport error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Config{Addr: addr, Concurrency: 2, Duration: 5 * time.Second, Timeout: time.Second},
		Scenario{Name: "down", Build: func(n uint64, req *fasthttp.Request) { req.SetRequestURI("/") }})
	if err == nil {
		t.Fatal("want context error")
	}
	if res.OK != 0 || res.Errors == 0 || res.Status[0] != res.Errors || res.FirstErrors[0].Err == "" {
		t.Fatalf("ok %d errors %d status %v samples %+v", res.OK, res.Errors, res.Status, res.FirstErrors)
	}
	if res.Elapsed >= 5*time.Second {
		t.Errorf("elapsed %v after cancel", res.Elapsed)
	}
}

func TestResultAdd(t *testing.T) {
	a := &Result{Elapsed: time.Second, OK: 100, Errors: 1, RespBytes: 1000, Status: map[int]uint64{200: 100, 500: 1}, Latency: &Histogram{}}
	b := &Result{Elapsed: time.Second, OK: 300, RespBytes: 3000, Status: map[int]uint64{200: 300}, Latency: &Histogram{}}
	a.Latency.Record(time.Millisecond)
	b.Latency.Record(3 * time.Millisecond)
	b.Latency.Record(3 * time.Millisecond)
	a.Add(b)
	if a.RPS() != 200 || a.Errors != 1 || a.Status[200] != 400 || a.MeanRespBytes() != 10 || a.Latency.Count() != 3 ||
		a.Latency.Quantile(0.5) != 3*time.Millisecond {
		t.Fatalf("%+v", a)
	}
}

func TestConnectionsSpreadRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		wants []string
	}{
		{"one server takes every connection", Config{Addr: "a:1", Concurrency: 3}, []string{"a:1", "a:1", "a:1"}},
		{"connection w goes to Addrs[w % len]", Config{Addrs: []string{"a:1", "b:2", "c:3"}, Concurrency: 5},
			[]string{"a:1", "b:2", "c:3", "a:1", "b:2"}},
		{"Addrs override Addr", Config{Addr: "x:9", Addrs: []string{"a:1", "b:2"}, Concurrency: 2}, []string{"a:1", "b:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.connAddrs(); strings.Join(got, " ") != strings.Join(tc.wants, " ") {
				t.Fatalf("got %v, want %v", got, tc.wants)
			}
		})
	}
}

// TestRunSpreadsOverAddrs: with Addrs, the connections of a closed loop
// and of an open loop reach every server, each request with its own
// server's Host.
func TestRunSpreadsOverAddrs(t *testing.T) {
	const servers = 3
	var addrs []string
	hits := make([]atomic.Int64, servers)
	for i := range servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Host()) == addr {
				hits[i].Add(1)
			}
			ctx.SetBodyString("{}")
		}}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Shutdown()
		addrs = append(addrs, addr)
	}
	sc := Scenario{Name: "spread", Build: func(n uint64, req *fasthttp.Request) { req.SetRequestURI("/") }}
	cfg := Config{Addrs: addrs, Concurrency: 6, Duration: 200 * time.Millisecond}
	for _, run := range []func() (*Result, error){
		func() (*Result, error) {
			res, _ := runAtLeast(t, cfg, sc, 60)
			return res, nil
		},
		func() (*Result, error) { return RunOpen(context.Background(), cfg, 600, sc) },
	} {
		for i := range hits {
			hits[i].Store(0)
		}
		res, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.Addr != strings.Join(addrs, ",") {
			t.Fatalf("errors %d, addr %q", res.Errors, res.Addr)
		}
		for i := range hits {
			if hits[i].Load() == 0 {
				t.Errorf("server %d never reached (with its own Host)", i)
			}
		}
	}
}

// runAtLeast runs sc in closed loops as cfg says, again with a window
// twice as long whenever a busy machine let the window hold fewer than n
// answers, up to 30 s: these tests are of what Run records, not of how
// many requests this machine serves in 200 ms. It returns the result and
// the configuration of the run that counted.
func runAtLeast(t *testing.T, cfg Config, sc Scenario, n uint64) (*Result, Config) {
	t.Helper()
	for {
		res, err := Run(context.Background(), cfg, sc)
		if err != nil {
			t.Fatal(err)
		}
		got := res.OK + res.Errors
		if got >= n || cfg.Duration >= 30*time.Second {
			return res, cfg
		}
		t.Logf("%s: %d answers in %v, want %d: again with twice the window", sc.Name, got, cfg.Duration, n)
		cfg.Duration *= 2
	}
}
