package actors_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/proto/kitpb"
)

// BenchmarkPostEvents compares BenchmarkPost's path with and without an
// installation subscribed to message.posted in every conversation: the
// write of the event into the outbox, the notice, and the delivery
// actor's sequencing (its commits run on other goroutines, so cpu-ns/op,
// the process's CPU time per post, is the figure to compare), on a real
// disk:
//
//	go test ./actors/ -run '^$' -bench PostEvents -count 6
func BenchmarkPostEvents(b *testing.B) {
	for _, tc := range []struct {
		name   string
		events []string
	}{{"unsubscribed", nil}, {"subscribed", []string{"message.posted"}}} {
		b.Run(tc.name, func(b *testing.B) {
			// A real disk: the in-memory filesystem copies its growing
			// files, which would count every byte written many times.
			n, err := startNodeAt(vfs.Default, b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = n.stop() })
			n.env.Limits = nil
			w := n.workspace(b, 1)
			convs := make([]string, 1000)
			for i := range convs {
				convs[i] = n.channel(b, w.id, w.users[0])
			}
			v := n.mustUpload(b, w.id, eventsManifest(newSlug(), "1.0.0", chatScopes, tc.events), false)
			inst := n.install(b, w.id, v.Kit.Id, "")
			for _, c := range convs {
				n.addChannel(b, inst.Id, c)
			}
			p, err := n.auth.Authenticate([]byte(n.botToken(b, inst.Id)))
			if err != nil {
				b.Fatal(err)
			}
			caller := p.Caller
			b.SetParallelism(32) // 64 posters on 2 CPUs, as kitbench drives it
			start := cpuTime()
			roundRobin(b, len(convs), func(i int) error {
				_, err := try[*kitpb.MessageReply](n, actors.KindConversation, convs[i], &kitpb.PostMessage{
					Caller: caller, Text: "a benchmark message of ordinary length",
				})
				return err
			})
			// What the delivery actor still has to take counts too.
			ask[*kitpb.QueuedEventsReply](b, n, actors.KindDelivery, inst.Id, &kitpb.ListQueuedEvents{Limit: 1})
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPostEventsDelivered is BenchmarkPostEvents' subscribed post
// with its event delivered: a sender without HTTP (benchSender) takes
// what the delivery actor hands out and records each attempt a success,
// as deliveries.Sender does, so that cpu-ns/op counts the sequencing, the
// takes and the records of the outcomes, the store work of every one of
// them, and none of the HTTPS (docs/deliveries.md, "Cost on the write
// path"):
//
//	go test ./actors/ -run '^$' -bench PostEventsDelivered -benchtime 100000x -count 3
func BenchmarkPostEventsDelivered(b *testing.B) {
	for _, installations := range []int{8, 1} {
		b.Run(fmt.Sprintf("installations=%d", installations), func(b *testing.B) {
			benchmarkPostEventsDelivered(b, installations)
		})
	}
}

func benchmarkPostEventsDelivered(b *testing.B, installations int) {
	n, err := startNodeAt(vfs.Default, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.stop() })
	n.env.Limits = nil
	s := &benchSender{n: n, pumps: make(map[string]chan struct{}), kits: make(map[string]string)}
	n.env.Deliveries = s
	w := n.workspace(b, 1)
	convs := make([]string, 1000)
	for i := range convs {
		convs[i] = n.channel(b, w.id, w.users[0])
	}
	// The posts are a Kit's subscribed to nothing; the events go to
	// installations others, each with its bot in its share of the
	// channels, as kitbench -event-installations spreads them (8 for the
	// cost goals; with 1, the 10 in flight cap delivery below the rate of
	// the posts, and the backlog is read back).
	poster := n.mustUpload(b, w.id, eventsManifest(newSlug(), "1.0.0", chatScopes, nil), false)
	pinst := n.install(b, w.id, poster.Kit.Id, "")
	for _, c := range convs {
		n.addChannel(b, pinst.Id, c)
	}
	for k := range installations {
		v := n.mustUpload(b, w.id, eventsManifest(newSlug(), "1.0.0", chatScopes, []string{"message.posted"}), false)
		inst := n.install(b, w.id, v.Kit.Id, "")
		s.kits[inst.Id] = v.Kit.Id
		for i := k; i < len(convs); i += installations {
			n.addChannel(b, inst.Id, convs[i])
		}
	}
	p, err := n.auth.Authenticate([]byte(n.botToken(b, pinst.Id)))
	if err != nil {
		b.Fatal(err)
	}
	caller := p.Caller
	b.SetParallelism(32)
	before := storeCounts(b, n)
	start := cpuTime()
	roundRobin(b, len(convs), func(i int) error {
		_, err := try[*kitpb.MessageReply](n, actors.KindConversation, convs[i], &kitpb.PostMessage{
			Caller: caller, Text: "a benchmark message of ordinary length",
		})
		return err
	})
	// Until every event was delivered.
	for s.delivered.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	after := storeCounts(b, n)
	for i, unit := range []string{"writes/op", "fsyncs/op", "wal-B/op", "flush-B/op", "compact-B/op"} {
		b.ReportMetric((after[i]-before[i])/float64(b.N), unit)
	}
	s.close()
}

// storeCounts are the store's committed batches, WAL syncs, WAL bytes and
// the bytes its flushes and compactions wrote so far.
func storeCounts(b *testing.B, n *testNode) [5]float64 {
	var w metrics.Writer
	n.store.Collect(&w)
	mfs := metricstest.Parse(b, w.Bytes())
	return [5]float64{
		float64(mfs["kitd_pebble_batch_bytes"].GetMetric()[0].GetHistogram().GetSampleCount()),
		metricstest.Value(mfs, "kitd_pebble_wal_syncs_total"),
		metricstest.Value(mfs, "kitd_pebble_wal_bytes_written_total"),
		metricstest.Value(mfs, "kitd_pebble_flush_bytes_written_total"),
		metricstest.Value(mfs, "kitd_pebble_compaction_bytes_written_total"),
	}
}

// benchSender is deliveries.Sender's pump and chains without HTTP: every
// attempt succeeds at once.
type benchSender struct {
	n         *testNode
	kits      map[string]string // by installation
	delivered atomic.Int64
	mu        sync.Mutex
	pumps     map[string]chan struct{}
	closed    bool
}

func (s *benchSender) EventsQueued(inst string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	wake, ok := s.pumps[inst]
	if !ok {
		wake = make(chan struct{}, 1)
		s.pumps[inst] = wake
		go s.pump(inst, wake)
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (s *benchSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, wake := range s.pumps {
		close(wake)
	}
}

func (s *benchSender) pump(inst string, wake chan struct{}) {
	for range wake {
		for {
			r, err := try[*kitpb.DeliveriesReply](s.n, actors.KindDelivery, inst, &kitpb.TakeDeliveries{Max: actors.MaxInFlightPerInstallation})
			if err != nil || len(r.Events) == 0 {
				break
			}
			for _, ev := range r.Events {
				go s.chain(inst, ev, wake)
			}
		}
	}
}

func (s *benchSender) chain(inst string, ev *kitpb.Event, wake chan struct{}) {
	for ev != nil {
		r, err := try[*kitpb.DeliveriesReply](s.n, actors.KindDelivery, inst, &kitpb.RecordAttempt{
			Sequence: ev.Sequence, Delivered: true, HttpStatus: 200, KitId: s.kits[inst], TakeNext: actors.MaxInFlightPerInstallation,
		})
		s.delivered.Add(1)
		ev = nil
		if err == nil && len(r.Events) > 0 {
			for _, e := range r.Events[1:] {
				go s.chain(inst, e, wake)
			}
			ev = r.Events[0]
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}
