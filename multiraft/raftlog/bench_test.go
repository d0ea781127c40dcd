package raftlog

import (
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// What a replication cycle costs the raft log: a run of entries and a
// hard state, one write and one fdatasync, on the real disk (b.TempDir,
// under $TMPDIR), in segment files reused or created. The machine is
// shared: compare cpu-µs/op (user and system, getrusage), not ns/op
// (bench/README.md).
//
//	go test -run '^$' -bench WriteSync -benchtime 20000x -count 5 ./multiraft/raftlog/
func BenchmarkWriteSync(b *testing.B) {
	for _, bc := range []struct {
		name      string
		noRecycle bool
	}{{"recycled", false}, {"created", true}} {
		b.Run(bc.name, func(b *testing.B) {
			const (
				segSize = 2 << 20
				perOp   = 8   // entries a cycle
				size    = 300 // bytes an entry: about one message's records
			)
			l, _, err := Open(vfs.Default, b.TempDir(), Options{SegmentSize: segSize, NoRecycle: bc.noRecycle})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := make([]pb.Entry, perOp)
			index := uint64(0)
			cycle := func() {
				for i := range batch {
					index++
					batch[i] = pb.Entry{Index: index, Term: 1, Data: make([]byte, size)}
				}
				l.Append(1, batch)
				l.SetHardState(1, &pb.HardState{Term: 1, Vote: 1, Commit: index})
				if err := l.Write(true); err != nil {
					b.Fatal(err)
				}
				if err := l.Release(1, index-perOp); err != nil {
					b.Fatal(err)
				}
			}
			// Past the first segments, so that the files are reused.
			for range (recycled + 2) * segSize / (perOp * size) {
				cycle()
			}
			user0, sys0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				cycle()
			}
			b.StopTimer()
			user, sys := cpuTime()
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
			b.ReportMetric(per(user-user0+sys-sys0), "cpu-µs/op")
			b.ReportMetric(per(sys-sys0), "sys-µs/op")
		})
	}
}

// What the same cycle costs a fresh log, from its first segment on: with
// Preallocate, the writer leaves its first segment (a file it created) for
// the spare as soon as it is ready, and takes the next spare at each roll;
// without, every segment is a file it grows. Each run opens a new log, so
// the preparation's own writes of zeros (its goroutine's CPU is the
// process's) are in the figure.
//
//	go test -run '^$' -bench WriteSyncFresh -benchtime 3000x -count 5 ./multiraft/raftlog/
func BenchmarkWriteSyncFresh(b *testing.B) {
	for _, bc := range []struct {
		name        string
		preallocate bool
	}{{"preallocated", true}, {"grown", false}} {
		b.Run(bc.name, func(b *testing.B) {
			const (
				segSize = 2 << 20
				perOp   = 8
				size    = 300
			)
			user0, sys0 := cpuTime()
			l, _, err := Open(vfs.Default, b.TempDir(), Options{SegmentSize: segSize, Preallocate: bc.preallocate})
			if err != nil {
				b.Fatal(err)
			}
			batch := make([]pb.Entry, perOp)
			index := uint64(0)
			b.ResetTimer()
			for range b.N {
				for i := range batch {
					index++
					batch[i] = pb.Entry{Index: index, Term: 1, Data: make([]byte, size)}
				}
				l.Append(1, batch)
				l.SetHardState(1, &pb.HardState{Term: 1, Vote: 1, Commit: index})
				if err := l.Write(true); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			segs := l.Segments()
			if err := l.Close(); err != nil { // stops a preparation in flight
				b.Fatal(err)
			}
			user, sys := cpuTime()
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
			b.ReportMetric(per(user-user0+sys-sys0), "cpu-µs/op")
			b.ReportMetric(per(sys-sys0), "sys-µs/op")
			b.ReportMetric(float64(segs), "segments")
		})
	}
}

// cpuTime is the process's user and system CPU time. The filesystem
// journal's commits run in a kernel thread: not in it.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
