package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

// BenchmarkDeliveries (docs/deliveries.md "Cost on the write path"): 64 posters write into 64
// channels of an installation subscribed to message.posted, whose receiver
// answers at once; it reports the events delivered per second and the
// p99 from a post's acknowledgement to its event's arrival:
//
//	make build && KITD_BIN=$PWD/bin/kitd go test ./e2e/ -run '^$' -bench Deliveries -benchtime 3000x
func BenchmarkDeliveries(b *testing.B) {
	rcv := newReceiverTB(b)
	s := startServerOpts(b, ServerOpts{Limits: "off", Args: []string{
		"--delivery-ca", rcv.caPath, "--delivery-allow", rcv.srv.Listener.Addr().String(),
	}})
	e := newEventsSetupTB(b, s, rcv, 64)
	var mu sync.Mutex
	acked := map[string]time.Time{}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := max(b.N/len(e.convs), 1)
	for _, c := range e.convs {
		wg.Go(func() {
			for i := range per {
				msg := e.in.post(b, c, fmt.Sprint(i))
				mu.Lock()
				acked[jstr(msg, "id")] = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := per * len(e.convs)
	eventually.Holds(2*time.Minute, func() bool { return len(rcv.received()) >= total })
	elapsed := time.Since(start)
	b.StopTimer()
	var lat []time.Duration
	for _, d := range rcv.received() {
		msg := d.event["data"].(map[string]any)["message"]
		if at, ok := acked[jstr(msg, "id")]; ok {
			lat = append(lat, d.at.Sub(at))
		}
	}
	if len(lat) < total {
		b.Fatalf("%d of %d events arrived", len(lat), total)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
}
