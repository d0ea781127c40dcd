package actors_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
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
