package actors_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/internal/partition"
)

// behindBound is the queue's bound in these tests: a backlog of a few
// dozen events is past it.
const behindBound = 8

// drained is what delivering every event of an installation found: the
// texts in the order they went, each conversation's apart, and the
// sequences.
type drained struct {
	order  []string
	byConv map[string][]string
	seqs   []uint64
}

// drain takes and delivers the installation's events until want have gone,
// checking after each step that the queue never holds more than bound.
// What waits in the outbox is taken on a goroutine of the actor's own
// (catchUpNow), so a take may find nothing for a moment. The deadline is
// a stall's, renewed by every event taken: hundreds of events, a few
// writes each, can take longer than Within under the race detector at
// CI's low priority without anything being stuck.
func drain(t *testing.T, n *testNode, inst string, want, bound int) drained {
	t.Helper()
	d := drained{byConv: map[string][]string{}}
	for deadline := time.Now().Add(eventually.Within); len(d.order) < want; {
		if time.Now().After(deadline) {
			t.Fatalf("no event for %v, %d of %d delivered", eventually.Within, len(d.order), want)
		}
		if q := queued(t, n, inst); len(q) > bound {
			t.Fatalf("%d events queued in memory, past the bound of %d", len(q), bound)
		}
		evs := take(t, n, inst).Events
		if len(evs) > 0 {
			deadline = time.Now().Add(eventually.Within)
		}
		for _, ev := range evs {
			d.order = append(d.order, ev.Message.GetText())
			d.byConv[ev.ConversationId] = append(d.byConv[ev.ConversationId], ev.Message.GetText())
			d.seqs = append(d.seqs, ev.Sequence)
			record(t, n, inst, ev.Sequence, true)
		}
	}
	if r := take(t, n, inst); len(r.Events) != 0 {
		t.Fatalf("after the %d events, %q more", want, eventTexts(r.Events))
	}
	return d
}

// inOrder checks that every event was delivered once, each conversation's
// in the order posted, under sequences without gaps.
func (d drained) inOrder(t *testing.T, posted map[string][]string) {
	t.Helper()
	for c, want := range posted {
		if got := d.byConv[c]; !slices.Equal(got, want) {
			t.Fatalf("conversation %s delivered %q, want %q", c, got, want)
		}
	}
	seqs := slices.Clone(d.seqs)
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequences %v: a gap or a repeat", seqs)
		}
	}
}

// restartedAfter is a node, whose queues hold behindBound events, started
// again after count posts into each of two conversations were taken.
func restartedAfter(t *testing.T, count int) (*testNode, *eventsFixture, map[string][]string) {
	t.Helper()
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	n.env.DeliveryQueueMax = behindBound
	f, cs := deliveryFixture(t, n, 2)
	posted := postEach(t, n, f, cs, count)
	queued(t, n, f.inst.Id) // commits the takes
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	n.env.DeliveryQueueMax = behindBound
	return n, f, posted
}

// inOutboxOrder is the two conversations in the order of their entries in
// the installation's outbox.
func inOutboxOrder(inst, x, y string) (string, string) {
	if bytes.Compare(actors.OutboxSourcePrefix(inst, x), actors.OutboxSourcePrefix(inst, y)) > 0 {
		return y, x
	}
	return x, y
}

// postEach posts count events in each conversation, in turn, and returns
// the texts posted by conversation.
func postEach(t *testing.T, n *testNode, f *eventsFixture, convs []string, count int) map[string][]string {
	t.Helper()
	posted := map[string][]string{}
	for i := range count {
		for _, c := range convs {
			text := fmt.Sprintf("%s-%d", c[len(c)-6:], i) // ids share their time prefix
			n.post(t, f.user, c, postReq{text: text})
			posted[c] = append(posted[c], text)
		}
	}
	return posted
}

// A delivery actor keeps at most its bound of events queued in memory
// (actors.MaxQueuedInMemory): the rest wait in the outbox, taken a range
// at a time as the queue drains, and go in their conversations' order
// under gapless sequences, after a restart too.
func TestABacklogPastTheQueuesBoundWaitsInTheOutbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"the queue holds its bound, and every event goes in order", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 3)
			posted := postEach(t, n, f, cs, 8)
			if q := queued(t, n, f.inst.Id); len(q) != behindBound {
				t.Fatalf("%d events queued after 24 posts, want the bound, %d", len(q), behindBound)
			}
			if !listDeliveries(t, n, f.inst.Id, 0, 10).WaitingInOutbox {
				t.Fatal("the deliveries list does not say that more events wait in the outbox")
			}
			drain(t, n, f.inst.Id, 24, behindBound).inOrder(t, posted)
			// The last read of the outbox, which finds it empty, comes a
			// moment after the last take (catchUpNow).
			eventually.True(t, "the deliveries list no longer saying that events wait in the outbox", func() bool {
				return !listDeliveries(t, n, f.inst.Id, 0, 10).WaitingInOutbox
			})
		}},
		{"a restart takes no more than the bound from the outbox", func(t *testing.T) {
			n, f, posted := restartedAfter(t, 10)
			if q := queued(t, n, f.inst.Id); len(q) != behindBound {
				t.Fatalf("%d events queued after the restart, want the bound, %d", len(q), behindBound)
			}
			drain(t, n, f.inst.Id, 20, behindBound).inOrder(t, posted)
		}},
		{"a restart with a full queue and nothing in the outbox is not behind", func(t *testing.T) {
			n, f, _ := restartedAfter(t, behindBound/2) // the bound exactly
			if q := queued(t, n, f.inst.Id); len(q) != behindBound {
				t.Fatalf("%d events queued after the restart, want the %d stored", len(q), behindBound)
			}
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
		}},
		{"a conversation's long backlog keeps no other waiting behind it", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			// long sorts first in the outbox, so that a take in key order
			// alone would reach short only once long is through.
			long, short := inOutboxOrder(f.inst.Id, cs[0], cs[1])
			posted := postEach(t, n, f, []string{long}, 30)
			for k, v := range postEach(t, n, f, []string{short}, 1) {
				posted[k] = v
			}
			d := drain(t, n, f.inst.Id, 31, behindBound)
			d.inOrder(t, posted)
			// The first take from the outbox, once the queue drained to
			// half, takes from both.
			if i := slices.Index(d.order, posted[short][0]); i > behindBound/2+1 {
				t.Fatalf("the short conversation's event went %dth of 31, after %d of the long one's: want it among the first %d", i+1, i, behindBound/2+2)
			}
		}},
		{"a conversation's burst leaves room for the others while its head fails", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			burst, other := cs[0], cs[1]
			postEach(t, n, f, []string{burst}, 10)
			posted := postEach(t, n, f, []string{other}, 5)
			var got []string
			for deadline := time.Now().Add(eventually.Within); len(got) < 5; {
				if time.Now().After(deadline) {
					t.Fatalf("the other conversation's events delivered: %q of %q, while the burst's head waits for its retry", got, posted[other])
				}
				for _, ev := range take(t, n, f.inst.Id).Events {
					ok := ev.ConversationId == other
					record(t, n, f.inst.Id, ev.Sequence, ok) // the burst's head fails, and waits 10 s
					if ok {
						got = append(got, ev.Message.GetText())
					}
				}
			}
			if !slices.Equal(got, posted[other]) {
				t.Fatalf("delivered %q, want %q", got, posted[other])
			}
		}},
		{"a conversation past its share is read back as it drains", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = 64 // a share of 4
			f, cs := deliveryFixture(t, n, 1)
			posted := postEach(t, n, f, cs, 40)
			if q := len(queued(t, n, f.inst.Id)); q != 4 {
				t.Fatalf("%d of one conversation's 40 events queued, want its share, 4", q)
			}
			metricIs(t, n, 1, "kitd_delivery_installations_behind")
			drain(t, n, f.inst.Id, 40, 4).inOrder(t, posted)
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
		}},
		{"a conversation whose outbox empties into exactly its share lags no more", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = 64 // a share of 4
			f, cs := deliveryFixture(t, n, 1)
			postEach(t, n, f, cs, 8)
			for range 2 { // down to half its share, twice: 2 read back each time
				for delivered := 0; delivered < 2; {
					for _, ev := range take(t, n, f.inst.Id).Events {
						record(t, n, f.inst.Id, ev.Sequence, true)
						delivered++
					}
				}
				eventually.True(t, "the share filled again from the outbox", func() bool { return len(queued(t, n, f.inst.Id)) == 4 })
			}
			// The outbox is empty now, with the last 4 events queued.
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
			if listDeliveries(t, n, f.inst.Id, 0, 10).WaitingInOutbox {
				t.Fatal("the deliveries list says that events wait in the outbox, which is empty")
			}
		}},
		{"a read of the outbox that failed is tried again by its retry alone", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			posted := postEach(t, n, f, cs, 10)
			reads := &failingReads{}
			reads.failing.Store(true)
			n.env.Reads = reads
			for delivered := 0; delivered < 4; {
				for _, ev := range take(t, n, f.inst.Id).Events {
					record(t, n, f.inst.Id, ev.Sequence, true)
					delivered++
				}
			}
			eventually.True(t, "a failed read of the outbox", func() bool { return reads.calls.Load() > 0 })
			for range 20 {
				queued(t, n, f.inst.Id)
			}
			if calls := reads.calls.Load(); calls > 2*64 {
				t.Fatalf("%d catch-ups of a partition after 20 messages to an installation whose read failed, want one read of the 64 partitions, two if its retry came", calls)
			}
			reads.failing.Store(false)
			rest := drain(t, n, f.inst.Id, 16, behindBound)
			if len(rest.order)+4 != 20 {
				t.Fatalf("%d events after the read succeeded, want the other 16", len(rest.order))
			}
			for c, texts := range posted {
				if got := rest.byConv[c]; !slices.Equal(got, texts[len(texts)-len(got):]) {
					t.Fatalf("conversation %s delivered %q after the failure, want the end of %q", c, got, texts)
				}
			}
		}},
		{"conversations with long backlogs take turns", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			first, second := inOutboxOrder(f.inst.Id, cs[0], cs[1])
			posted := postEach(t, n, f, []string{first, second}, 30)
			d := drain(t, n, f.inst.Id, 60, behindBound)
			d.inOrder(t, posted)
			// A take that begins where the last one ended, past the
			// conversation that had its turn, gives each as much.
			last := slices.Index(d.order, posted[first][29])
			if gone := len(d.byConv[second]) - (60 - 1 - last); gone < 25 {
				t.Fatalf("when the first conversation's last event went, %d of the second's had, want 25 or more", gone)
			}
		}},
		{"an installation behind is counted, and no more once it caught up", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			postEach(t, n, f, cs, 6)
			metricIs(t, n, 1, "kitd_delivery_installations_behind")
			metricIs(t, n, behindBound, "kitd_delivery_backlog_events")
			drain(t, n, f.inst.Id, 12, behindBound)
			metricIs(t, n, 0, "kitd_delivery_installations_behind")
		}},
		{"an installation caught up takes notices again", func(t *testing.T) {
			n := ownNode(t)
			n.env.DeliveryQueueMax = behindBound
			f, cs := deliveryFixture(t, n, 2)
			posted := postEach(t, n, f, cs, 6)
			drain(t, n, f.inst.Id, 12, behindBound)
			more := postEach(t, n, f, cs, 2)
			if q := queued(t, n, f.inst.Id); len(q) != 4 {
				t.Fatalf("%d events queued after 4 posts past the backlog, want 4", len(q))
			}
			d := drain(t, n, f.inst.Id, 4, behindBound)
			for c := range more {
				if got, want := d.byConv[c], more[c]; !slices.Equal(got, want) {
					t.Fatalf("conversation %s delivered %q, want %q (after %q)", c, got, want, posted[c])
				}
			}
		}},
		{"the node's budget bounds every queue together, yet each installation keeps its floor", func(t *testing.T) {
			n := ownNode(t)
			const budget = 64 << 10
			n.env.DeliveryMemory = budget
			down, cs := deliveryFixture(t, n, 3)
			posted := postEach(t, n, down, cs, 100)
			if q := len(queued(t, n, down.inst.Id)); q < 100 || q >= 300 {
				t.Fatalf("%d of 300 events queued with the node's budget spent, want the floor of 100 or more, and not all", q)
			}
			metricIs(t, n, 1, "kitd_delivery_installations_behind")
			if used := metricstest.Value(scrape(t, n), "kitd_delivery_memory_bytes"); used > budget+4<<10 {
				t.Fatalf("the delivery queues use %v bytes, past the node's %d", used, budget)
			}
			up, us := deliveryFixture(t, n, 1)
			postEach(t, n, up, us, 50)
			if q := len(queued(t, n, up.inst.Id)); q != 50 {
				t.Fatalf("another installation queued %d of its 50 events, want all: they are within its floor", q)
			}
			drain(t, n, down.inst.Id, 300, 300).inOrder(t, posted)
			drain(t, n, up.inst.Id, 50, 50)
			metricIs(t, n, 0, "kitd_delivery_memory_bytes")
		}},
		{"past a second budget of floors, an installation keeps only twice its events in flight", func(t *testing.T) {
			n := ownNode(t)
			const budget = 16 << 10
			n.env.DeliveryMemory = budget
			type down struct {
				f      *eventsFixture
				cs     []string
				posted map[string][]string
			}
			var downs []down
			var kept []int
			for range 5 {
				f, cs := deliveryFixture(t, n, 2)
				downs = append(downs, down{f, cs, postEach(t, n, f, cs, 75)})
				kept = append(kept, len(queued(t, n, f.inst.Id)))
			}
			used := metricstest.Value(scrape(t, n), "kitd_delivery_memory_bytes")
			if last := kept[len(kept)-1]; last != 20 || used < 2*budget {
				t.Fatalf("with %v bytes of the node's %d used, installations one after the other queued %v of their 150 events, want the last 20", used, budget, kept)
			}
			if used > 2*budget+float64(len(downs))*(20*160+4<<10) {
				t.Fatalf("the delivery queues use %v bytes: past the two budgets of %d and 20 events an installation", used, budget)
			}
			// The last one's queue is held to 20, each conversation to
			// half of it: one whose head fails keeps none of the other's
			// 75 events waiting, though a queue of 20 refills at 10.
			last := downs[len(downs)-1]
			failing, other := last.cs[0], last.cs[1]
			var got []string
			for deadline := time.Now().Add(eventually.Within); len(got) < 75; {
				if time.Now().After(deadline) {
					t.Fatalf("%d of the other conversation's 75 events delivered, none for %v, while the first one's head failed", len(got), eventually.Within)
				}
				if q := len(queued(t, n, last.f.inst.Id)); q > 20 {
					t.Fatalf("%d events queued, past the floor of 20", q)
				}
				for _, ev := range take(t, n, last.f.inst.Id).Events {
					ok := ev.ConversationId == other
					record(t, n, last.f.inst.Id, ev.Sequence, ok) // the failing head waits for its retry
					if ok {
						got = append(got, ev.Message.GetText())
						deadline = time.Now().Add(eventually.Within) // a stall's deadline, as drain's
					}
				}
			}
			if !slices.Equal(got, last.posted[other]) {
				t.Fatalf("the other conversation delivered %q, want %q", got, last.posted[other])
			}
			n.clk.Advance(actors.MaxRetryWait)
			rest := drain(t, n, last.f.inst.Id, 75, 20)
			if !slices.Equal(rest.byConv[failing], last.posted[failing]) {
				t.Fatalf("the failing conversation delivered %q, want %q", rest.byConv[failing], last.posted[failing])
			}
			for _, d := range downs[:len(downs)-1] {
				drain(t, n, d.f.inst.Id, 150, 100).inOrder(t, d.posted)
			}
			metricIs(t, n, 0, "kitd_delivery_memory_bytes")
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// failingReads is a ReadBarrier that counts its catch-ups and, while
// failing, refuses them, as a partition without a leader does.
type failingReads struct {
	failing atomic.Bool
	calls   atomic.Int64
}

func (r *failingReads) CatchUp(partition.ID) error {
	r.calls.Add(1)
	if r.failing.Load() {
		return errors.New("no leader")
	}
	return nil
}
