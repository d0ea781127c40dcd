package multiraft_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// What replication costs a single node: one node on the real disk, 64
// single-voter groups, many concurrent proposers; beside it, the same
// bytes committed straight to persistence from as many goroutines (today's
// path). Compare ns/op of the two (bench/README.md, docs/cluster.md).
//
//	go test -run '^$' -bench 'Propose|PlainCommit' -benchtime 3s -count 3 ./multiraft/

const (
	benchGroups      = 64
	benchParallelism = 16 // goroutines per P: concurrent requests of a loaded node
)

var benchPayload = make([]byte, 256) // about one message's records

func BenchmarkProposeSingleNode(b *testing.B) { benchmarkPropose(b) }

// The same past the raft log's first segments: small segments and
// compactions, so that segments roll and go (and their files are reused)
// all through the run, as in a node that has run a while (64 MiB
// segments: the run above writes less than one).
func BenchmarkProposeSingleNodeRolling(b *testing.B) {
	benchmarkPropose(b, func(cfg *multiraft.Config) {
		cfg.LogSegmentSize = 2 << 20
		cfg.CompactAfter = 50
	})
}

func benchmarkPropose(b *testing.B, tweaks ...func(*multiraft.Config)) {
	n := singleNode(b, b.TempDir(), persistence.Options{}, benchGroups, tweaks...)

	var next atomic.Uint32
	st0 := n.Stats()
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			g := multiraft.GroupID(next.Add(1) % benchGroups)
			if _, err := n.Propose(ctx, g, benchPayload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportCPU(b, cpu0)
	st := n.Stats()
	b.ReportMetric(float64(st.Syncs-st0.Syncs)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
}

func BenchmarkPlainCommit(b *testing.B) {
	store, err := persistence.Open(b.TempDir(), persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var next atomic.Uint64
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			key := persistence.AppendUint64([]byte("kv/\x00\x00/"), i)
			key[4] = byte(i % benchGroups)
			batch := store.NewBatch()
			batch.Set(key, benchPayload)
			if err := batch.Commit(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// cpuTime is the process's CPU time (user and system): on a machine shared
// with other work, CPU per operation is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}
