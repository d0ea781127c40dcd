package raftnet_test

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// What replicating over the network costs one group: proposals to one
// group on three nodes over loopback (raftnet over mTLS peer transports,
// stores on the real disk), beside the same group with a single voter on
// one node. "sequential" is one proposer: its p50/p99 are the latency of a
// proposal's commit; "concurrent" is 32 proposers: throughput.
//
//	go test -run '^$' -bench ProposeOverLoopback -benchtime 3s -count 5 ./cluster/raftnet/
func BenchmarkProposeOverLoopback(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, load := range []struct {
			name        string
			parallelism int // goroutines per P; 0: one proposer
		}{{"sequential", 0}, {"concurrent", 16}} {
			name := map[int]string{1: "one-node", 3: "three-nodes"}[nodes] + "/" + load.name
			b.Run(name, func(b *testing.B) { benchPropose(b, nodes, load.parallelism) })
		}
	}
}

var benchPayload = make([]byte, 256) // about one message's records

func benchPropose(b *testing.B, nodes, parallelism int) {
	ids := []uint64{1, 2, 3}[:nodes]
	c := newCluster(b, ids, options{onDisk: true}, nil)
	c.bootstrap(0, ids...)
	lead := c.members[c.elect(0, c.all()...)]

	var mu sync.Mutex
	var lat []time.Duration
	propose := func(ctx context.Context, own *[]time.Duration) bool {
		start := time.Now()
		if _, err := lead.node.Propose(ctx, 0, benchPayload); err != nil {
			b.Error(err)
			return false
		}
		*own = append(*own, time.Since(start))
		return true
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu, syncs := cpuTime(), c.syncs()
	if parallelism == 0 {
		ctx := context.Background()
		for range b.N {
			if !propose(ctx, &lat) {
				return
			}
		}
	} else {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			var own []time.Duration
			for pb.Next() && propose(ctx, &own) {
			}
			mu.Lock()
			lat = append(lat, own...)
			mu.Unlock()
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(c.syncs()-syncs)/float64(b.N), "syncs/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// cpuTime is the process's CPU time (user and system), every node of the
// benchmark's cluster together: on a shared machine, CPU per proposal is
// steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syncs is how many synced writes of the raft log every member made.
func (c *cluster) syncs() uint64 {
	var n uint64
	for _, m := range c.members {
		n += m.node.Stats().Syncs
	}
	return n
}
