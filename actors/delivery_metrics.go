package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/metrics"
)

// deliveryStats are the delivery actors' metrics (docs/decisions.md
// "Metrics"): attempts by outcome, counted where the outcome is decided,
// and each live delivery actor's backlog, which the actor publishes in
// atomics after each message it handles and a scrape folds into
// histograms across installations, so the series stay a fixed set
// however many installations there are.
type deliveryStats struct {
	outcomes [len(attemptOutcomes)]metrics.Counter
	// gapReads counts the notices whose source wrote entries the
	// delivery actor had not taken (takeNotice): notices lost or
	// overtaken on their way.
	gapReads metrics.Counter
	// queueReads counts the reads of queued events' records from the
	// store for a take: records not held in memory (heldBudget), read a
	// conversation's range at a time (readAhead) or one by one (a retry's).
	queueReads metrics.Counter
	// expired counts what the retention dropped (delivery_retention.go),
	// by expiredFrom.
	expired [len(expiredFrom)]metrics.Counter
	// reclaimed counts the heads in flight a sender took back: handed out
	// by a take or record whose answer it never had (reclaim).
	reclaimed metrics.Counter

	mu   sync.Mutex
	live map[*deliveryGauge]struct{}
}

// attemptOutcomes are the statuses of an attempt's developer log entry
// (docs/deliveries.md, "Developer log"), in the order of their counters.
var attemptOutcomes = [...]string{"delivered", "retry_scheduled", "dead_lettered", "paused"}

// expiredFrom are where the retention drops events from, in the order of
// their counters: the outbox (events that waited there, without a
// sequence) and the dead letters.
var expiredFrom = [...]string{"outbox", "dead_letters"}

const (
	expiredWaiting = iota
	expiredDead
)

// count counts an attempt with the status of its log entry.
func (s *deliveryStats) count(status string) {
	for i, o := range attemptOutcomes {
		if o == status {
			s.outcomes[i].Inc()
			return
		}
	}
}

// deliveryGauge is what one delivery actor publishes of its queue.
type deliveryGauge struct {
	waiting atomic.Int64 // events not yet delivered nor dead: queued, in flight, retrying
	oldest  atomic.Int64 // service clock (unix ns) when the oldest of them was queued; 0: none
	paused  atomic.Bool  // the endpoint is paused
	behind  atomic.Bool  // events wait in the outbox past the queue's bound (delivery_behind.go)
	// calls holding a slot of the installation, and waiting for one
	// (delivery_calls.go)
	calls, callsWaiting atomic.Int64
}

func (s *deliveryStats) register() *deliveryGauge {
	g := &deliveryGauge{}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = make(map[*deliveryGauge]struct{})
	}
	s.live[g] = struct{}{}
	return g
}

func (s *deliveryStats) unregister(g *deliveryGauge) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, g)
}

// backlogBuckets: events an installation has waiting, by powers of ten.
var backlogBuckets = metrics.NewBuckets(1, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)

// ageBuckets: how long an installation's oldest waiting event has waited,
// from a healthy endpoint's round trip to the 24 hours after which events
// die (or the endpoint pauses).
var ageBuckets = metrics.NewBuckets(1e-9,
	int64(10*time.Millisecond), int64(100*time.Millisecond), int64(time.Second), int64(10*time.Second),
	int64(time.Minute), int64(10*time.Minute), int64(time.Hour), int64(6*time.Hour), int64(24*time.Hour))

// collect writes the delivery families at now (the service clock).
func (s *deliveryStats) collect(w *metrics.Writer, now time.Time, memory int64) {
	w.Family("kitd_delivery_attempts_total", "Delivery attempts recorded, by outcome: delivered, retry_scheduled, dead_lettered (a dead letter), paused (a failure while the endpoint is paused).", metrics.TypeCounter)
	for i, o := range attemptOutcomes {
		w.Uint("kitd_delivery_attempts_total", metrics.Label("outcome", o), s.outcomes[i].Load())
	}

	w.Counter("kitd_delivery_outbox_gap_reads_total", "Notices that came before an earlier one of their source, or after one that was lost, so that the delivery actor read the outbox to take what it missed first.", s.gapReads.Load())

	w.Counter("kitd_delivery_reclaimed_total", "Events in flight put back for their sender, which had no attempt of them in progress: a take or record it gave up on (its request timed out) had handed them out later (docs/deliveries.md \"Hand-outs whose answer is lost\").", s.reclaimed.Load())
	w.Counter("kitd_delivery_queue_reads_total", "Reads from the store of waiting events for their attempt: a backlog past what a delivery actor keeps in memory (4 MiB an installation), a restart, or a retry. One read takes up to 16 events of a conversation.", s.queueReads.Load())

	w.Family("kitd_delivery_events_expired_total", "Events dropped after 7 days (docs/deliveries.md \"Retention\"), by where they were: waiting in the outbox past an installation's queue, without a sequence, or dead letters not redelivered.", metrics.TypeCounter)
	for i, from := range expiredFrom {
		w.Uint("kitd_delivery_events_expired_total", metrics.Label("from", from), s.expired[i].Load())
	}

	backlog, ages := metrics.NewHistogram(backlogBuckets), metrics.NewHistogram(ageBuckets)
	var total, paused, behind, calls, callsWaiting uint64
	var oldest int64
	s.mu.Lock()
	for g := range s.live {
		calls += uint64(g.calls.Load())
		callsWaiting += uint64(g.callsWaiting.Load())
		if g.paused.Load() {
			paused++
		}
		if g.behind.Load() {
			behind++
		}
		n := g.waiting.Load()
		if n <= 0 {
			continue
		}
		total += uint64(n)
		backlog.Observe(n)
		if at := g.oldest.Load(); at != 0 {
			age := max(now.UnixNano()-at, 0)
			ages.Observe(age)
			oldest = max(oldest, age)
		}
	}
	s.mu.Unlock()
	w.Gauge("kitd_delivery_backlog_events", "Events not yet delivered nor dead-lettered, over the installations whose delivery actor is live on this node (an installation with events waiting stays live).", total)
	w.Family("kitd_delivery_installation_backlog_events", "Installations with events waiting, by how many wait.", metrics.TypeHistogram)
	w.Histogram("kitd_delivery_installation_backlog_events", "", backlog.Snapshot())
	w.Family("kitd_delivery_installation_oldest_event_age_seconds", "Installations with events waiting, by how long the oldest has waited since it was queued (since its actor's activation, after a restart).", metrics.TypeHistogram)
	w.Histogram("kitd_delivery_installation_oldest_event_age_seconds", "", ages.Snapshot())
	w.Family("kitd_delivery_oldest_event_age_seconds", "The longest any waiting event has waited, over every installation.", metrics.TypeGauge)
	w.Sample("kitd_delivery_oldest_event_age_seconds", "", float64(oldest)/1e9)
	w.Gauge("kitd_delivery_memory_bytes", "Memory of this node's delivery queues, about: the events queued (160 bytes each) and the records held for their first attempt, bounded by --delivery-memory.", uint64(max(memory, 0)))
	w.Gauge("kitd_delivery_installations_behind", "Installations with more events waiting than their delivery actor keeps queued in memory (--delivery-queue, or less when the node's queues reach --delivery-memory), of those live on this node: the rest wait in the outbox, without a sequence yet, and are not counted in kitd_delivery_backlog_events.", behind)
	w.Gauge("kitd_delivery_calls_in_flight", "Calls to Kits (slash commands, interactions, tool calls) holding one of their installation's 10 deliveries in flight, of the installations live on this node.", calls)
	w.Gauge("kitd_delivery_calls_waiting", "Calls to Kits waiting for one of their installation's deliveries in flight, all 10 being held; a call waits no later than its deadline.", callsWaiting)
	w.Gauge("kitd_delivery_endpoints_paused", "Installations whose events endpoint is paused (failing 24 hours straight), of those live on this node.", paused)
}

// publish tells the metrics what the queue holds now: after each message
// the actor handles, two atomic stores and an amortized O(1) look at the
// oldest entry.
func (a *deliveryActor) publish() {
	if a.stopped {
		return
	}
	a.charge()
	if a.gauge == nil {
		a.gauge = a.env.deliveryStats.register()
	}
	a.gauge.waiting.Store(int64(a.q.waiting()))
	a.gauge.oldest.Store(a.q.oldest())
	a.gauge.paused.Store(a.ep != nil && a.paused())
	a.gauge.behind.Store(a.behind || len(a.lagging) > 0)
	a.gauge.calls.Store(int64(len(a.calls.held)))
	a.gauge.callsWaiting.Store(int64(a.reservedForCalls()))
}

// unpublish takes the actor's gauge out as it stops.
func (a *deliveryActor) unpublish() {
	a.stopped = true
	if a.gauge != nil {
		a.env.deliveryStats.unregister(a.gauge)
		a.gauge = nil
	}
}

// keepActive: an installation with events waiting stays live (a paused
// endpoint's pump has retired, and nothing else would ask it), so the
// backlog and pause metrics count every installation that has one; so
// does one with calls holding or awaiting a slot, which memory alone
// counts (delivery_calls.go).
func (a *deliveryActor) keepActive() bool {
	return a.q.waiting() > 0 || a.behind || len(a.lagging) > 0 || len(a.calls.held) > 0 || len(a.calls.waiting) > 0
}
