package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; it is
// 100 on every Linux platform Go supports.
const clockTicks = 100

// cpuTime returns the CPU time (user+system) used so far by process pid, read
// from /proc; ok is false where /proc is unavailable.
func cpuTime(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; fields after ")" are fixed.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clockTicks, true
}

// settle waits until process pid has been nearly idle (under 5 % of one core)
// for one 300 ms interval, so that background work left over from the previous
// run (flushes, compactions) does not steal CPU from the next one. It gives up
// after max and reports how long it waited.
func settle(ctx context.Context, pid int, max time.Duration) time.Duration {
	const interval = 300 * time.Millisecond
	start := time.Now()
	prev, ok := cpuTime(pid)
	if !ok {
		return 0
	}
	for time.Since(start) < max {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(interval):
		}
		cur, ok := cpuTime(pid)
		if !ok {
			break
		}
		if cur-prev < interval/20 {
			break
		}
		prev = cur
	}
	return time.Since(start)
}

// cpuWindow measures a process's CPU time over loadgen.Run's measured
// window, which starts after the warm-up: start it right before Run. It
// also measures each process's system calls and, of a kitd node, its
// fdatasyncs (syscalls.go).
type cpuWindow struct {
	done chan struct{}
	used time.Duration
	ok   bool
	// procs is each process's usage, one entry per process watched, with
	// nothing measured where a reading failed.
	procs []procUsage
}

// watched is a process a window samples: for a kitd node, with the
// address and operator token of its /metrics.
type watched struct {
	name  string
	pid   int
	addr  string // "": not a kitd node
	token string
}

// cpuSampler is what a window needs of the system: a process's CPU time
// and /proc/<pid>/io counters, a kitd node's counters, and a timer. Tests
// script them, so that what they check does not depend on how busy the
// machine is. A nil procIO or metrics measures nothing of its kind.
type cpuSampler struct {
	cpuTime func(pid int) (time.Duration, bool)
	procIO  func(pid int) (ioCounters, bool)
	metrics func(ctx context.Context, addr, token string) (map[string]uint64, bool)
	after   func(time.Duration) <-chan time.Time
}

// procSampler reads /proc, the nodes' /metrics and the wall clock.
func procSampler() cpuSampler {
	return cpuSampler{cpuTime: cpuTime, procIO: procIO, metrics: nodeMetrics, after: time.After}
}

// measureCPU samples the CPU time of the processes pids, summed, warmup
// and warmup+window from now. No pids, a pid of 0, or a system without
// /proc measures nothing.
func measureCPU(ctx context.Context, pids []int, warmup, window time.Duration) *cpuWindow {
	return procSampler().measure(ctx, pids, warmup, window)
}

// measureWindow is measureCPU of the processes procs, which also samples
// their system calls and the kitd nodes' sync counters.
func measureWindow(ctx context.Context, procs []watched, warmup, window time.Duration) *cpuWindow {
	return procSampler().measureProcs(ctx, procs, warmup, window)
}

// sample reads every process's CPU time, then its /proc/<pid>/io, then
// every kitd node's counters: the CPU first, so that the reads of one end
// of a window are as close together as they can be.
func (c cpuSampler) sample(ctx context.Context, procs []watched) []procSample {
	out := make([]procSample, len(procs))
	for i, p := range procs {
		out[i].cpu, out[i].cpuOK = c.cpuTime(p.pid)
	}
	for i, p := range procs {
		if c.procIO != nil {
			out[i].io, out[i].ioOK = c.procIO(p.pid)
		}
	}
	for i, p := range procs {
		if c.metrics != nil && p.addr != "" {
			if m, ok := c.metrics(ctx, p.addr, p.token); ok {
				out[i].counters = m
			}
		}
	}
	return out
}

func (c cpuSampler) measure(ctx context.Context, pids []int, warmup, window time.Duration) *cpuWindow {
	procs := make([]watched, len(pids))
	for i, pid := range pids {
		procs[i] = watched{pid: pid}
	}
	return c.measureProcs(ctx, procs, warmup, window)
}

func (c cpuSampler) measureProcs(ctx context.Context, procs []watched, warmup, window time.Duration) *cpuWindow {
	w := &cpuWindow{done: make(chan struct{}), procs: make([]procUsage, len(procs))}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
		w.procs[i] = procUsage{name: p.name, pid: p.pid, node: p.addr != ""}
	}
	if len(pids) == 0 || slices.Contains(pids, 0) {
		close(w.done)
		return w
	}
	warmedUp := c.after(warmup)
	go func() {
		defer close(w.done)
		wait := func(tick <-chan time.Time) bool {
			select {
			case <-ctx.Done():
				return false
			case <-tick:
				return true
			}
		}
		if !wait(warmedUp) {
			return
		}
		from := c.sample(ctx, procs)
		if !wait(c.after(window)) {
			return
		}
		to := c.sample(ctx, procs)
		w.ok = true
		for i, p := range procs {
			u := usageOf(p, from[i], to[i])
			w.procs[i] = u
			w.used, w.ok = w.used+u.cpu, w.ok && u.cpuOK
		}
		if !w.ok {
			w.used = 0
		}
	}()
	return w
}

// result waits for the window's end and returns the CPU time used in it.
func (w *cpuWindow) result() (time.Duration, bool) {
	<-w.done
	return w.used, w.ok
}

// usage waits for the window's end and returns each process's usage.
func (w *cpuWindow) usage() []procUsage {
	<-w.done
	return w.procs
}
