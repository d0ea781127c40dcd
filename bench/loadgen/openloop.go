package loadgen

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Clock is the time source of the open-loop scheduler. Tests inject a
// virtual one; runs use the wall clock.
type Clock interface {
	Now() time.Time
	// SleepUntil returns once Now() has reached t, or when ctx ends.
	SleepUntil(ctx context.Context, t time.Time) error
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) SleepUntil(ctx context.Context, t time.Time) error { return SleepUntil(ctx, t) }

// SleepUntil returns at wall-clock time t, or when ctx ends (with its
// error).
func SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queueDepth bounds the requests that are due but wait for a free
// connection. Beyond it the scheduler itself waits; the requests it then
// hands out late keep their due times, so the wait still counts in their
// latency.
const queueDepth = 1 << 14

// due is one scheduled request: its number and the time it was due.
type due struct {
	n  uint64
	at time.Time
}

// schedule hands out request n at start + n/rate on clk, for every n whose
// time falls before end, whether or not the earlier ones were answered; it
// sleeps only until the next due time and then releases every request that
// is due, so a coarse timer delays no request's due time. It closes out
// when done.
func schedule(ctx context.Context, clk Clock, start, end time.Time, rate float64, out chan<- due) {
	defer close(out)
	interval := float64(time.Second) / rate
	for n := uint64(0); ; n++ {
		at := start.Add(time.Duration(float64(n) * interval))
		if !at.Before(end) {
			return
		}
		if clk.Now().Before(at) {
			if clk.SleepUntil(ctx, at) != nil {
				return
			}
		}
		select {
		case out <- due{n, at}:
		case <-ctx.Done():
			return
		}
	}
}

// RunOpen drives cfg.Addr (or cfg.Addrs) with scenario s in an open loop: requests are
// due at a fixed rate (per second) on the clock, whether or not earlier
// ones were answered, and cfg.Concurrency connections send them as they
// come due. A request's latency runs from its due time, not from the
// moment a connection was free to send it: when the server falls behind,
// the queueing shows in the percentiles (coordinated omission corrected,
// as in wrk2). Requests due in the first cfg.Warmup are sent but not
// measured. The run ends when every request due before
// cfg.Warmup+cfg.Duration is answered or has timed out.
func RunOpen(ctx context.Context, cfg Config, rate float64, s Scenario) (*Result, error) {
	return runOpen(ctx, cfg, rate, s, wallClock{})
}

func runOpen(ctx context.Context, cfg Config, rate float64, s Scenario, clk Clock) (*Result, error) {
	if !(rate > 0) {
		return nil, errors.New("loadgen: open-loop rate must be positive")
	}
	hcs, err := newClients(&cfg, s)
	if err != nil {
		return nil, err
	}
	defer closeIdle(hcs)

	start := clk.Now()
	measureFrom := start.Add(cfg.Warmup)
	stopAt := measureFrom.Add(cfg.Duration)
	results := make([]*workerResult, cfg.Concurrency)
	for w := range results {
		results[w] = newWorkerResult()
	}
	openLoop(ctx, clk, start, stopAt, rate, len(results), func(w int, queue <-chan due) {
		x := newExchange(hcs[w], cfg, s)
		defer x.release()
		for d := range queue {
			if ctx.Err() == nil { // else drain: the scheduler has stopped
				x.do(d.n, results[w], d.at, !d.at.Before(measureFrom), clk)
			}
		}
	})
	res := collect(cfg, s, results, clk.Now(), measureFrom, stopAt)
	// The window is that of the due times: every request due in it was
	// waited for, however late its answer came.
	if ctx.Err() == nil {
		res.Elapsed = cfg.Duration
	}
	return res, ctx.Err()
}

// openLoop runs the schedule of rate between start and end and workers
// goroutines, each running work on the queue of due requests until the
// queue is closed and drained.
func openLoop(ctx context.Context, clk Clock, start, end time.Time, rate float64, workers int,
	work func(w int, queue <-chan due)) {
	queue := make(chan due, queueDepth)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w, queue)
		}()
	}
	schedule(ctx, clk, start, end, rate, queue)
	wg.Wait()
}
