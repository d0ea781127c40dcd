package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Scenario is one request shape. Build fills req for the n-th request of a
// run (n counts from 0 across all workers of that run, so a scenario can
// spread requests over many resources); it sets method, request URI (path
// and query only), headers and body. The runner sets the Host header itself,
// so the same Scenario can be replayed against several servers.
type Scenario struct {
	// Name identifies the scenario in reports, e.g. "post-1-conversation".
	Name string
	// Build prepares request number n. req has been reset before the call.
	Build func(n uint64, req *fasthttp.Request)
	// Answered, when set, is told when request number n got its 2xx answer
	// (warm-up included), for measures that start at the answer, such as
	// the time until an event the request caused arrives. It is called
	// from every connection's goroutine at once.
	Answered func(n uint64, at time.Time)
}

// Config sets how hard and how long a run drives one server.
type Config struct {
	// Addr is the server's host:port.
	Addr string
	// Addrs, when set, are several servers that serve the same requests
	// (the nodes of a cluster): connection w goes to Addrs[w % len(Addrs)],
	// and Addr is not used.
	Addrs []string
	// Concurrency is the number of connections, each driven by its own
	// goroutine in a closed loop (default 64).
	Concurrency int
	// Duration is the measured window (default 10 s).
	Duration time.Duration
	// Warmup runs the same load before the measured window without
	// recording it (default 0: none).
	Warmup time.Duration
	// Timeout bounds one request (default 10 s); a request that exceeds it
	// counts as an error.
	Timeout time.Duration
	// Live, when set, counts every answer as it arrives (warm-up included),
	// for a progress line.
	Live *Live
}

// connAddrs returns the server of each of the run's connections: Addrs
// round-robin, or Addr for all.
func (c *Config) connAddrs() []string {
	addrs := c.Addrs
	if len(addrs) == 0 {
		addrs = []string{c.Addr}
	}
	out := make([]string, c.Concurrency)
	for w := range out {
		out[w] = addrs[w%len(addrs)]
	}
	return out
}

func (c *Config) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
}

// Sample is one failed request kept for the report.
type Sample struct {
	Method string `json:"method"`
	URI    string `json:"uri"`
	Body   string `json:"requestBody,omitempty"`
	Status int    `json:"status,omitempty"` // 0: transport error
	Answer string `json:"response,omitempty"`
	Err    string `json:"error,omitempty"`
}

// Result is what one run measured. Latencies are those of successful (2xx)
// requests only, so that fast error answers cannot flatter the figures.
type Result struct {
	Scenario string
	Addr     string
	// Elapsed is the measured window actually covered.
	Elapsed time.Duration
	// OK counts 2xx answers completed inside the measured window.
	OK uint64
	// Errors counts non-2xx answers and transport failures in the window.
	Errors uint64
	// Status counts answers by status code (0 = transport error).
	Status map[int]uint64
	// FirstErrors holds up to a few failed requests with their answers.
	FirstErrors []Sample
	// RespBytes is the total response body size of the 2xx answers.
	RespBytes uint64
	// Latency holds the latency of every 2xx answer in the window.
	Latency *Histogram
}

// RPS returns successful requests per second over the measured window.
func (r *Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// MeanRespBytes returns the mean body size of the 2xx answers.
func (r *Result) MeanRespBytes() float64 {
	if r.OK == 0 {
		return 0
	}
	return float64(r.RespBytes) / float64(r.OK)
}

// maxSamples bounds Result.FirstErrors.
const maxSamples = 5

type workerResult struct {
	hist      Histogram
	ok, errs  uint64
	respBytes uint64
	status    map[int]uint64
	samples   []Sample
}

// Run drives cfg.Addr (or cfg.Addrs) with scenario s: cfg.Concurrency
// goroutines, each with its own connection, send requests back to back for
// cfg.Warmup plus cfg.Duration; only requests started inside the measured
// window (after the warmup) are counted. Cancelling ctx ends the run early; Run then reports
// what it measured so far together with ctx's error.
func Run(ctx context.Context, cfg Config, s Scenario) (*Result, error) {
	hcs, err := newClients(&cfg, s)
	if err != nil {
		return nil, err
	}
	defer closeIdle(hcs)

	var counter sharedCounter
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	stopAt := measureFrom.Add(cfg.Duration)

	results := make([]*workerResult, cfg.Concurrency)
	var wg sync.WaitGroup
	for w := range results {
		wr := newWorkerResult()
		results[w] = wr
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := newExchange(hcs[w], cfg, s)
			defer x.release()
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(stopAt) {
					return
				}
				x.do(counter.next(), wr, t0, !t0.Before(measureFrom), wallClock{})
			}
		}()
	}
	wg.Wait()
	return collect(cfg, s, results, time.Now(), measureFrom, stopAt), ctx.Err()
}

// newClients applies cfg's defaults and returns the client of each worker
// of one run (one per server, shared by the workers sending to it): one
// connection per worker, no retries.
func newClients(cfg *Config, s Scenario) ([]*fasthttp.HostClient, error) {
	cfg.defaults()
	if s.Build == nil {
		return nil, errors.New("loadgen: scenario without Build")
	}
	byAddr := map[string]*fasthttp.HostClient{}
	conns := cfg.connAddrs()
	out := make([]*fasthttp.HostClient, len(conns))
	for w, addr := range conns {
		if addr == "" {
			return nil, errors.New("loadgen: empty address")
		}
		if byAddr[addr] == nil {
			byAddr[addr] = &fasthttp.HostClient{
				Addr:                      addr,
				Name:                      "kitbench",
				MaxConns:                  cfg.Concurrency,
				MaxConnWaitTimeout:        cfg.Timeout,
				MaxIdemponentCallAttempts: 1, // a failure is an error, never retried
				ReadTimeout:               cfg.Timeout,
				WriteTimeout:              cfg.Timeout,
				MaxIdleConnDuration:       time.Minute,
				ReadBufferSize:            16 << 10,
				MaxResponseBodySize:       64 << 20,
			}
		}
		out[w] = byAddr[addr]
	}
	return out, nil
}

// closeIdle closes the idle connections of a run's clients.
func closeIdle(hcs []*fasthttp.HostClient) {
	for _, hc := range hcs {
		hc.CloseIdleConnections()
	}
}

// collect merges the workers' results of a run that ended at end.
func collect(cfg Config, s Scenario, results []*workerResult, end, measureFrom, stopAt time.Time) *Result {
	addr := cfg.Addr
	if len(cfg.Addrs) > 0 {
		addr = strings.Join(cfg.Addrs, ",")
	}
	res := &Result{
		Scenario: s.Name,
		Addr:     addr,
		Status:   make(map[int]uint64),
		Latency:  &Histogram{},
	}
	for _, wr := range results {
		res.Latency.Merge(&wr.hist)
		res.OK += wr.ok
		res.Errors += wr.errs
		res.RespBytes += wr.respBytes
		for code, n := range wr.status {
			res.Status[code] += n
		}
		for _, smp := range wr.samples {
			if len(res.FirstErrors) < maxSamples {
				res.FirstErrors = append(res.FirstErrors, smp)
			}
		}
	}
	switch {
	case end.Before(measureFrom):
		res.Elapsed = 0
	case end.Before(stopAt):
		res.Elapsed = end.Sub(measureFrom)
	default:
		res.Elapsed = cfg.Duration
	}
	return res
}

func newWorkerResult() *workerResult { return &workerResult{status: make(map[int]uint64)} }

// exchange is one worker's request and response, reused for every request.
type exchange struct {
	hc   *fasthttp.HostClient
	cfg  Config
	s    Scenario
	req  *fasthttp.Request
	resp *fasthttp.Response
}

func newExchange(hc *fasthttp.HostClient, cfg Config, s Scenario) *exchange {
	return &exchange{hc: hc, cfg: cfg, s: s, req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
}

func (x *exchange) release() {
	fasthttp.ReleaseRequest(x.req)
	fasthttp.ReleaseResponse(x.resp)
}

// do sends request n and, when measured, records its outcome in wr with the
// latency counted from since: the send time in a closed loop, the time the
// request was due in an open one (so that time spent queued behind slow
// answers counts, which a closed loop hides).
func (x *exchange) do(n uint64, wr *workerResult, since time.Time, measured bool, clk Clock) {
	req, resp := x.req, x.resp
	req.Reset()
	resp.Reset()
	x.s.Build(n, req)
	req.Header.SetHost(x.hc.Addr)
	err := x.hc.DoTimeout(req, resp, x.cfg.Timeout)
	now := clk.Now()
	lat := now.Sub(since)
	code := resp.StatusCode()
	if err != nil {
		code = 0
	}
	ok := err == nil && code >= 200 && code < 300
	x.cfg.Live.Count(ok)
	if ok && x.s.Answered != nil {
		x.s.Answered(n, now)
	}
	if !measured {
		return
	}
	wr.status[code]++
	if ok {
		wr.ok++
		wr.respBytes += uint64(len(resp.Body()))
		wr.hist.Record(lat)
		return
	}
	wr.errs++
	if len(wr.samples) < maxSamples {
		smp := Sample{
			Method: string(req.Header.Method()),
			URI:    string(req.RequestURI()),
			Body:   truncate(string(req.Body()), 512),
			Status: code,
		}
		if err != nil {
			smp.Err = err.Error()
		} else {
			smp.Answer = truncate(string(resp.Body()), 1024)
		}
		wr.samples = append(wr.samples, smp)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// Add folds o, a later run of the same scenario against the same server, into
// r: counts, status codes and latencies add up, and so do the measured
// windows, so RPS stays the rate over all of them.
func (r *Result) Add(o *Result) {
	r.Elapsed += o.Elapsed
	r.OK += o.OK
	r.Errors += o.Errors
	r.RespBytes += o.RespBytes
	if r.Status == nil {
		r.Status = make(map[int]uint64)
	}
	for code, n := range o.Status {
		r.Status[code] += n
	}
	for _, smp := range o.FirstErrors {
		if len(r.FirstErrors) < maxSamples {
			r.FirstErrors = append(r.FirstErrors, smp)
		}
	}
	if r.Latency == nil {
		r.Latency = &Histogram{}
	}
	if o.Latency != nil {
		r.Latency.Merge(o.Latency)
	}
}
