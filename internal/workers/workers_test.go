package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

func TestPool(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, p *Pool)
	}{
		{"a job runs on the idle worker the last one left", func(t *testing.T, p *Pool) {
			done := make(chan struct{})
			p.Run(func() { close(done) })
			<-done
			eventually.True(t, "the worker parks", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 1 })
			for range 100 {
				done := make(chan struct{})
				p.Run(func() { close(done) })
				<-done
				eventually.True(t, "the worker parks again", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 1 })
			}
			if n := p.Running(); n != 1 {
				t.Fatalf("%d workers for jobs one after another, want 1", n)
			}
		}},
		{"a job never waits for a busy worker", func(t *testing.T, p *Pool) {
			const jobs = 50
			release := make(chan struct{})
			var started sync.WaitGroup
			started.Add(jobs)
			for range jobs {
				p.Run(func() { started.Done(); <-release })
			}
			started.Wait() // every job started while all the others were blocked
			close(release)
		}},
		{"an idle worker ends after its idle time", func(t *testing.T, p *Pool) {
			p.IdleFor = 5 * time.Millisecond
			var ran atomic.Int32
			for range 10 {
				p.Run(func() { ran.Add(1) })
			}
			eventually.True(t, "every worker ends", func() bool { return p.Running() == 0 })
			if ran.Load() != 10 {
				t.Fatalf("%d jobs ran, want 10", ran.Load())
			}
		}},
		{"a worker taken as its idle time ends still runs its job", func(t *testing.T, p *Pool) {
			p.IdleFor = time.Microsecond // the race between run and leave, many times
			const jobs = 20000
			var ran atomic.Int32
			for i := range jobs {
				p.Run(func() { ran.Add(1) })
				if i%64 == 0 {
					time.Sleep(time.Microsecond)
				}
			}
			eventually.True(t, "every job runs", func() bool { return ran.Load() == jobs })
			eventually.True(t, "every worker ends", func() bool { return p.Running() == 0 })
		}},
		{"close ends the idle workers and later jobs still run", func(t *testing.T, p *Pool) {
			for range 5 {
				p.Run(func() {})
			}
			eventually.True(t, "the workers park", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle)+0 == p.live })
			p.Close()
			eventually.True(t, "every worker ends", func() bool { return p.Running() == 0 })
			done := make(chan struct{})
			p.Run(func() { close(done) })
			<-done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, &Pool{}) })
	}
}
