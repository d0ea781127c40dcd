package loadgen

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// virtualClock jumps to whatever time it is asked to sleep until; waitFor
// lets a test block until the scheduler has moved it that far.
type virtualClock struct {
	mu   sync.Mutex
	cond *sync.Cond
	now  time.Time
}

func newVirtualClock() *virtualClock {
	c := &virtualClock{now: time.Unix(1_700_000_000, 0)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) SleepUntil(ctx context.Context, t time.Time) error {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	return ctx.Err()
}

// waitFor blocks until the clock reaches t and reports true, or gives up
// after 5 s of real time (a scheduler that waits for answers never gets
// there) and reports false.
func (c *virtualClock) waitFor(t time.Time) bool {
	gaveUp := false
	timer := time.AfterFunc(5*time.Second, func() {
		c.mu.Lock()
		gaveUp = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.now.Before(t) && !gaveUp {
		c.cond.Wait()
	}
	return !c.now.Before(t)
}

func TestOpenLoopSchedule(t *testing.T) {
	const rate = 1000.0 // one request a millisecond
	ms := time.Millisecond
	type answered struct {
		n       uint64
		dueAt   time.Duration // since start
		latency time.Duration // answer time minus due time
	}
	run := func(t *testing.T, workers int, serve func(clk *virtualClock, start time.Time, d due)) []answered {
		clk := newVirtualClock()
		start := clk.Now()
		var mu sync.Mutex
		var got []answered
		openLoop(context.Background(), clk, start, start.Add(100*ms), rate, workers, func(w int, queue <-chan due) {
			for d := range queue {
				serve(clk, start, d)
				mu.Lock()
				got = append(got, answered{d.n, d.at.Sub(start), clk.Now().Sub(d.at)})
				mu.Unlock()
			}
		})
		byN := make([]answered, len(got))
		for _, a := range got {
			if a.n >= uint64(len(byN)) {
				t.Fatalf("request %d of %d", a.n, len(got))
			}
			byN[a.n] = a
		}
		return byN
	}

	t.Run("request n is due at start+n/rate, each exactly once, until the end", func(t *testing.T) {
		got := run(t, 4, func(*virtualClock, time.Time, due) {})
		if len(got) != 100 {
			t.Fatalf("%d requests in 100 ms at 1000/s, want 100", len(got))
		}
		for n, a := range got {
			if a.n != uint64(n) || a.dueAt != time.Duration(n)*ms {
				t.Fatalf("request %d: %+v, want due at %v", n, a, time.Duration(n)*ms)
			}
		}
	})

	t.Run("a slow answer delays no due time, and the queueing counts in latency", func(t *testing.T) {
		// One connection; request 0 is answered only when request 10 is due.
		got := run(t, 1, func(clk *virtualClock, start time.Time, d due) {
			if d.n == 0 && !clk.waitFor(start.Add(10*ms)) {
				t.Error("request 10 never came due while request 0 was unanswered")
			}
		})
		if len(got) != 100 {
			t.Fatalf("%d requests, want 100", len(got))
		}
		for n, a := range got {
			if a.dueAt != time.Duration(n)*ms {
				t.Fatalf("request %d due at %v, want %v: the schedule waited for an answer", n, a.dueAt, time.Duration(n)*ms)
			}
		}
		// Requests 1..9 waited behind request 0: a closed loop (latency from
		// the send) would show them as instant.
		for n := 0; n < 10; n++ {
			if want := time.Duration(10-n) * ms; got[n].latency < want {
				t.Errorf("request %d: latency %v, want at least %v (time queued behind request 0)", n, got[n].latency, want)
			}
		}
	})

	t.Run("a cancelled run stops handing out requests", func(t *testing.T) {
		clk := newVirtualClock()
		start := clk.Now()
		ctx, cancel := context.WithCancel(context.Background())
		var handed int
		openLoop(ctx, clk, start, start.Add(time.Hour), rate, 1, func(w int, queue <-chan due) {
			for d := range queue {
				handed++
				if d.n == 5 {
					cancel()
				}
			}
		})
		if handed > 5+queueDepth+1 {
			t.Fatalf("%d requests handed out after cancelling at the 6th", handed)
		}
	})
}

func TestRunOpenAgainstTrivial(t *testing.T) {
	srv, err := StartTrivial(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var live Live
	res, err := RunOpen(context.Background(), Config{
		Addr: srv.Addr, Concurrency: 4, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Live: &live,
	}, 500, Scenario{Name: "get", Build: func(n uint64, req *fasthttp.Request) { req.SetRequestURI("/") }})
	if err != nil {
		t.Fatal(err)
	}
	// 500/s over 300 ms: 150 measured requests, whatever the machine's speed.
	if res.OK+res.Errors != 150 || res.Errors != 0 || res.Elapsed != 300*time.Millisecond {
		t.Fatalf("ok %d errors %d elapsed %v, want 150 answers in 300 ms", res.OK, res.Errors, res.Elapsed)
	}
	if ok, errs := live.Counts(); ok != 175 || errs != 0 {
		t.Errorf("live counts %d ok, %d errors; want 175 (warm-up included), 0", ok, errs)
	}
}

// TestRunOpenMeasuresFromDueTime: with one connection and a server that
// holds the first request until the clock reaches 50 ms, the 49 requests
// due meanwhile queue behind it; their latencies, counted from their due
// times, show the wait (coordinated omission corrected). Counted from the
// send, as a closed loop does, they would be as short as the others.
func TestRunOpenMeasuresFromDueTime(t *testing.T) {
	clk := newVirtualClock()
	start := clk.Now()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/0" {
			if !clk.waitFor(start.Add(50 * time.Millisecond)) {
				t.Error("the clock never reached 50 ms while the first request was held")
			}
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()

	res, err := runOpen(context.Background(), Config{Addr: ln.Addr().String(), Concurrency: 1, Duration: 100 * time.Millisecond},
		1000, Scenario{Name: "held", Build: func(n uint64, req *fasthttp.Request) {
			req.SetRequestURI("/" + strconv.FormatUint(n, 10))
		}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 100 {
		t.Fatalf("%d answers, want 100", res.OK)
	}
	// Requests 0..49 each waited at least 50-n ms, so more than half of all
	// latencies are at least 1 ms.
	if p := res.Latency.Quantile(0.51); p < time.Millisecond {
		t.Fatalf("p51 %v: the time queued behind the held request is not counted", p)
	}
	if p := res.Latency.Max(); p < 50*time.Millisecond {
		t.Fatalf("max %v, want at least the 50 ms the first request was held", p)
	}
}
