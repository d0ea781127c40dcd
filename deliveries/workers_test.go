package deliveries

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
	// onRecord, when set, runs once, as an attempt is recorded, before it
	// is answered.
	onRecord func()
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
		if f := q.onRecord; f != nil {
			q.onRecord = nil
			f()
		}
		ctx.Respond(&kitpb.DeliveriesReply{InFlight: q.inFlight})
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
	return startSenderOn(t, cluster.Config{}, q)
}

// startSenderOn is a sender over a node of cfg whose one delivery actor
// is q.
func startSenderOn(t *testing.T, cfg cluster.Config, q actor.Actor) *Sender {
	t.Helper()
	node, err := cluster.Start(cfg,
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

// deliveredAttempt waits for the record of the attempt at sequence seq,
// which must have been delivered.
func (q *fakeQueue) deliveredAttempt(t *testing.T, seq uint64) {
	t.Helper()
	select {
	case rec := <-q.recorded:
		if rec.Sequence != seq || !rec.Delivered {
			t.Fatalf("attempt recorded as sequence %d, delivered %v (%q); want sequence %d, delivered", rec.Sequence, rec.Delivered, rec.ErrorCode, seq)
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

// A quiet installation's event costs the pump one take, the one that
// hands it out: what it handed out was all that could go, and the record
// of the attempt says when nothing is left, so the pump retires without
// asking again. A notice that comes after the record was sent still makes
// it take: its event is sent.
func TestAQuietInstallationsEventCostsOneTake(t *testing.T) {
	for _, tc := range []struct {
		name string
		// noticeAtRecord queues an event and its notice as the actor
		// records the attempt, before it answers.
		noticeAtRecord bool
		// takes is how many the pump made; 0: as many as the order of
		// the notice's wake-up and the record's answer makes it, 2 or 3.
		takes int32
	}{
		{name: "the record finds the installation idle: no take after it", takes: 1},
		{name: "a notice after the record was sent: a take, which sends its event", noticeAtRecord: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newFakeQueue()
			s := startSender(t, q)
			reachable(t, s, "inst")
			if tc.noticeAtRecord {
				q.onRecord = func() {
					q.events <- &kitpb.Event{Sequence: 2}
					s.EventsQueued("inst")
				}
			}
			q.events <- &kitpb.Event{Sequence: 1}
			s.EventsQueued("inst")
			q.deliveredAttempt(t, 1)
			if tc.noticeAtRecord {
				q.deliveredAttempt(t, 2)
			}
			eventually.True(t, "the pump retired", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.pumps) == 0
			})
			if n := q.takes.Load(); tc.takes != 0 && n != tc.takes {
				t.Fatalf("%d takes, want %d", n, tc.takes)
			}
		})
	}
}

// The pump retires on an attempt's word only while no notice came after
// the record was sent: one that did may name an event the record did not
// see.
func TestRetireIdle(t *testing.T) {
	for _, tc := range []struct {
		name            string
		idle            bool
		idleAt, notices uint64
		retires         bool
	}{
		{"a record found it idle, no notice since: retire", true, 3, 3, true},
		{"a record found it idle, a notice since: take", true, 3, 4, false},
		{"no record found it idle: take", false, 3, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{})
			p := &pump{wake: make(chan struct{}, 1), idle: tc.idle, idleAt: tc.idleAt}
			p.notices.Store(tc.notices)
			s.pumps["inst"] = p
			if got := s.retireIdle("inst", p); got != tc.retires {
				t.Fatalf("retired %v, want %v", got, tc.retires)
			}
			if _, kept := s.pumps["inst"]; kept == tc.retires {
				t.Fatalf("pump kept %v after retiring %v", kept, tc.retires)
			}
			if p.idle {
				t.Fatal("the record's word was kept past the decision")
			}
		})
	}
}

// reachable gives installation inst of s a target that takes its events:
// a TLS server that answers 200, and the installation, the Kit and the
// version's endpoint as the sender keeps them.
func reachable(t *testing.T, s *Sender, inst string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	s.https = newKitClients(srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, []string{u.Host}, idleAfter)
	s.cfg.Encode = func(*kitpb.Event, string) ([]byte, error) { return []byte(`{}`), nil }
	now := s.cfg.Clock.Now()
	s.installs.put(inst, installed{kitID: "k1", version: "1.0.0"}, 0, now)
	s.signing.put("k1", []string{"kss_test"}, 0, now)
	s.endpoints["k1@1.0.0"] = u
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

// reclaimQueue is a delivery actor that notes whom it hands each event to,
// at most 10 in flight, and answers the record of the first attempt
// after the node's request timeout (the actor busy behind a slow commit):
// what that record hands out reaches no one. A take with reclaim puts
// back what was handed to its sender, to go first.
type reclaimQueue struct {
	last    uint64 // the last sequence there is; 0: a backlog without end
	perTake int    // the most a take hands out; 0: what it asks for

	mu       sync.Mutex
	next     uint64            // the last sequence handed out the first time
	again    []uint64          // reclaimed, to go first
	inFlight map[uint64]string // handed out, by sequence: to whom
	lost     []uint64          // handed out by the late answer
	recorded []uint64          // in the order of their records
	requests []string          // "take", "reclaim" or "record", and its round, in order
	reclaims atomic.Int32
}

func newReclaimQueue(last uint64, perTake int) *reclaimQueue {
	return &reclaimQueue{last: last, perTake: perTake, inFlight: map[uint64]string{}}
}

func (q *reclaimQueue) handOut(to string, max int) []*kitpb.Event {
	var evs []*kitpb.Event
	for len(q.inFlight) < actors.MaxInFlightPerInstallation && len(evs) < max {
		var seq uint64
		switch {
		case len(q.again) > 0:
			seq, q.again = q.again[0], q.again[1:]
		case q.last != 0 && q.next >= q.last:
			return evs
		default:
			q.next++
			seq = q.next
		}
		q.inFlight[seq] = to
		evs = append(evs, &kitpb.Event{Sequence: seq})
	}
	return evs
}

func (q *reclaimQueue) Receive(ctx actor.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *kitpb.TakeDeliveries:
		q.requests = append(q.requests, fmt.Sprintf("take %d", m.Round))
		if m.Reclaim {
			q.requests[len(q.requests)-1] = fmt.Sprintf("reclaim %d", m.Round)
			q.reclaims.Add(1)
			for seq, to := range q.inFlight {
				if to == m.Sender {
					delete(q.inFlight, seq)
					q.again = append(q.again, seq)
				}
			}
		}
		max := int(m.Max)
		if q.perTake > 0 {
			max = min(max, q.perTake)
		}
		ctx.Respond(&kitpb.DeliveriesReply{Events: q.handOut(m.Sender, max), InFlight: int32(len(q.inFlight))})
	case *kitpb.RecordAttempt:
		q.requests = append(q.requests, fmt.Sprintf("record %d", m.Round))
		delete(q.inFlight, m.Sequence)
		q.recorded = append(q.recorded, m.Sequence)
		r := &kitpb.DeliveriesReply{Events: q.handOut(m.Sender, int(m.TakeNext)), InFlight: int32(len(q.inFlight))}
		if m.Sequence == 1 {
			for _, ev := range r.Events {
				q.lost = append(q.lost, ev.Sequence)
			}
			sender, root := ctx.Sender(), ctx.ActorSystem().Root
			time.AfterFunc(300*time.Millisecond, func() { root.Send(sender, r) })
			return
		}
		ctx.Respond(r)
	}
}

// sendFrom has a sender whose requests time out after 100 ms send the
// events of q, an installation's.
func sendFrom(t *testing.T, q *reclaimQueue) {
	t.Helper()
	s := startSenderOn(t, cluster.Config{RequestTimeout: 100 * time.Millisecond}, q)
	reachable(t, s, "inst")
	s.EventsQueued("inst")
}

// lostSent reports whether every event the late answer handed out was
// recorded since.
func (q *reclaimQueue) lostSent() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, seq := range q.lost {
		if !slices.Contains(q.recorded, seq) {
			return false
		}
	}
	return len(q.lost) > 0
}

// An event handed out by a record whose answer came too late, and so
// reached no one, is taken back by its sender once it has no attempt in
// progress, and sent: it stayed in flight for good, its conversation
// blocked (docs/deliveries.md "Hand-outs whose answer is lost").
func TestAnEventHandedOutInALostAnswerIsSent(t *testing.T) {
	q := newReclaimQueue(2, 1)
	sendFrom(t, q)
	eventually.True(t, "the second event, handed out by the late answer, sent", q.lostSent)
	if q.reclaims.Load() == 0 {
		t.Fatal("the second event went without a reclaim")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(q.recorded, []uint64{1, 2}) {
		t.Fatalf("recorded %v, want 1 then 2", q.recorded)
	}
}

// A reclaim starts a new round of the sender's requests, and every request
// after it is of that round: one of an earlier round was given up on, and
// the actor ignores it if it comes late (TakeDeliveries.round). A pump
// started later for the installation, after its first retired, keeps the
// round: its requests would otherwise all be of a round given up on.
func TestAReclaimStartsARoundThatLaterPumpsKeep(t *testing.T) {
	q := newReclaimQueue(2, 1)
	s := startSenderOn(t, cluster.Config{RequestTimeout: 100 * time.Millisecond}, q)
	reachable(t, s, "inst")
	s.EventsQueued("inst")
	eventually.True(t, "the second event, handed out by the late answer, sent", q.lostSent)
	eventually.True(t, "the pump retired", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.pumps["inst"] == nil
	})
	q.mu.Lock()
	q.last = 3
	q.mu.Unlock()
	s.EventsQueued("inst")
	eventually.True(t, "the third event sent", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return slices.Contains(q.recorded, 3)
	})
	q.mu.Lock()
	defer q.mu.Unlock()
	var round uint64
	for i, r := range q.requests {
		var kind string
		var of uint64
		if _, err := fmt.Sscanf(r, "%s %d", &kind, &of); err != nil {
			t.Fatal(err)
		}
		switch {
		case kind == "reclaim" && of <= round && i > 0:
			t.Fatalf("requests %q: a reclaim of round %d after round %d, want a later round", q.requests, of, round)
		case of < round:
			t.Fatalf("requests %q: a %s of round %d after round %d", q.requests, kind, of, round)
		}
		round = of
	}
	if q.reclaims.Load() == 0 || round == 0 {
		t.Fatalf("requests %q, want a reclaim and the later pump's requests in its round", q.requests)
	}
}

// An installation with a backlog keeps its chains of attempts going, one
// after another: the pump's take that reclaims what a lost answer handed
// out comes only once none runs. So chains take no more once a request of
// their pump failed, and the pump waits for the last of them.
func TestALostHandOutIsReclaimedUnderABacklog(t *testing.T) {
	q := newReclaimQueue(0, 0)
	sendFrom(t, q)
	eventually.True(t, "the events the lost answer handed out reclaimed and sent", q.lostSent)
}
