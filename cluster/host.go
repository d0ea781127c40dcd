// Package cluster decides where an identity lives and carries requests to
// it. The HTTP layer and the actors name an identity and a kind; this
// package finds the identity's activation, or activates it, and returns its
// typed reply. It never looks inside a request; rules live in the actors.
//
// Activations are protoactor-go actors, placed by kitd itself rather than
// by protoactor's cluster: an identity has at most one activation, on the
// node that hosts its partition (docs/cluster.md, "Where an identity
// lives"). With one node, that is every identity here.
package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/deadline"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Config is what a node needs to start.
type Config struct {
	// RequestTimeout bounds one request to an actor, activation included.
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// Kind is an actor kind the node activates on demand.
type Kind struct {
	Name string
	// New builds the actor of one identity. The actor loads its state when
	// it receives *actor.Started, before any request.
	New  func(identity string) actor.Actor
	Opts []actor.PropsOption // mailbox, dispatcher
}

// Host runs this process's activations: it places an identity's
// activation here when this node hosts its partition, and carries the
// request to the partition's leader when another node does.
type Host struct {
	system *actor.ActorSystem
	kinds  map[string]*Kind
	// requests holds the request timeout, and hands forwards their
	// contexts: one timer for those that begin together
	requests *deadline.Shared
	replies  *replyPool
	log      *slog.Logger

	// pids is where identities live: the node's activations. The map does
	// not allocate on a hit. An activation that stops takes its entry out
	// (forgetStopped): a PID keeps a pointer to its process, so a stale
	// entry would keep the whole stopped actor in memory, and requests for
	// made-up ids would fill the map with them.
	pidsMu sync.RWMutex
	pids   map[pidKey]activation
	// starting holds the identities being activated: a second request
	// waits for the first one's activation instead of spawning its own.
	// The process registry refuses a second process of the name, but
	// names the first one before it can take messages.
	starting     map[pidKey]chan struct{}
	incarnations atomic.Uint64 // makes each activation's process name unique

	hosting // the partitions whose activations this node may host
	// stopped is set by Stop: the node hosts nothing again, and its
	// notices stop trying (tell).
	stopped atomic.Bool
	// lease, when set, says whether this node's lead of a partition is
	// under a lease (SetLease).
	lease func(partition.ID) bool

	// fwd sends requests for partitions not hosted here and answers the
	// ones sent here (EnableForwarding); nil until then. Only a request
	// that finds its partition not hosted loads it.
	fwd atomic.Pointer[forwarder]

	// lastDeadLetter is when a request last came back as a dead letter
	// (unix nanoseconds). The answer does not say which actor was gone,
	// so for a while after one Forward checks that its target is alive.
	lastDeadLetter atomic.Int64
}

type pidKey struct{ kind, identity string }

// activation is an entry of the node's map: the process, and the
// partition it belongs to (Release stops a partition's).
type activation struct {
	pid *actor.PID
	p   partition.ID
}

// Start starts the node's actor system with the given kinds.
func Start(cfg Config, kinds ...*Kind) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	logger := cfg.Logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	// protoactor's supervisor starts a failed actor again and only
	// publishes the failure: a panic would pass unseen.
	system.EventStream.Subscribe(func(ev any) {
		if f, ok := ev.(*actor.SupervisorEvent); ok {
			logger.Error("actor failed; started again", "actor", f.Child.GetId(), "directive", f.Directive.String(), "err", f.Reason)
		}
	})
	shrinkRegistry(system)
	n := &Host{system: system, kinds: make(map[string]*Kind, len(kinds)), log: logger,
		requests: deadline.NewShared(cfg.RequestTimeout), replies: newReplyPool(system), pids: make(map[pidKey]activation), starting: make(map[pidKey]chan struct{})}
	n.hostAll()
	for _, k := range kinds {
		if _, dup := n.kinds[k.Name]; dup || k.New == nil {
			return nil, fmt.Errorf("cluster: kind %q registered twice or without a constructor", k.Name)
		}
		n.kinds[k.Name] = k
	}
	return n, nil
}

// Stop stops every activation and waits for them to have stopped, then
// the actor system: an activation writes what it holds back (a delivery
// actor's outcomes waiting for their flush) when it stops, and the store
// closes after Stop. The system's shutdown alone stops nobody. An
// activation still starting is waited for too: remember stops it (its
// partition is no longer hosted) and only then says it started. From
// Stop on, the node hosts no partition and pid starts nothing, so no
// activation reads a store that closed.
func (h *Host) Stop() {
	h.pidsMu.Lock()
	h.stopped.Store(true)
	for p := range partition.ID(partition.Count) {
		h.set(p, false)
	}
	stopping := make([]*actor.PID, 0, len(h.pids))
	for k, a := range h.pids {
		stopping = append(stopping, a.pid)
		delete(h.pids, k)
	}
	starting := slices.Collect(maps.Values(h.starting))
	h.pidsMu.Unlock()
	h.stopAll(stopping)
	for _, started := range starting {
		<-started
	}
	h.system.Shutdown()
}

// stopAll stops the activations and waits for them, together: each has
// its own deadline (protoactor's, for a stop), so one whose Stopping
// cannot finish holds the others up no longer than that. One that stopped
// meanwhile has no process: its future completes at once.
func (h *Host) stopAll(pids []*actor.PID) {
	futures := make([]*actor.Future, len(pids))
	for i, pid := range pids {
		futures[i] = h.system.Root.StopFuture(pid)
	}
	for _, f := range futures {
		_ = f.Wait()
	}
}

// errUnavailable reports an actor that could not be reached in time.
var errUnavailable = errors.New("cluster: actor unavailable")

// Request sends msg to the actor of kind with identity and waits for its
// reply. A *kitpb.Failure reply comes back as a *kiterr.Error. When the
// identity's partition is not hosted here, the request goes to its leader
// (EnableForwarding); without forwarding, or when no leader can be
// reached, the error is ErrNotHosted or kiterr.Unavailable (503).
func (h *Host) Request(kind, identity string, msg proto.Message) (proto.Message, error) {
	res, err := h.local(kind, identity, msg)
	if err != nil && errors.Is(err, ErrNotHosted) {
		return h.forward(kind, identity, msg, err)
	}
	return res, err
}

// local is Request on this node's activations only.
//
// protoactor's Cluster.Request builds a throttle (and a goroutine) per call,
// and Cluster.Get skips the PID cache; resolving the PID through the cache
// and asking it through a reused reply slot keeps the request path lean.
func (h *Host) local(kind, identity string, msg proto.Message) (proto.Message, error) {
	for attempt := 0; attempt < lookupAttempts; attempt++ {
		if attempt > 0 {
			time.Sleep(lookupBackoff(attempt))
		}
		pid, err := h.pid(kind, identity)
		if err != nil {
			return nil, fmt.Errorf("request %s/%s: %w", kind, identity, err)
		}
		if pid == nil {
			continue
		}
		res, err := h.ask(pid, msg)
		if p, ok := res.(Pending); ok && err == nil {
			res, err = p.Await()
		}
		if err != nil {
			return nil, fmt.Errorf("request %s/%s: %w", kind, identity, err)
		}
		switch r := res.(type) {
		case *actor.DeadLetterResponse:
			// The activation went away (stopped or moved); look it up again.
			// It may be one a request was forwarded to: Forward checks its
			// targets for a while (see lastDeadLetter).
			// Only a gone activation leaves the map: forgetting a live one
			// would let a second activation of the identity start.
			h.lastDeadLetter.Store(time.Now().UnixNano())
			if _, alive := h.system.ProcessRegistry.GetLocal(pid.Id); !alive {
				h.forgetStopped(kind, identity, pid)
			}
			continue
		case *kitpb.Failure:
			return nil, kiterr.FromFailure(r)
		case proto.Message:
			return r, nil
		default:
			return nil, fmt.Errorf("request %s/%s: unexpected reply %T", kind, identity, res)
		}
	}
	return nil, fmt.Errorf("request %s/%s: %w", kind, identity, errUnavailable)
}

// A lookup may find no activation (one is starting) or one that is
// stopping: an activation for an absent entity stops right after its
// answer, and until the placement actor has seen it go, the lookup still
// names it, so a request for the same id right behind the first comes back
// as a dead letter. Request asks again after a growing pause, up to about a
// quarter of a second in all, before it calls the actor unavailable.
const lookupAttempts = 10

func lookupBackoff(attempt int) time.Duration {
	return min(time.Millisecond<<(attempt-1), 50*time.Millisecond)
}

// Pending is a reply that may be acted on only after Await returned it: the
// actor answered at once, but writes it applied are still being synced.
// Request awaits it in the requester's goroutine, so callers never see one.
type Pending interface {
	Await() (any, error)
}

// errTimeout reports an actor that did not answer within the request
// timeout.
var errTimeout = errors.New("cluster: request timed out")

// ask sends msg to pid and waits for the one reply.
func (h *Host) ask(pid *actor.PID, msg proto.Message) (any, error) {
	slot := h.replies.get()
	h.system.Root.RequestWithCustomSender(pid, msg, slot.pid)
	// On the synchronized dispatcher an idle actor handles the request in
	// this goroutine, so the reply is usually here already: no timer then.
	select {
	case res := <-slot.ch:
		h.replies.put(slot)
		return res, nil
	default:
	}
	timeout := h.requests.Timeout()
	until := time.Now().Add(timeout)
	timer := time.NewTimer(min(timeout, stoppedCheck))
	for {
		select {
		case res := <-slot.ch:
			timer.Stop()
			h.replies.put(slot)
			return res, nil
		case now := <-timer.C:
			if h.stoppedWithout(pid, slot) {
				h.replies.retire(slot)
				return &actor.DeadLetterResponse{Target: pid}, nil
			}
			if !now.Before(until) {
				h.replies.retire(slot)
				return nil, errTimeout
			}
			timer.Reset(min(until.Sub(now), stoppedCheck))
		}
	}
}

// stoppedCheck is how often a request that has no answer yet looks whether
// its local target has stopped. protoactor drops, without a dead letter, a
// message that reaches an activation after it stopped (one for an absent
// entity stops right after answering, and a lookup may name it until the
// placement actor has seen it go): without the check such a request would
// wait out the whole timeout.
const stoppedCheck = 20 * time.Millisecond

// stoppedWithout reports whether pid is a local activation that has left the
// registry without answering into slot. An activation answers before it
// stops, so once it is gone an empty slot stays empty: the request was
// dropped.
func (h *Host) stoppedWithout(pid *actor.PID, slot *replySlot) bool {
	if pid.Address != h.system.Address() {
		return false
	}
	if _, alive := h.system.ProcessRegistry.GetLocal(pid.Id); alive {
		return false
	}
	return len(slot.ch) == 0
}

// pid resolves an identity to its activation, activating it on a miss;
// ErrNotHosted when its partition is not hosted here.
func (h *Host) pid(kind, identity string) (*actor.PID, error) {
	k := pidKey{kind, identity}
	h.pidsMu.RLock()
	a, ok := h.pids[k]
	h.pidsMu.RUnlock()
	if ok {
		if h.lease != nil && !h.lease(a.p) {
			return nil, errNoLease
		}
		return a.pid, nil
	}
	p, err := h.hosted(identity)
	if err != nil {
		return nil, err
	}
	if h.lease != nil && !h.lease(p) {
		return nil, errNoLease
	}
	for {
		h.pidsMu.Lock()
		if a, ok := h.pids[k]; ok {
			h.pidsMu.Unlock()
			return a.pid, nil
		}
		if h.stopped.Load() {
			h.pidsMu.Unlock() // Stop waits only for what started before it
			return nil, fmt.Errorf("%w (partition %d): the node stopped", ErrNotHosted, p)
		}
		wait, busy := h.starting[k]
		if !busy {
			done := make(chan struct{})
			h.starting[k] = done
			h.pidsMu.Unlock()
			pid := h.activate(kind, identity)
			err = h.remember(k, p, pid, done)
			return pid, err
		}
		h.pidsMu.Unlock()
		<-wait
	}
}

// activate spawns an activation of kind/identity; nil when the kind is
// unknown or the spawn failed. Its process name is unique to this
// activation (pid waits for a concurrent activation rather than spawn a
// second one): a request whose target stopped must be able to tell it from
// the activation that follows it under the same identity (stoppedWithout).
func (h *Host) activate(kind, identity string) *actor.PID {
	k, ok := h.kinds[kind]
	if !ok {
		return nil
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &placed{Actor: k.New(identity), n: h, key: pidKey{kind, identity}}
	}, k.Opts...)
	name := kind + "/" + identity + "/" + strconv.FormatUint(h.incarnations.Add(1), 36)
	pid, err := h.system.Root.SpawnNamed(props, name)
	if err != nil {
		return nil
	}
	return pid
}

// placed is an activation as the node runs it: the kind's actor, and the
// node's bookkeeping of its stop.
type placed struct {
	actor.Actor
	n   *Host
	key pidKey
}

func (p *placed) Receive(ctx actor.Context) {
	p.Actor.Receive(ctx)
	// From Stopping on, the activation takes no more requests: the next
	// one finds the identity's next activation rather than this one.
	switch ctx.Message().(type) {
	case *actor.Stopping, *actor.Stopped:
		p.n.forgetStopped(p.key.kind, p.key.identity, ctx.Self())
	}
}

// remember enters the activation pid of partition p, unless it has
// stopped already (one that answered "absent" to a concurrent request,
// say): its stop took its entry out before this could put it back. Checked
// under the lock, since an activation leaves the registry before its stop
// takes the lock: either the check sees it gone, or forgetStopped runs
// after the insert. Release takes the same lock: an activation of a
// partition released meanwhile is stopped instead.
func (h *Host) remember(k pidKey, p partition.ID, pid *actor.PID, started chan struct{}) error {
	h.pidsMu.Lock()
	delete(h.starting, k)
	if pid == nil {
		close(started)
		h.pidsMu.Unlock()
		return nil
	}
	if !h.hosts(p) {
		h.pidsMu.Unlock()
		// Stopped outside the lock: the inline mailbox may run the stop
		// here and now, and a stopped activation forgets itself
		// (forgetStopped), which takes the lock. Waited for, so that a
		// Stop that began meanwhile returns after it (started).
		_ = h.system.Root.StopFuture(pid).Wait()
		close(started)
		return fmt.Errorf("%w (partition %d)", ErrNotHosted, p)
	}
	if _, alive := h.system.ProcessRegistry.GetLocal(pid.Id); alive {
		h.pids[k] = activation{pid, p}
	}
	close(started)
	h.pidsMu.Unlock()
	return nil
}

// forgetStopped removes the entry of an activation that stopped, unless
// a newer activation of the identity replaced it.
func (h *Host) forgetStopped(kind, identity string, pid *actor.PID) {
	k := pidKey{kind, identity}
	h.pidsMu.Lock()
	if cached, ok := h.pids[k]; ok && cached.pid.Id == pid.Id && cached.pid.Address == pid.Address {
		delete(h.pids, k)
	}
	h.pidsMu.Unlock()
}

// suspectDeadFor is how long after a dead letter Forward checks its
// targets.
const suspectDeadFor = 5 * time.Second

// Route is where an identity lived when a forward last looked: an actor
// that forwards to the same identity again and again keeps one, so that its
// forwards skip the node's PID cache. A Route with Kind and Identity set is
// ready; it belongs to one actor and is used only from its handler.
type Route struct {
	Kind, Identity string
	pid            *actor.PID
}

// Forward passes the request an actor is handling on to the actor the route
// names, keeping its sender: that actor answers the original requester, and
// the forwarding actor does not wait. A forward to an activation that is
// gone comes back to the requester as a dead letter, which Request answers
// by asking again; from then on Forward checks its targets and looks up
// again one that is gone.
func (h *Host) Forward(from actor.Context, to *Route, msg proto.Message) {
	var err error
	if to.pid == nil {
		to.pid, err = h.pid(to.Kind, to.Identity)
	}
	if to.pid != nil && h.suspectDead() {
		// A registry lookup per forward would cost 3% of a webhook post,
		// so it is done only after a dead letter.
		if _, alive := h.system.ProcessRegistry.GetLocal(to.pid.Id); !alive {
			h.forgetStopped(to.Kind, to.Identity, to.pid)
			to.pid, err = h.pid(to.Kind, to.Identity)
		}
	}
	if to.pid == nil && err == nil {
		err = errUnavailable
	}
	if errors.Is(err, ErrNotHosted) && h.fwd.Load() != nil {
		// The target's leader is another node. The request goes there
		// from a goroutine, so the actor never waits on the network, and
		// the leader's answer goes to the original requester as the
		// target's own would.
		requester, notHosted := from.Sender(), err
		go func() {
			res, err := h.forward(to.Kind, to.Identity, msg, notHosted)
			if err != nil {
				res = kiterr.ToFailure(fmt.Errorf("forward to %s/%s: %w", to.Kind, to.Identity, err))
			}
			h.system.Root.Send(requester, res)
		}()
		return
	}
	if errors.Is(err, ErrNotHosted) {
		err = fmt.Errorf("%w: %w", err, errNoLeader) // a node alone: no leader elsewhere
	}
	if err != nil {
		from.Respond(kiterr.ToFailure(fmt.Errorf("forward to %s/%s: %w", to.Kind, to.Identity, err)))
		return
	}
	from.RequestWithCustomSender(to.pid, msg, from.Sender())
}

// suspectDead reports whether a request came back as a dead letter within
// suspectDeadFor. Until the first one it costs no clock read.
func (h *Host) suspectDead() bool {
	last := h.lastDeadLetter.Load()
	return last != 0 && time.Now().UnixNano()-last < int64(suspectDeadFor)
}

// Call is Request with the reply asserted to type R.
func Call[R proto.Message](n *Host, kind, identity string, msg proto.Message) (R, error) {
	var zero R
	res, err := n.Request(kind, identity, msg)
	if err != nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("request %s/%s: reply %T, want %T", kind, identity, res, zero)
	}
	return r, nil
}

// CachedPIDs counts the entries of the node's PID cache. Tests use it to
// see that stopped actors leave it.
func (h *Host) CachedPIDs() int {
	h.pidsMu.RLock()
	defer h.pidsMu.RUnlock()
	return len(h.pids)
}

// LocalProcesses counts the processes registered on this node (actors,
// reply slots, the system's own). Tests use it to see that actors go away.
func (h *Host) LocalProcesses() int {
	total := 0
	for _, bucket := range h.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		total += bucket.Count()
	}
	return total
}

// NodeView is one member of the cluster as its operators see it (GET
// /ops/v1/cluster): its name, state, HTTP address and the partitions it
// leads and replicates.
type NodeView struct {
	Name, State, HTTPAddr string
	Led, Replicated       []partition.ID
}
