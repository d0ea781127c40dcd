// Package deliveries sends the events that the installations' delivery
// actors queue (actors/delivery*.go) to the Kits' endpoints, signed, and
// reports each attempt back to the actor, which keeps the queue, the
// retry schedule and the developer log. It owns the HTTP side only: what
// to send when is the actor's. docs/deliveries.md.
package deliveries

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/workers"
	"github.com/kitd/kitd/proto/kitpb"
)

// Delivery limits of docs/api.md "Deliveries to a Kit" and "Rate limits".
const (
	// Timeout: only a 2xx answer within 3 s counts.
	Timeout = 3 * time.Second
	// MaxInFlightPerKit bounds the deliveries of all of a Kit's
	// installations at once (10 per installation are the actor's). The
	// number is the limits table's, kept in one place.
	MaxInFlightPerKit = limits.EventsPerKit
	// retryPoll is how often an installation with retries waiting looks
	// whether one is due: retries run on the service clock, which the test
	// clock may move at any moment.
	retryPoll = 200 * time.Millisecond
)

// Config is what the sender needs from package server.
type Config struct {
	Node  *cluster.Host
	Clock clock.Clock
	// Allow lists host or host:port values whose deliveries may reach
	// loopback or private addresses (--delivery-allow; tests only).
	Allow []string
	// RootCAs verifies endpoints; nil: the system roots.
	RootCAs *x509.CertPool
	// Encode is the body of an event (http/api.EventBody).
	Encode func(ev *kitpb.Event, installationID string) ([]byte, error)
	Logger *slog.Logger
	// Timeout replaces the 3 s of Timeout when positive
	// (--delivery-timeout; tests only): a test of a Kit too slow to
	// answer then waits a fraction of a second, not 3.
	Timeout time.Duration
	// KitState is a Kit's state: a suspended Kit's events are held
	// (held.go), and a resumed one's failures restart their clocks at its
	// resume. nil: no Kit is ever suspended.
	KitState func(kitID string) (actors.KitState, error)
}

// Sender delivers queued events. It is told by the delivery actors
// (actors.DeliveryNotifier) and runs one pump per installation with work.
type Sender struct {
	cfg   Config
	https *kitClients
	// id names this sender to the delivery actors, which note whom they
	// hand each event to (TakeDeliveries.sender, reclaim).
	id string
	// rounds counts the reclaims of all pumps: each starts a round of its
	// pump's installation, later than any before (TakeDeliveries.round),
	// whichever pump an installation has then.
	rounds atomic.Uint64

	mu    sync.Mutex
	pumps map[string]*pump // by installation
	// endpoints are the events endpoints of the Kit versions seen, by
	// <kit id>@<version>: a version's manifest never changes, and parsing
	// it for every batch of deliveries cost more than the batch's lookups.
	endpoints map[string]*url.URL
	installs  lookups[installed]         // by installation
	signing   lookups[[]string]          // by Kit: its signing secrets
	latest    lookups[[]string]          // by Kit: its latest version's bot scopes
	kits      map[string]*kitSlots       // by Kit: its in-flight slots
	senders   atomic.Pointer[func() int] // how many nodes share a Kit's slots (ShareKitSlots)
	closed    bool
	held      heldPumps     // by Kit: the installations whose events are held (held.go)
	heldGen   uint64        // counts KitStateChanged calls
	done      chan struct{} // closed by Close
	stats     senderStats
	wg        sync.WaitGroup
	// workers run the pumps and the chains of attempts: a goroutine of
	// its own for each grew its stack anew, through the HTTPS client and
	// an actor call, at every event of a quiet installation.
	workers workers.Pool
}

// New builds a sender; it sends nothing until told.
func New(cfg Config) *Sender {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = Timeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	return &Sender{
		cfg: cfg, https: newKitClients(cfg.RootCAs, cfg.Allow, idleAfter), id: ids.New(),
		pumps: make(map[string]*pump), kits: make(map[string]*kitSlots), done: make(chan struct{}),
		endpoints: make(map[string]*url.URL), stats: newSenderStats(),
	}
}

// LoadRoots is the system roots plus the PEM certificates of path.
func LoadRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// EventsQueued starts or wakes the installation's pump; it never blocks.
func (s *Sender) EventsQueued(installationID string) { s.wakePump(installationID, false) }

// wakePump starts or wakes the installation's pump; lost: its take is to
// reclaim what a lost take handed out (held.go).
func (s *Sender) wakePump(installationID string, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if p, ok := s.pumps[installationID]; ok {
		if lost {
			p.lost.Store(true)
		}
		p.notices.Add(1)
		p.wakeUp()
		return
	}
	p := &pump{wake: make(chan struct{}, 1)}
	p.lost.Store(lost)
	p.notices.Store(1)
	p.round.Store(s.rounds.Load())
	s.pumps[installationID] = p
	s.wg.Add(1)
	s.workers.Run(func() { s.pump(installationID, p) })
}

// pump is the state of one installation's pump.
type pump struct {
	wake     chan struct{} // a pending wake-up
	inFlight sync.WaitGroup
	// chains counts the chains of attempts in progress; lost says that a
	// take or record of this pump failed, whose answer may have handed
	// out events no chain has: once no chain runs, the next take
	// reclaims them.
	chains atomic.Int64
	lost   atomic.Bool
	// round is the round of the pump's requests: its last reclaim's.
	round atomic.Uint64
	// notices counts the EventsQueued calls since the pump started; a
	// chain reads it before each record, without the sender's lock.
	notices atomic.Uint64
	// Guarded by Sender.mu: idle says that the record of an attempt found
	// nothing in flight, due later or to hand out, when notices stood at
	// idleAt: if they still do, a take would find nothing either.
	idleAt uint64
	idle   bool
}

func (p *pump) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops the pumps after their attempts in flight.
func (s *Sender) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.workers.Close()
	s.https.public.CloseIdleConnections()
	s.https.allowed.CloseIdleConnections()
}

// pump sends the installation's events until nothing waits: it takes what
// the actor allows, sends each on a worker of its own, and when all of them
// are in flight or waiting for a retry, waits for a wake-up (an attempt
// done, an event queued) or, with a retry waiting, for the next poll.
func (s *Sender) pump(inst string, p *pump) {
	defer s.wg.Done()
	defer p.inFlight.Wait()
	for {
		if s.retireIdle(inst, p) || s.hold(inst, p) {
			return
		}
		if p.lost.Load() && p.chains.Load() > 0 {
			// The chains take no more once something is lost: the last
			// one's wake-up brings the take that reclaims it, which an
			// installation with a backlog would otherwise never reach.
			select {
			case <-p.wake:
			case <-s.done:
				return
			}
			continue
		}
		take := &kitpb.TakeDeliveries{Max: actors.MaxInFlightPerInstallation, Sender: s.id}
		if p.chains.Load() == 0 && p.lost.Swap(false) {
			// The failed request may yet reach the actor, after this
			// one: a new round tells it that request was given up on.
			take.Reclaim = true
			p.round.Store(s.rounds.Add(1))
		}
		take.Round = p.round.Load()
		r, err := cluster.Call[*kitpb.DeliveriesReply](s.cfg.Node, actors.KindDelivery, inst, take)
		if err != nil {
			s.cfg.Logger.Warn("take deliveries", "installation", inst, "err", err)
			p.lost.Store(true)
			r = &kitpb.DeliveriesReply{NextDue: 1}
		}
		switch {
		case len(r.Events) > 0:
			// The take handed out all that may go now (it stops early only
			// when every slot is taken): another would find nothing until a
			// notice or an attempt's end, and each of those wakes the pump.
			t, err := s.target(inst)
			s.start(inst, t, err, r.Events, p)
		case r.InFlight == 0 && r.NextDue == 0:
			if s.retire(inst, p) {
				return
			}
			continue // retire took a wake-up that came meanwhile: take again
		}
		var poll <-chan time.Time
		if r.NextDue != 0 {
			poll = time.After(retryPoll)
		}
		select {
		case <-p.wake:
		case <-poll:
		case <-s.done:
			return
		}
	}
}

// chainLength bounds how many events one goroutine sends one after
// another, taking the next as it records an attempt (Sender.chain), before
// it hands back to the pump, which looks up the target again: a rotated
// signing secret or a new version's endpoint, which invalidation dropped
// from what the sender keeps, is thus used soon.
const chainLength = 100

// start sends each event in its own goroutine.
func (s *Sender) start(inst string, t target, terr error, evs []*kitpb.Event, p *pump) {
	for _, ev := range evs {
		p.inFlight.Add(1)
		p.chains.Add(1)
		s.workers.Run(func() { s.chain(inst, t, terr, ev, p) })
	}
}

// chain sends ev and, while the actor hands back more with the record of
// each attempt, those: a freed slot is filled in the same round trip to
// the actor, and the pump is woken only when the chain ends. A chain
// whose last record found the installation idle tells the pump, which
// then retires without asking the actor again.
func (s *Sender) chain(inst string, t target, terr error, ev *kitpb.Event, p *pump) {
	defer p.inFlight.Done()
	for n := 1; ev != nil; n++ {
		if s.suspended(t.kitID) {
			// Handed out, not attempted: the Kit was suspended since the
			// take or the record that handed it out. It is given up as a
			// lost hand-out is, and the pump that holds reclaims it once
			// the Kit is resumed (held.go).
			p.lost.Store(true)
			break
		}
		takeNext := terr == nil && n < chainLength && !s.isClosed() && !p.lost.Load()
		notices := p.notices.Load() // before the record: a notice after it counts
		r, err := s.deliver(inst, t, terr, ev, takeNext, p.round.Load())
		if err != nil {
			p.lost.Store(true)
		}
		ev = nil
		switch {
		case r == nil:
		case len(r.Events) > 0:
			s.start(inst, t, terr, r.Events[1:], p)
			ev = r.Events[0]
		case r.InFlight == 0 && r.NextDue == 0:
			s.mu.Lock()
			p.idle, p.idleAt = true, notices
			s.mu.Unlock()
		}
	}
	p.chains.Add(-1) // before the wake-up, which may find it the last
	p.wakeUp()
}

func (s *Sender) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// retire ends the pump unless a wake-up came meanwhile.
func (s *Sender) retire(inst string, p *pump) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-p.wake:
		return false
	default:
	}
	if s.pumps[inst] == p {
		delete(s.pumps, inst)
	}
	return true
}

// retireIdle ends the pump when an attempt's record found the
// installation idle and no notice came since; else it forgets the record's
// word, which a take is about to replace.
func (s *Sender) retireIdle(inst string, p *pump) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := p.idle && p.idleAt == p.notices.Load()
	p.idle = false
	if !idle {
		return false
	}
	if s.pumps[inst] == p {
		delete(s.pumps, inst)
	}
	return true
}

// target is where an installation's events go and how they are signed.
type target struct {
	kitID    string
	endpoint *url.URL
	secrets  []string
}

// Why an installation's events cannot be sent at all; each attempt fails
// with the code, and is retried like any failure.
var (
	errNoEndpoint = errors.New("deliveries: the installed version has no events endpoint")
	errNoSecret   = errors.New("deliveries: the Kit has no signing secret that can sign")
	// errSuspendedBeforeAttempt: the Kit was suspended while the event
	// waited for one of its slots; nothing is recorded, and the pump
	// reclaims the event after the resume.
	errSuspendedBeforeAttempt = errors.New("deliveries: the Kit was suspended before the attempt")
	// errMissingScope: the bot no longer holds the scope the event's kind
	// needs; the event is not sent, and is dead-lettered at once.
	errMissingScope = errors.New("deliveries: the Kit bot no longer holds the scope of the event's kind")
)

// targetErrorCode is the developer log's errorCode of a target error.
func targetErrorCode(err error) string {
	switch {
	case errors.Is(err, errNoEndpoint):
		return "no_endpoint"
	case errors.Is(err, errNoSecret):
		return "no_signing_secret"
	case errors.Is(err, errMissingScope):
		return actors.MissingScope
	}
	return "internal_error"
}

func (s *Sender) target(inst string) (target, error) {
	in, err := s.installed(inst)
	if err != nil {
		return target{}, err
	}
	return s.targetOfVersion(in.kitID, in.version)
}

// targetOfVersion is where an event that names its endpoint's version goes
// (kitpb.Event.endpoint_version): that version's events endpoint, signed
// as every request of the Kit.
func (s *Sender) targetOfVersion(kitID, version string) (target, error) {
	t := target{kitID: kitID}
	var err error
	if t.endpoint, err = s.endpoint(kitID, version); err != nil {
		return t, err
	}
	t.secrets, err = s.signingSecrets(kitID)
	return t, err
}

// installed is the Kit and the version of it an installation runs, and
// the bot scopes that version requests.
type installed struct {
	kitID, version string
	botScopes      []string
}

func (s *Sender) installed(inst string) (installed, error) {
	return s.installs.of(inst, s.cfg.Clock.Now(), func() (installed, bool, error) {
		r, err := cluster.Call[*kitpb.InstallationReply](s.cfg.Node, actors.KindInstallation, inst, &kitpb.GetInstallation{})
		if err != nil {
			return installed{}, false, err
		}
		in := r.Installation
		return installed{kitID: in.KitId, version: in.KitVersion, botScopes: in.BotScopes}, true, nil
	})
}

// signingSecrets are the secrets the Kit's requests are signed with, or
// errNoSecret: an unsigned request would be refused by any receiver that
// checks. A Kit without one is asked again each time, so its first
// secret is used at once.
func (s *Sender) signingSecrets(kitID string) ([]string, error) {
	secrets, err := s.signing.of(kitID, s.cfg.Clock.Now(), func() ([]string, bool, error) {
		r, err := cluster.Call[*kitpb.SigningSecretsReply](s.cfg.Node, actors.KindKit, kitID, &kitpb.GetSigningSecrets{})
		if err != nil {
			return nil, false, err
		}
		return r.Secrets, len(r.Secrets) > 0, nil
	})
	if err == nil && len(secrets) == 0 {
		err = errNoSecret
	}
	return secrets, err
}

// InstallationChanged drops what the sender kept of the installation: its
// next take looks up the Kit version it runs now (actors.TargetCache).
func (s *Sender) InstallationChanged(installationID string) { s.installs.forget(installationID) }

// SigningSecretsChanged drops the Kit's signing secrets: what is signed
// next is signed with the rotated set (actors.TargetCache).
func (s *Sender) SigningSecretsChanged(kitID string) { s.signing.forget(kitID) }

// KitVersionsChanged drops the Kit's latest bot scopes: an event sent
// next carries what the new version lets its bot read
// (actors.TargetCache).
func (s *Sender) KitVersionsChanged(kitID string) { s.latest.forget(kitID) }

// botMay reports whether the bot of inst holds scope now: its installed
// version and the Kit's latest version both request it, as for its
// tokens (docs/credentials.md "Effective scopes"). Two lookups kept with
// invalidation, so an upload limits the next event as it does the next
// request.
func (s *Sender) botMay(inst, scope string) (bool, error) {
	in, err := s.installed(inst)
	if err != nil || !slices.Contains(in.botScopes, scope) {
		return false, err
	}
	latest, err := s.latest.of(in.kitID, s.cfg.Clock.Now(), func() ([]string, bool, error) {
		r, err := actors.LatestScopes(s.cfg.Node, in.kitID)
		if err != nil {
			return nil, false, err
		}
		return r.BotScopes, true, nil
	})
	return err == nil && slices.Contains(latest, scope), err
}

// asTheBotReads is ev as the bot of inst may read it when it is sent:
// errMissingScope when the bot no longer holds the scope its kind needs
// (docs/manifest.md "events"), and a user's email only while the bot
// holds users:read.email. The emitter went by the installed version's
// scopes (docs/deliveries.md "User events"); a later version, a draft
// too, may have dropped a scope since, and a retry, a redelivery or a
// dead letter sent again goes by the scopes of its own attempt. A test
// event's example data is sent as it is.
func (s *Sender) asTheBotReads(inst string, ev *kitpb.Event) (*kitpb.Event, error) {
	if ev.Test {
		return ev, nil
	}
	if needs, _ := manifest.EventNeeds(ev.Type); needs != "" && needs != "bot" {
		may, err := s.botMay(inst, needs)
		if err != nil {
			return ev, err
		}
		if !may {
			return ev, errMissingScope
		}
	}
	if ev.User == nil || ev.User.Email == "" {
		return ev, nil
	}
	may, err := s.botMay(inst, "users:read.email")
	if err != nil || may {
		return ev, err
	}
	ev = proto.Clone(ev).(*kitpb.Event) // the caller's may be the actor's own
	ev.User.Email = ""
	return ev, nil
}

// endpoint is the events endpoint of version of the Kit kitID.
func (s *Sender) endpoint(kitID, version string) (*url.URL, error) {
	key := kitID + "@" + version
	s.mu.Lock()
	u := s.endpoints[key]
	s.mu.Unlock()
	if u != nil {
		return u, nil
	}
	kit, err := cluster.Call[*kitpb.KitReply](s.cfg.Node, actors.KindKit, kitID, &kitpb.GetKit{})
	if err != nil {
		return nil, err
	}
	for _, v := range kit.Versions {
		if v.Version != version {
			continue
		}
		man, problems := manifest.Parse(v.Manifest)
		if len(problems) > 0 || man.Endpoints.Events == "" {
			return nil, errNoEndpoint
		}
		if u, err = url.Parse(man.Endpoints.Events); err != nil {
			return nil, err
		}
	}
	if u == nil {
		return nil, errNoEndpoint
	}
	s.mu.Lock()
	s.endpoints[key] = u
	s.mu.Unlock()
	return u, nil
}

// deliver makes one attempt and records it, in the pump's round; with
// takeNext, it returns the actor's answer: the events to send now, and
// what is in flight or due.
func (s *Sender) deliver(inst string, t target, terr error, ev *kitpb.Event, takeNext bool, round uint64) (*kitpb.DeliveriesReply, error) {
	if ev.EndpointVersion != "" && t.kitID != "" {
		t, terr = s.targetOfVersion(t.kitID, ev.EndpointVersion)
	}
	rec := &kitpb.RecordAttempt{Sequence: ev.Sequence, KitId: t.kitID, JitterPermille: actors.Jitter(), Sender: s.id, Round: round}
	if terr == nil {
		ev, terr = s.asTheBotReads(inst, ev)
	}
	if terr == nil {
		release := s.kitSlot(t.kitID)
		kit := s.kitState(t.kitID) // once the slot is held: the state the attempt goes by
		rec.KitResumedAt = kit.ResumedAt
		if kit.Suspended {
			// Suspended while the event waited for one of the Kit's
			// slots: it was not attempted, so it is given up as the chain
			// gives up one handed out before a suspension (held.go).
			release()
			return nil, errSuspendedBeforeAttempt
		}
		start := time.Now()
		rec.HttpStatus, rec.ErrorCode = s.send(inst, t, ev)
		took := time.Since(start)
		rec.DurationMs = took.Milliseconds()
		release()
		s.stats.observe(took)
		rec.Delivered = rec.ErrorCode == ""
	} else {
		rec.KitResumedAt = s.kitState(t.kitID).ResumedAt
		rec.ErrorCode = targetErrorCode(terr)
		if !errors.Is(terr, errMissingScope) { // the Kit's choice, in its developer log
			s.cfg.Logger.Warn("delivery target", "installation", inst, "err", terr)
		}
	}
	if rec.ErrorCode != "" {
		s.stats.fail(rec.ErrorCode)
	}
	if takeNext {
		rec.TakeNext = actors.MaxInFlightPerInstallation
	}
	res, err := s.cfg.Node.Request(actors.KindDelivery, inst, rec)
	if err != nil {
		s.cfg.Logger.Warn("record delivery", "installation", inst, "err", err)
		return nil, err
	}
	if r, ok := res.(*kitpb.DeliveriesReply); ok && takeNext {
		return r, nil
	}
	return nil, nil
}

// kitSlot waits for one of the Kit's slots on this node: its share of
// the MaxInFlightPerKit (ShareKitSlots).
func (s *Sender) kitSlot(kitID string) (release func()) {
	slots := s.slotsOf(kitID)
	slots.take(s.kitShare, time.Time{})
	return slots.give
}

// kitSlotBy is kitSlot for a call, which waits no later than deadline:
// ok is false when no slot was free by then.
func (s *Sender) kitSlotBy(kitID string, deadline time.Time) (release func(), ok bool) {
	slots := s.slotsOf(kitID)
	if !slots.take(s.kitShare, deadline) {
		return nil, false
	}
	return slots.give, true
}

func (s *Sender) slotsOf(kitID string) *kitSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	slots, ok := s.kits[kitID]
	if !ok {
		slots = newKitSlots()
		s.kits[kitID] = slots
	}
	return slots
}

// ShareKitSlots has the MaxInFlightPerKit of a Kit shared among the
// nodes that send deliveries, senders() of them: each node's share is
// the limit divided by their number, rounded down (at least one, past 50
// nodes). A Kit's installations lead on any node, and the limit counts
// across all of them.
func (s *Sender) ShareKitSlots(senders func() int) { s.senders.Store(&senders) }

// kitShare is this node's share of a Kit's slots.
func (s *Sender) kitShare() int {
	n := 1
	if f := s.senders.Load(); f != nil {
		n = max((*f)(), 1)
	}
	return max(MaxInFlightPerKit/n, 1)
}

// kitSlots are one Kit's deliveries in flight on this node, up to a
// share that follows the number of nodes.
type kitSlots struct {
	mu    sync.Mutex
	freed sync.Cond
	used  int
}

func newKitSlots() *kitSlots {
	k := &kitSlots{}
	k.freed.L = &k.mu
	return k
}

// take waits until fewer than share() are in use, and takes one: the
// share is read again at each wake-up, as the members change. A waiter
// that takes a slot with room left wakes the next, so that the room a
// grown share adds (a node left) is taken by every waiter, not only by
// the one a slot given back woke. With a deadline (not zero) it gives up
// then, and reports whether it took one.
func (k *kitSlots) take(share func() int, deadline time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.used >= share() && !deadline.IsZero() {
		// Wakes the waiters at the deadline, so that this one sees it.
		t := time.AfterFunc(time.Until(deadline), func() {
			k.mu.Lock()
			k.freed.Broadcast()
			k.mu.Unlock()
		})
		defer t.Stop()
	}
	for k.used >= share() {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false
		}
		k.freed.Wait()
	}
	k.used++
	if k.used < share() {
		k.freed.Signal()
	}
	return true
}

// give gives a slot back, and wakes one waiter: waking all of them, for
// all but one to wait again, costs a Kit's backlog of events the square
// of its length (TestASlotGivenBackWakesOneWaiter). No wake-up is lost to
// a call past its deadline: take gives up only while no slot is free, so
// the waiter woken takes the slot given back.
func (k *kitSlots) give() {
	k.mu.Lock()
	k.used--
	k.mu.Unlock()
	k.freed.Signal()
}

// Retry reasons of the Service-Retry-Reason header, and the error codes of
// the developer log.
const (
	ReasonTimeout    = "http_timeout"
	ReasonConnection = "connection_failed"
	ReasonHTTP       = "http_error"
	ReasonTLS        = "tls_error"
	// ReasonRedelivery: a developer asked for the event again (kit
	// deliveries redeliver); Service-Retry-Num counts its earlier attempts.
	ReasonRedelivery = "redelivery"
	// ReasonInFlightLimit: a call found the Kit's deliveries in flight at
	// their limit (MaxInFlightPerKit, this node's share) until its
	// deadline, and was not made.
	ReasonInFlightLimit = actors.ErrorInFlightLimit
)

// retryHeaders are the Service-Retry-Num and Service-Retry-Reason of an
// attempt; reason "": a first attempt, without them.
func retryHeaders(ev *kitpb.Event) (num, reason string) {
	switch {
	case ev.Redelivery:
		return strconv.Itoa(int(ev.Attempts)), ReasonRedelivery
	case ev.Attempts > 0:
		return strconv.Itoa(int(ev.Attempts)), ev.RetryReason
	}
	return "", ""
}

// send posts the event and classifies the outcome: errorCode "" is a 2xx
// within the timeout (Config.Timeout).
func (s *Sender) send(inst string, t target, ev *kitpb.Event) (status int32, errorCode string) {
	if t.endpoint.Scheme != "https" {
		return 0, ReasonConnection
	}
	body, err := s.cfg.Encode(ev, inst)
	if err != nil {
		s.cfg.Logger.Error("encode event", "installation", inst, "err", err)
		return 0, ReasonConnection
	}
	now := s.cfg.Clock.Now()
	r := kitRequest{url: t.endpoint, body: body, secrets: t.secrets, installationID: inst, deadline: time.Now().Add(s.cfg.Timeout)}
	r.retryNum, r.retryReason = retryHeaders(ev)
	code, _, err := s.https.post(now, r, false)
	var ce *CallError
	if errors.As(err, &ce) {
		return int32(code), ce.Reason
	}
	return int32(code), ""
}
