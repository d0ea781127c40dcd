package peer

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kitd/kitd/proto/kitpb"
)

// BenchmarkCall is a forwarded read's round trip on loopback: GetUser out,
// UserReply back, over one established connection. It reports the median
// and 99th percentile of the round trips beside ns/op and allocs/op
// (both ends' allocations: the handler's reply and the decoding of each
// message are in them).
func BenchmarkCall(b *testing.B) {
	srv, cli, ctx, msg := benchPair(b)
	rtts := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := cli.Call(ctx, srv.Addr(), msg, "r"); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(rtts)
	b.ReportMetric(float64(rtts[len(rtts)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(rtts[len(rtts)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCallParallel is many forwarded requests at once over the one
// connection: the writer coalesces their frames.
func BenchmarkCallParallel(b *testing.B) {
	srv, cli, ctx, msg := benchPair(b)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	cpu := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cli.Call(ctx, srv.Addr(), msg, "r"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's CPU time (user and system), both ends of the
// connection together: on a shared machine, steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPair is two transports with a connection up between them, and a
// forwarded read to send.
func benchPair(b *testing.B) (srv, cli *node, ctx context.Context, msg *kitpb.GetUser) {
	srv, cli = start(b, "b", nil), start(b, "a", nil)
	ctx = ctxFor(b)
	msg = &kitpb.GetUser{UserId: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}
	if _, err := cli.Call(ctx, srv.Addr(), msg, "warm"); err != nil {
		b.Fatal(err)
	}
	return srv, cli, ctx, msg
}
