package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// BenchmarkRequest compares a read answered by this node's activation with
// the same read forwarded to the partition's leader over loopback mTLS
// (docs/cluster.md, "Forwarding": what a forward costs). Both report the
// median and the 99th percentile of their requests.
func BenchmarkRequest(b *testing.B) {
	const p = partition.ID(20)
	a, leader := forwardingPair(b, p)
	id := identitiesOf(p, 1)[0]
	for _, bm := range []struct {
		name string
		from *peerNode
	}{{"local", leader}, {"forwarded", a}} {
		b.Run(bm.name, func(b *testing.B) {
			req := &kitpb.GetUser{UserId: "u"}
			if _, err := Call[*kitpb.UserReply](bm.from.n, "fwd", id, req); err != nil {
				b.Fatal(err)
			}
			took := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := Call[*kitpb.UserReply](bm.from.n, "fwd", id, req); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
