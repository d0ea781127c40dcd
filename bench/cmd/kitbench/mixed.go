package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/bench/loadgen"
	"github.com/kitd/kitd/bench/ratecheck"
)

// The mixed scenario is Kit backend traffic on a node with the limits of
// docs/api.md "Limits" on: each installation's backend posts, edits and reads
// as fast as its budget lets it, one request at a time, and honours every
// 429's Retry-After. Afterwards package ratecheck judges the history: no
// installation (and no conversation) got more than its budget, and every
// Retry-After was right.

// mixedInstall is one Kit installation of the mixed scenario.
type mixedInstall struct {
	ID       string
	BotToken string
	// Channels are the installation's own channels: its backend posts into
	// them round-robin, enough of them that the write budget (50 a minute)
	// binds before any channel's post_message budget (burst 5, 1 a second),
	// so every 429 a retry waits out is the installation's own.
	Channels []string
}

// setupMixed makes n installations of n Kits in f's workspace, each with
// its bot in perInstall channels of f.Conversations and a bot token. The
// first is f's own installation.
func setupMixed(ctx context.Context, c *setupClient, f *fixture, n, perInstall int) ([]mixedInstall, error) {
	if len(f.Conversations) < n*perInstall {
		return nil, fmt.Errorf("set-up: %d channels for %d installations of %d", len(f.Conversations), n, perInstall)
	}
	op := c.cfg.OperatorToken
	base := c.cfg.Slug
	if base == "" {
		base = "bench-kit"
	}
	out := make([]mixedInstall, n)
	start := time.Now()
	err := parallel(ctx, c.cfg.Parallel, n, func(ctx context.Context, k int) error {
		in := &out[k]
		in.Channels = f.Conversations[k*perInstall : (k+1)*perInstall]
		if k == 0 {
			in.ID, in.BotToken = f.InstallationID, f.BotToken
			return nil
		}
		var err error
		if in.ID, err = c.installKit(ctx, f, manifestWithSlug(base+"-mx"+strconv.Itoa(k))); err != nil {
			return err
		}
		for _, ch := range in.Channels {
			if _, err := c.call(ctx, "POST", "/ops/v1/installations/"+in.ID+"/channels", op,
				map[string]any{"conversationId": ch}, http.StatusOK, nil); err != nil {
				return err
			}
		}
		var bot struct {
			Token string `json:"token"`
		}
		if _, err := c.call(ctx, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", op,
			nil, http.StatusCreated, &bot); err != nil {
			return err
		}
		in.BotToken = bot.Token
		return need("bot token", in.BotToken)
	})
	if err != nil {
		return nil, err
	}
	c.cfg.Progress("%d installations for the mixed scenario, %d channels each, in %v", n, perInstall,
		time.Since(start).Round(time.Millisecond))
	return out, nil
}

// mixedOp is one request of an installation's backend.
type mixedOp struct {
	method, uri string
	body        []byte
	buckets     []string // what a success spends (ratecheck.Call.Buckets)
}

// backend is one installation's client: it cycles through a post, a
// history read, an edit of its last post and a channel listing.
type backend struct {
	in       mixedInstall
	auth     string
	step     int
	lastPost string
}

func (b *backend) next() mixedOp {
	k := b.step
	b.step++
	write, read := "write/"+b.in.ID, "read/"+b.in.ID
	ch := b.in.Channels[(k/4)%len(b.in.Channels)]
	switch k % 4 {
	case 0:
		return mixedOp{"POST", "/api/v1/messages",
			[]byte(`{"conversationId":"` + ch + `","text":"mixed ` + strconv.Itoa(k) + `"}`),
			[]string{write, "post_message/" + ch}}
	case 1:
		return mixedOp{"GET", "/api/v1/conversations/" + ch + "/messages?limit=20", nil, []string{read}}
	case 2:
		if b.lastPost != "" {
			return mixedOp{"PATCH", "/api/v1/messages/" + b.lastPost,
				[]byte(`{"text":"edited ` + strconv.Itoa(k) + `"}`), []string{write}}
		}
	}
	return mixedOp{"GET", "/api/v1/conversations?limit=20", nil, []string{read}}
}

// mixedRun is what one run of the mixed scenario recorded.
type mixedRun struct {
	res   *loadgen.Result
	calls []ratecheck.Call
}

// probeMargin is how long before Retry-After-1 s a probe is sent, so that
// its answer arrives before that instant (ratecheck counts only such
// probes) even on a busy machine.
const probeMargin = 150 * time.Millisecond

// runMixed drives addr with one sequential client per installation for
// warmup+duration. A client that gets a 429 with Retry-After s sends, when
// s >= 2, the same request once as a probe shortly before s-1 seconds
// have passed, then waits s seconds from the 429's arrival and retries it;
// it never gives up a request before the run ends. Only answers sent in
// the measured window go into res; every call goes into calls. 429s are
// not errors here: ratecheck judges them.
func runMixed(ctx context.Context, addr string, installs []mixedInstall, warmup, duration, timeout time.Duration,
	live *loadgen.Live) *mixedRun {
	hc := &fasthttp.HostClient{
		Addr: addr, Name: "kitbench", MaxConns: len(installs), MaxIdemponentCallAttempts: 1,
		ReadTimeout: timeout, WriteTimeout: timeout, MaxConnWaitTimeout: timeout,
	}
	defer hc.CloseIdleConnections()
	start := time.Now()
	measureFrom := start.Add(warmup)
	stopAt := measureFrom.Add(duration)
	runs := make([]*mixedRun, len(installs))
	var wg sync.WaitGroup
	for i, in := range installs {
		r := &mixedRun{res: &loadgen.Result{Addr: addr, Status: map[int]uint64{}, Latency: &loadgen.Histogram{}}}
		runs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &mixedClient{id: i, hc: hc, addr: addr, timeout: timeout, live: live, run: r,
				measureFrom: measureFrom, stopAt: stopAt, b: backend{in: in, auth: "Bearer " + in.BotToken}}
			c.loop(ctx)
		}()
	}
	wg.Wait()
	out := &mixedRun{res: &loadgen.Result{Addr: addr, Status: map[int]uint64{}, Latency: &loadgen.Histogram{}}}
	for _, r := range runs {
		out.res.Add(r.res)
		out.calls = append(out.calls, r.calls...)
	}
	out.res.Elapsed = min(time.Since(measureFrom), duration)
	return out
}

type mixedClient struct {
	id                  int
	hc                  *fasthttp.HostClient
	addr                string
	timeout             time.Duration
	live                *loadgen.Live
	run                 *mixedRun
	measureFrom, stopAt time.Time
	b                   backend
}

func (c *mixedClient) loop(ctx context.Context) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	for ctx.Err() == nil && time.Now().Before(c.stopAt) {
		op := c.b.next()
		call := c.send(req, resp, op, false)
		for call.Status == 429 && ctx.Err() == nil {
			secs, err := strconv.Atoi(call.RetryAfter)
			if err != nil || secs < 1 {
				secs = 1 // ratecheck reports the header; carry on
			}
			wait := time.Duration(secs) * time.Second
			if secs >= 2 {
				if !c.sleepUntil(ctx, call.Sent.Add(wait-time.Second-probeMargin)) {
					return
				}
				if p := c.send(req, resp, op, true); p.Status >= 200 && p.Status < 300 {
					break // too early to succeed: ratecheck judges it
				}
			}
			if !c.sleepUntil(ctx, call.Received.Add(wait)) {
				return
			}
			call = c.send(req, resp, op, false)
		}
	}
}

// sleepUntil waits until t; false when the run ends first.
func (c *mixedClient) sleepUntil(ctx context.Context, t time.Time) bool {
	return t.Before(c.stopAt) && loadgen.SleepUntil(ctx, t) == nil
}

func (c *mixedClient) send(req *fasthttp.Request, resp *fasthttp.Response, op mixedOp, probe bool) ratecheck.Call {
	req.Reset()
	resp.Reset()
	req.Header.SetMethod(op.method)
	req.SetRequestURI(op.uri)
	req.Header.SetHost(c.addr)
	req.Header.Set("Authorization", c.b.auth)
	if op.body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(op.body)
	}
	sent := time.Now()
	err := c.hc.DoTimeout(req, resp, c.timeout)
	call := ratecheck.Call{Client: c.id, Buckets: op.buckets, Sent: sent, Received: time.Now(), Probe: probe}
	if err == nil {
		call.Status = resp.StatusCode()
		call.RetryAfter = string(resp.Header.Peek("Retry-After"))
	}
	c.run.calls = append(c.run.calls, call)
	ok := call.Status >= 200 && call.Status < 300
	c.live.Count(ok || call.Status == 429) // a 429 is an answer this scenario expects
	if ok && op.method == "POST" {
		var m struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if json.Unmarshal(resp.Body(), &m) == nil && m.Message.ID != "" {
			c.b.lastPost = m.Message.ID
		}
	}
	if sent.Before(c.measureFrom) {
		return call
	}
	r := c.run.res
	r.Status[call.Status]++
	switch {
	case ok:
		r.OK++
		r.RespBytes += uint64(len(resp.Body()))
		r.Latency.Record(call.Received.Sub(sent))
	case call.Status == 429:
	default:
		r.Errors++
		if len(r.FirstErrors) < 5 {
			smp := loadgen.Sample{Method: op.method, URI: op.uri, Body: string(op.body), Status: call.Status}
			if err != nil {
				smp.Err = err.Error()
			} else {
				smp.Answer = truncate(string(resp.Body()), 1024)
			}
			r.FirstErrors = append(r.FirstErrors, smp)
		}
	}
	return call
}

// limitsReport is what the limit checks of the mixed scenario found.
type limitsReport struct {
	Limits       string                `json:"limits"` // the node's --limits
	Installs     int                   `json:"installations"`
	Calls        int                   `json:"calls"`
	Usage        []ratecheck.Usage     `json:"busiestMinute"`
	RetryAfter   ratecheck.RetryReport `json:"retryAfter"`
	Violations   []ratecheck.Violation `json:"violations"`
	ViolationsN  int                   `json:"violationCount"`
	ChecksPassed bool                  `json:"checksPassed"`
}

// maxViolationsShown bounds the violations kept in the report.
const maxViolationsShown = 20

// checkLimits judges a mixed run against docs/api.md "Rate limits".
func checkLimits(calls []ratecheck.Call, installs int) *limitsReport {
	budgets := map[string]ratecheck.Budget{
		"read": ratecheck.Read, "write": ratecheck.Write, "post_message": ratecheck.PostMessage,
	}
	over, usage := ratecheck.CheckBudgets(calls, budgets)
	wrong, retry := ratecheck.CheckRetryAfter(calls)
	v := append(over, wrong...)
	lr := &limitsReport{Limits: "spec", Installs: installs, Calls: len(calls), Usage: usage, RetryAfter: retry,
		ViolationsN: len(v), ChecksPassed: len(v) == 0}
	lr.Violations = v[:min(len(v), maxViolationsShown)]
	return lr
}

func (lr *limitsReport) print(w io.Writer, scenario string) {
	fmt.Fprintf(w, "%s, limits %s, %d installations, %d calls:\n", scenario, lr.Limits, lr.Installs, lr.Calls)
	for _, u := range lr.Usage {
		fmt.Fprintf(w, "  busiest %s bucket (%s): %d successes in a minute, %d allowed (%d in all)\n",
			u.Family, u.Bucket, u.PeakMin, u.AllowMin, u.Successes)
	}
	fmt.Fprintf(w, "  429s: %d; retried after Retry-After: %d; shown not a second too long by a probe: %d\n",
		lr.RetryAfter.Refused, lr.RetryAfter.Retried, lr.RetryAfter.Probed)
	if lr.ChecksPassed {
		fmt.Fprintln(w, "  no bucket exceeded its budget; every Retry-After checked was right")
	} else {
		fmt.Fprintf(w, "  !! %d LIMIT VIOLATIONS:\n", lr.ViolationsN)
		for _, v := range lr.Violations {
			fmt.Fprintf(w, "    %s\n", v)
		}
	}
	fmt.Fprintln(w)
}
