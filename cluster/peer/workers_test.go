package peer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

func TestWorkers(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, p *workers)
	}{
		{"a job runs on the idle worker the last one left", func(t *testing.T, p *workers) {
			done := make(chan struct{})
			p.run(func() { close(done) })
			<-done
			waitFor(t, "the worker parks", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 1 })
			for range 100 {
				done := make(chan struct{})
				p.run(func() { close(done) })
				<-done
				waitFor(t, "the worker parks again", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 1 })
			}
			if n := p.running(); n != 1 {
				t.Fatalf("%d workers for jobs one after another, want 1", n)
			}
		}},
		{"a job never waits for a busy worker", func(t *testing.T, p *workers) {
			const jobs = 50
			release := make(chan struct{})
			var started sync.WaitGroup
			started.Add(jobs)
			for range jobs {
				p.run(func() { started.Done(); <-release })
			}
			started.Wait() // every job started while all the others were blocked
			close(release)
		}},
		{"an idle worker ends after its idle time", func(t *testing.T, p *workers) {
			p.idleFor = 5 * time.Millisecond
			var ran atomic.Int32
			for range 10 {
				p.run(func() { ran.Add(1) })
			}
			waitFor(t, "every worker ends", func() bool { return p.running() == 0 })
			if ran.Load() != 10 {
				t.Fatalf("%d jobs ran, want 10", ran.Load())
			}
		}},
		{"a worker taken as its idle time ends still runs its job", func(t *testing.T, p *workers) {
			p.idleFor = time.Microsecond // the race between run and leave, many times
			const jobs = 20000
			var ran atomic.Int32
			for i := range jobs {
				p.run(func() { ran.Add(1) })
				if i%64 == 0 {
					time.Sleep(time.Microsecond)
				}
			}
			waitFor(t, "every job runs", func() bool { return ran.Load() == jobs })
			waitFor(t, "every worker ends", func() bool { return p.running() == 0 })
		}},
		{"close ends the idle workers and later jobs still run", func(t *testing.T, p *workers) {
			for range 5 {
				p.run(func() {})
			}
			waitFor(t, "the workers park", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle)+0 == p.live })
			p.close()
			waitFor(t, "every worker ends", func() bool { return p.running() == 0 })
			done := make(chan struct{})
			p.run(func() { close(done) })
			<-done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, &workers{}) })
	}
}
