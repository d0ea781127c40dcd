// Package workers runs jobs on goroutines kept between them. A new
// goroutine starts with a small stack and grows it, copying it each time,
// on every job that goes deep (protobuf's reflection, an actor call, an
// HTTPS client); a kept one grew it once. It owns the pool and nothing of
// what the jobs do.
package workers

import (
	"slices"
	"sync"
	"time"
)

// Pool runs jobs on workers, goroutines kept between jobs. There is no
// bound on how many run: a job may wait on anything (a raft commit,
// another node, a Kit's endpoint), so a job never waits for a free
// worker. The zero value is ready to use.
type Pool struct {
	mu     sync.Mutex
	idle   []*worker // the most recently used last: its stack is warm
	closed bool
	// IdleFor, when set, is how long a worker waits for its next job
	// before it ends (default 10 s). Set it before the first Run.
	IdleFor time.Duration
	live    int // workers started and not gone: what tests count
}

type worker struct {
	jobs chan func() // capacity 1: run never blocks on it
}

const (
	// workerIdleFor is how long a worker waits for its next job before it
	// ends: long enough to span a lull between bursts, short enough that a
	// burst's workers do not stay for good.
	workerIdleFor = 10 * time.Second
	// maxIdleWorkers bounds the goroutines (and grown stacks) kept idle.
	maxIdleWorkers = 256
)

// Run runs job on an idle worker, or on a new one when none is idle.
func (p *Pool) Run(job func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go job()
		return
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.jobs <- job
		return
	}
	p.live++
	p.mu.Unlock()
	w := &worker{jobs: make(chan func(), 1)}
	w.jobs <- job
	go p.loop(w)
}

func (p *Pool) loop(w *worker) {
	idleFor := workerIdleFor
	if p.IdleFor > 0 {
		idleFor = p.IdleFor
	}
	timer := time.NewTimer(idleFor)
	defer timer.Stop()
	for job := <-w.jobs; job != nil; {
		job()
		if !p.park(w) {
			return
		}
		timer.Reset(idleFor)
		select {
		case job = <-w.jobs:
			timer.Stop()
		case <-timer.C:
			if p.leave(w) {
				return
			}
			job = <-w.jobs // taken while its time ran out: its job is on the way
		}
	}
	p.gone()
}

// park puts w among the idle workers; it reports false when w must end
// instead (the transport closed, or enough are idle).
func (p *Pool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdleWorkers {
		p.live--
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

// leave takes an idle w out for good; false when run took it first.
func (p *Pool) leave(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, w)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	p.live--
	return true
}

func (p *Pool) gone() {
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
}

// Close ends the idle workers; jobs run after it get goroutines of their
// own.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		w.jobs <- nil
	}
}

// Running counts the workers that have not ended.
func (p *Pool) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}
