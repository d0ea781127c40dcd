package actors

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// A delivery actor keeps the records of waiting events in memory, within
// heldBudget, and stops counting a record once it leaves for its attempt
// or the queue: a budget that leaked would end up holding nothing.
func TestHeldRecordsStayWithinTheirBudget(t *testing.T) {
	var q deliveryQueue
	rec := make([]byte, heldBudget/4+1)
	var ds []*delivery
	for seq := uint64(1); seq <= 4; seq++ {
		d := q.push("c", seq, 0)
		q.hold(d, rec, true)
		ds = append(ds, d)
	}
	for i, want := range []bool{true, true, true, false} {
		if got := ds[i].rec != nil; got != want {
			t.Fatalf("record %d held: %v, want %v (budget %d, held %d)", i+1, got, want, heldBudget, q.held)
		}
	}
	// The first leaves for its attempt, as takeDeliveries does, then is
	// delivered; the second is popped while waiting (dead-lettered).
	q.release(ds[0])
	ds[0].inFlight = true
	ds[0].inFlight, ds[0].rec = false, nil
	q.pop(1)
	q.pop(2)
	if want := len(rec); q.held != want {
		t.Fatalf("held %d bytes after two left, want %d", q.held, want)
	}
	q.hold(q.push("c", 5, 0), rec, true)
	if q.state[5].rec == nil {
		t.Fatal("a record within the budget freed by the others was not held")
	}
}

// A record is not held when the node's delivery queues are out of room,
// whatever the installation's own budget.
func TestHeldRecordsWaitForTheNodesRoom(t *testing.T) {
	var q deliveryQueue
	d := q.push("c", 1, 0)
	q.hold(d, make([]byte, 100), false)
	if d.rec != nil || q.held != 0 {
		t.Fatalf("held %d bytes without the node's room", q.held)
	}
}

// queuedEventBytes, which the node's account of its delivery queues
// charges an event, is what a queued event costs, within a factor of 1.5
// either way: a figure that drifted from the code would let the queues
// take far more memory than --delivery-memory says, or far less.
func TestQueuedEventMemory(t *testing.T) {
	const n = 100_000
	sources := make([]string, 1000)
	for i := range sources {
		sources[i] = fmt.Sprintf("0192f0c4-8a7b-7c3d-9e1f-%012d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var q deliveryQueue
	var tk takenRecords
	tk.live = make(map[uint64]int)
	for seq := uint64(1); seq <= n; seq++ {
		d := q.push(sources[seq%uint64(len(sources))], seq, int64(seq))
		d.outboxPos, d.takenBy = seq, seq-seq%maxTakenPerRecord+1
		tk.live[d.takenBy]++
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(&q)
	runtime.KeepAlive(&tk)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	if per < queuedEventBytes/1.5 || per > queuedEventBytes*1.5 {
		t.Fatalf("a queued event costs %.0f bytes, queuedEventBytes says %d", per, queuedEventBytes)
	}
}

// The metrics' oldest waiting event is the first queued that is still
// waiting, whatever leaves around it.
func TestOldestWaitingEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(q *deliveryQueue)
		want  int64
	}{
		{"an empty queue has none", func(q *deliveryQueue) {}, 0},
		{"the first queued", func(q *deliveryQueue) {
			q.push("a", 1, 10)
			q.push("b", 2, 20)
		}, 10},
		{"once it left, the next queued", func(q *deliveryQueue) {
			q.push("a", 1, 10)
			q.push("b", 2, 20)
			q.pop(1)
		}, 20},
		{"a retrying head stays the oldest while newer events leave", func(q *deliveryQueue) {
			q.push("a", 1, 10)
			for seq := uint64(2); seq < 500; seq++ {
				q.push("b", seq, int64(seq)*10)
				q.pop(seq)
			}
		}, 10},
		{"a redelivered event counts from its redelivery", func(q *deliveryQueue) {
			q.push("a", 1, 10)
			q.pop(1)
			q.push("a", 2, 20)
			q.insert("a", 1, 30)
		}, 20},
		{"every event left: none", func(q *deliveryQueue) {
			for seq := uint64(1); seq < 300; seq++ {
				q.push("a", seq, int64(seq))
				q.pop(seq)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q deliveryQueue
			tc.steps(&q)
			if got := q.oldest(); got != tc.want {
				t.Fatalf("oldest %d, want %d", got, tc.want)
			}
			if len(q.order)-q.head > 2*len(q.state)+65 {
				t.Fatalf("%d entries kept for %d waiting events", len(q.order)-q.head, len(q.state))
			}
		})
	}
}

// A listing's page of the queue is the n sequences it shows, in order,
// whatever order the queue's map walks them in.
func TestQueuedSequencesOfAPage(t *testing.T) {
	var q deliveryQueue
	for _, seq := range []uint64{9, 2, 7, 4, 11, 1, 5, 12, 3} {
		q.push("c", seq, 0)
	}
	for _, tc := range []struct {
		name         string
		lower, upper uint64
		n            int
		highest      bool
		want         []uint64
	}{
		{"all of them, in order", 0, 0, 0, false, []uint64{1, 2, 3, 4, 5, 7, 9, 11, 12}},
		{"the lowest n after a sequence", 4, 0, 3, false, []uint64{4, 5, 7}},
		{"the highest n below a cursor", 0, 11, 3, true, []uint64{5, 7, 9}},
		{"the highest n of all", 0, 0, 2, true, []uint64{11, 12}},
		{"fewer than n in the range", 10, 0, 5, false, []uint64{11, 12}},
		{"none in the range", 13, 0, 5, true, nil},
		{"n of one", 0, 5, 1, true, []uint64{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := q.seqs(tc.lower, tc.upper, tc.n, tc.highest); !slices.Equal(got, tc.want) {
				t.Fatalf("seqs(%d, %d, %d, %v) = %v, want %v", tc.lower, tc.upper, tc.n, tc.highest, got, tc.want)
			}
		})
	}
}

// A take that fails on one head (its record cannot be read) after it
// marked others in flight puts them back: the sender hands out nothing of
// a failed take, and a head left in flight would be sent and recorded
// never, its conversation blocked for good.
func TestAFailedTakeLeavesNoHeadInFlight(t *testing.T) {
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The conversations' order in a take is a map's: enough tries put
	// the readable head first.
	for range 50 {
		a := &deliveryActor{env: &Env{Store: store, Clock: clock.NewTest()}, id: "inst", durable: 100, ep: &kitpb.DeliveryEndpoint{}}
		held := a.q.push("conv-a", 1, 0)
		a.q.hold(held, marshal(&kitpb.Event{Sequence: 1, ConversationId: "conv-a"}), true)
		heldBytes := a.q.held
		missing := a.q.push("conv-b", 2, 0)
		missing.stored = true // its queue record is not in the store: the read fails
		if _, err := a.takeDeliveries(&kitpb.TakeDeliveries{Max: MaxInFlightPerInstallation}); err == nil {
			t.Fatal("a take of a head whose record is missing succeeded")
		}
		if held.inFlight || a.q.inFlight != 0 || a.q.held != heldBytes {
			t.Fatalf("after a failed take: sequence 1 in flight %v, %d in flight, %d bytes held; want none in flight and %d held",
				held.inFlight, a.q.inFlight, a.q.held, heldBytes)
		}
	}
}
