package peer

import (
	"slices"
	"sync"
	"time"
)

// workers runs request handlers on goroutines kept between requests. A new
// goroutine starts with a small stack and grows it, copying it each time,
// on every forwarded request that goes down to protobuf's reflection and
// an actor; a kept one grew it once. There is no bound on how many run: a
// handler may wait on anything (a raft commit, another node), so a request
// never waits for a free worker. The zero value is ready to use.
type workers struct {
	mu     sync.Mutex
	idle   []*worker // the most recently used last: its stack is warm
	closed bool
	// idleFor, when set, replaces workerIdleFor (tests).
	idleFor time.Duration
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

// run runs job on an idle worker, or on a new one when none is idle.
func (p *workers) run(job func()) {
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

func (p *workers) loop(w *worker) {
	idleFor := workerIdleFor
	if p.idleFor > 0 {
		idleFor = p.idleFor
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
func (p *workers) park(w *worker) bool {
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
func (p *workers) leave(w *worker) bool {
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

func (p *workers) gone() {
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
}

// close ends the idle workers; jobs run after it get goroutines of their
// own.
func (p *workers) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		w.jobs <- nil
	}
}

// running counts the workers that have not ended.
func (p *workers) running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}
