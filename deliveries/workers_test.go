package deliveries

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// fakeQueue is a delivery actor that hands out the events pushed to it, one
// a take, and passes on the attempts recorded.
type fakeQueue struct {
	takes    atomic.Int32
	inFlight int32 // handed out and not recorded
	events   chan *kitpb.Event
	recorded chan *kitpb.RecordAttempt
	// hold, when set, keeps the record of an attempt from being answered
	// until it is closed.
	hold chan struct{}
	// onEmptyTake, when set, runs once, as a take finds nothing, before it
	// is answered.
	onEmptyTake func()
}

func (q *fakeQueue) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *kitpb.TakeDeliveries:
		q.takes.Add(1)
		r := &kitpb.DeliveriesReply{}
		select {
		case ev := <-q.events:
			r.Events = []*kitpb.Event{ev}
			q.inFlight++
		default:
			if f := q.onEmptyTake; f != nil {
				q.onEmptyTake = nil
				f()
			}
		}
		r.InFlight = q.inFlight
		ctx.Respond(r)
	case *kitpb.RecordAttempt:
		q.inFlight--
		q.recorded <- m
		if q.hold != nil {
			<-q.hold
		}
		ctx.Respond(&kitpb.DeliveriesReply{})
	}
}

// noInstallation answers every lookup of an installation as not found: the
// attempt fails before any HTTP and is recorded.
type noInstallation struct{}

func (noInstallation) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetInstallation); ok {
		ctx.Respond(&kitpb.Failure{Code: string(kiterr.NotFound), Message: "no such installation"})
	}
}

// startSender is a sender over a node whose one delivery actor is q.
func startSender(t *testing.T, q *fakeQueue) *Sender {
	t.Helper()
	node, err := cluster.Start(cluster.Config{},
		&cluster.Kind{Name: actors.KindDelivery, New: func(string) actor.Actor { return q }},
		&cluster.Kind{Name: actors.KindInstallation, New: func(string) actor.Actor { return noInstallation{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	s := New(Config{Node: node})
	t.Cleanup(s.Close)
	return s
}

func newFakeQueue() *fakeQueue {
	return &fakeQueue{events: make(chan *kitpb.Event, 1), recorded: make(chan *kitpb.RecordAttempt, 1)}
}

// recorded waits for the record of the attempt at sequence seq.
func (q *fakeQueue) recordedAttempt(t *testing.T, seq uint64) {
	t.Helper()
	select {
	case rec := <-q.recorded:
		if rec.Sequence != seq || rec.ErrorCode == "" {
			t.Fatalf("attempt recorded as sequence %d, error %q; want sequence %d, failed", rec.Sequence, rec.ErrorCode, seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("attempt %d not recorded after 10 s", seq)
	}
}

// An event queued while the pump finds nothing and retires is sent: the
// wake-up that retire takes makes the pump take again, where it used to
// wait for another wake-up, which a quiet installation may never send.
func TestAnEventQueuedAsThePumpRetiresIsSent(t *testing.T) {
	q := newFakeQueue()
	s := startSender(t, q)
	q.onEmptyTake = func() {
		q.events <- &kitpb.Event{Sequence: 1}
		s.EventsQueued("inst") // as the actor's notice does, before the take's answer
	}
	s.EventsQueued("inst")
	q.recordedAttempt(t, 1)
}

// A quiet installation's event costs the pump two takes: the one that
// hands it out, and the one after its attempt that finds nothing and
// retires the pump. A take right after the first found nothing either:
// what it handed out was all that could go.
func TestAQuietInstallationsEventCostsTwoTakes(t *testing.T) {
	q := newFakeQueue()
	s := startSender(t, q)
	for i := uint64(1); i <= 3; i++ {
		q.events <- &kitpb.Event{Sequence: i}
		s.EventsQueued("inst")
		q.recordedAttempt(t, i)
		eventually.True(t, "the pump retired", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.pumps) == 0
		})
		if n := q.takes.Load(); n != int32(2*i) {
			t.Fatalf("%d takes for %d events, want %d", n, i, 2*i)
		}
	}
}

// The pumps and the chains of attempts run on kept goroutines: a quiet
// installation's events, one at a time, are sent by the same few workers,
// whose stacks grew once, not by a goroutine started (and its stack grown
// through the HTTPS client and an actor call) for each.
func TestAQuietInstallationsAttemptsRunOnKeptWorkers(t *testing.T) {
	q := newFakeQueue()
	q.hold = make(chan struct{})
	s := startSender(t, q)
	release := sync.OnceFunc(func() { close(q.hold) })
	t.Cleanup(release) // before the sender's Close, which waits for the attempt
	q.events <- &kitpb.Event{Sequence: 1}
	s.EventsQueued("inst")
	q.recordedAttempt(t, 1)
	// The chain was started by the pump, on a worker of its own.
	if n := s.workers.Running(); n != 2 {
		t.Fatalf("%d workers while the pump's first attempt is recorded, want 2 (the pump's, the chain's)", n)
	}
	release()
	const events = 100
	for i := uint64(2); i <= events; i++ {
		q.events <- &kitpb.Event{Sequence: i}
		s.EventsQueued("inst")
		q.recordedAttempt(t, i)
	}
	// A job that comes before the last worker parked starts another; a
	// worker never taken again would make one or two an event.
	if n := s.workers.Running(); n > 10 {
		t.Fatalf("%d workers sent %d events one at a time, want at most 10", n, events)
	}
}
