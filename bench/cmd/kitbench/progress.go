package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

// progress rewrites one line on stderr once a second while a run goes on:
// what runs, how far it is, and the last second's answers. Each line
// starts with a carriage return and is padded to the width of the one
// before, so it overwrites it on a terminal without escape codes.
type progress struct {
	w     io.Writer
	label string
	live  *loadgen.Live
	total time.Duration
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
	width int
}

// startProgress shows the progress of a run of total length whose answers
// live counts.
func startProgress(w io.Writer, label string, live *loadgen.Live, total time.Duration) *progress {
	p := &progress{w: w, label: label, live: live, total: total, start: time.Now(), stop: make(chan struct{})}
	p.done.Add(1)
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer p.done.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastOK, lastErrs uint64
	last := p.start
	for {
		select {
		case <-p.stop:
			return
		case now := <-tick.C:
			ok, errs := p.live.Counts()
			rate := float64(ok-lastOK) / now.Sub(last).Seconds()
			p.write(progressLine(p.label, now.Sub(p.start), p.total, rate, ok, errs, errs-lastErrs))
			lastOK, lastErrs, last = ok, errs, now
		}
	}
}

func (p *progress) write(line string) {
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// Stop ends the line: it blanks it, so the next log line starts clean.
func (p *progress) Stop() {
	close(p.stop)
	p.done.Wait()
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	}
}

// progressLine renders one progress line.
func progressLine(label string, elapsed, total time.Duration, rate float64, ok, errs, newErrs uint64) string {
	line := fmt.Sprintf("kitbench: %s %4.0fs/%.0fs %8.0f req/s %10d ok %6d errors",
		label, elapsed.Seconds(), total.Seconds(), rate, ok, errs)
	if newErrs > 0 {
		line += fmt.Sprintf(" (+%d)", newErrs)
	}
	return line
}
