package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
)

// What every actor kind shares: the kinds and their registration, the
// receive loop, activation, passivation and forwarding.

// Kind names of the virtual actors.
const (
	KindWorkspace    = "workspace"
	KindConversation = "conversation"
	KindInstallation = "installation"
	KindKit          = "kit"
	KindSlug         = "slug"
	KindWebhook      = "webhook"
	KindDelivery     = "delivery"
)

// Caller kinds.
const (
	CallerBot       = "bot"
	CallerUser      = "user"
	CallerDeveloper = "developer"
	CallerOperator  = "operator"
)

// mailboxThroughput is how many messages an actor handles before yielding.
const mailboxThroughput = 300

// Kinds returns the virtual actor kinds the node activates.
func Kinds(env *Env) []*cluster.Kind {
	// Conversations and webhooks run their mailbox on the sending goroutine
	// instead of a new goroutine per wake-up: they never wait on other
	// actors, and their hot paths do not block, so the hand-off is pure
	// overhead. Measured: about +10% POST /messages throughput, 12% less
	// CPU per webhook post; the inline mailbox, which hands a message to an
	// idle actor without queueing it, +0.03 of trivial for webhook posts,
	// which cross both (bench/README.md).
	inline := []actor.PropsOption{actor.WithDispatcher(actor.NewSynchronizedDispatcher(mailboxThroughput)), actor.WithMailbox(cluster.NewInlineMailbox)}
	life := func(kind, id string) lifecycle { return lifecycle{identity: id, kind: env.activity.of(kind)} }
	return []*cluster.Kind{
		{Name: KindWorkspace, New: func(id string) actor.Actor { return &workspaceActor{env: env, life: life(KindWorkspace, id)} }},
		{Name: KindConversation, New: func(id string) actor.Actor { return &conversationActor{env: env, life: life(KindConversation, id)} }, Opts: inline},
		{Name: KindInstallation, New: func(id string) actor.Actor { return &installationActor{env: env, life: life(KindInstallation, id)} }},
		{Name: KindKit, New: func(id string) actor.Actor { return &kitActor{env: env, life: life(KindKit, id)} }},
		{Name: KindSlug, New: func(id string) actor.Actor { return &slugActor{env: env, life: life(KindSlug, id)} }},
		{Name: KindWebhook, New: func(id string) actor.Actor { return &webhookActor{env: env, life: life(KindWebhook, id)} }, Opts: inline},
		// The sequencer of an installation's events (delivery.go) runs on
		// its senders' goroutines as well: it never waits on another actor
		// nor on a sync (its writes do not ask for one), and a goroutine per
		// wake-up, whose stack grew to Pebble's depth each time, cost more
		// than its work. Notices that arrive while it runs queue, and one
		// write covers them.
		{Name: KindDelivery, New: func(id string) actor.Actor { return &deliveryActor{env: env, life: life(KindDelivery, id)} }, Opts: inline},
	}
}

// handler is the shape shared by every actor: activate once with its
// identity, then answer requests one at a time.
type handler interface {
	activate(identity string) error
	handle(msg proto.Message) (proto.Message, error)
	// exists reports whether the actor's entity exists. An actor whose
	// entity does not exist stops after answering, so that requests for
	// made-up ids cannot fill the node's memory with empty actors.
	exists() bool
}

// releaser is a handler that gives something back to its node when its
// activation ends (a conversation's window of the node's history budget).
type releaser interface{ release() }

// keeper is a handler that stays active while idle when it waits for an
// outcome to be reported to it (an installation's runs in flight): a new
// activation would take the work as abandoned.
type keeper interface{ keepActive() bool }

func keepsActive(h handler) bool {
	k, ok := h.(keeper)
	return ok && k.keepActive()
}

// actorContext spares each kind's file an import of protoactor for its
// Receive method.
type actorContext = actor.Context

// DefaultIdleTimeout passivates an actor nobody has asked anything for this
// long. It is longer than every rate window, so a bucket that is dropped
// with its actor would have been full again anyway.
const DefaultIdleTimeout = 10 * time.Minute

// lifecycle is what every actor keeps about its own activation: whether it
// loaded, and whether it was asked anything lately.
//
// Idleness is not protoactor's receive timeout: that stops and resets a
// runtime timer on every message, which measured 7% of the CPU of an
// incoming webhook post. Instead a message only bumps a counter, and one
// timer per actor looks at the counter every IdleTimeout: an actor that
// got nothing since the previous look passivates, so an idle actor goes
// after one to two IdleTimeouts.
type lifecycle struct {
	identity string        // given at construction, loaded on Started
	kind     *kindActivity // its kind's counters, given at construction
	loadErr  error
	asked    uint64 // requests so far
	looked   uint64 // asked at the previous look
	timer    *time.Timer
}

// idleCheck is the timer's message to its actor; it is not a request.
type idleCheck struct{}

// forwardTo is a handler's answer that passes the request on: receive
// sends msg to the actor the route names, with the original sender
// (cluster.Host.Forward), and that actor answers instead. It travels as
// the handler's error so that handlers keep one signature.
type forwardTo struct {
	route *cluster.Route
	msg   proto.Message
}

func (f *forwardTo) Error() string { return "forwarded to " + f.route.Kind + "/" + f.route.Identity }

// forward is the answer that passes the request on to kind/identity as msg.
func forward(kind, identity string, msg proto.Message) error {
	return &forwardTo{route: &cluster.Route{Kind: kind, Identity: identity}, msg: msg}
}

// forwardVia is forward through a route the handler keeps, for a target it
// forwards to again and again.
func forwardVia(route *cluster.Route, msg proto.Message) error {
	return &forwardTo{route: route, msg: msg}
}

// receive drives a handler from protoactor's mailbox. A failed activation
// answers every request with an internal error and stops the actor, so the
// next request activates it afresh.
func receive(h handler, life *lifecycle, env *Env, ctx actor.Context) {
	receiveDurable(h, life, env, nil, ctx)
}

// receiveDurable is receive for an actor that applies writes without
// waiting for their sync: its replies leave through d (durability.go).
func receiveDurable(h handler, life *lifecycle, env *Env, d *durability, ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if life.kind != nil {
			life.kind.activations.Inc()
		}
		if err := h.activate(life.identity); err != nil {
			life.loadErr = err
		}
		root, self := ctx.ActorSystem().Root, ctx.Self()
		life.timer = time.AfterFunc(env.idleTimeout(), func() { root.Send(self, idleCheck{}) })
	case idleCheck:
		if life.asked == life.looked && !keepsActive(h) {
			ctx.Stop(ctx.Self())
			return
		}
		life.looked = life.asked
		life.timer.Reset(env.idleTimeout())
	case *actor.Stopping, *actor.Restarting:
		if r, ok := h.(releaser); ok {
			r.release()
		}
		if life.timer != nil {
			life.timer.Stop()
		}
		// A restart ends this incarnation too: the next one counts an
		// activation on its Started, so kitd_actors_live stays one.
		switch _, restarting := m.(*actor.Restarting); {
		case life.kind == nil:
		case restarting:
			life.kind.restarts.Inc()
		default:
			life.kind.passivations.Inc()
		}
	case proto.Message:
		if ctx.Sender() == nil {
			return
		}
		life.asked++
		if life.loadErr != nil {
			ctx.Respond(kiterr.ToFailure(fmt.Errorf("activate: %w", life.loadErr)))
			ctx.Stop(ctx.Self())
			return
		}
		reply, err := h.handle(m)
		fw, forwarded := err.(*forwardTo) // returned as is by handlers, never wrapped
		switch {
		case forwarded:
			env.Host.Forward(ctx, fw.route, fw.msg)
		case err != nil:
			logUnavailable(env, life.identity, err)
			d.respond(ctx, kiterr.ToFailure(err))
		default:
			d.respond(ctx, reply)
		}
		if !h.exists() {
			ctx.Stop(ctx.Self())
		}
	}
}

// logUnavailable logs the cause of an unavailable answer: only its code
// and message reach the client (and a forwarding node), and the operator
// needs to know which group or peer would not take the write.
func logUnavailable(env *Env, identity string, err error) {
	if env.Logger != nil && kiterr.Unexplained(err) {
		env.Logger.Warn("request unavailable in its actor", "actor", identity, "err", err)
	}
}

// unknownRequest answers a message the actor kind does not understand.
func unknownRequest(kind string, msg proto.Message) error {
	return fmt.Errorf("%s: unexpected request %T", kind, msg)
}

// concern takes the requests of one concern of an actor, kept in a file of
// its own; ok is false for a request that is not one of them.
type concern[A any] func(a A, msg proto.Message) (reply proto.Message, ok bool, err error)

// askConcerns asks each concern in turn to take msg, and answers that the
// actor kind does not understand it when none does.
func askConcerns[A any](a A, kind string, msg proto.Message, concerns []concern[A]) (proto.Message, error) {
	for _, c := range concerns {
		if reply, ok, err := c(a, msg); ok {
			return reply, err
		}
	}
	return nil, unknownRequest(kind, msg)
}
