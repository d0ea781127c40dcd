// Package actors holds the rules and state of kitd. Each owner of
// ARCHITECTURE.md is a virtual actor kind (workspace, conversation,
// installation, kit, slug): the only writer of its state, deciding every
// rule that needs that state (visibility, ordering, idempotency, tombstones,
// rate buckets) in one place without locks. A write is answered only after
// its batch is durable in Pebble.
//
// Persistence model: an actor stores its state as one record per entity
// (the conversation, each member, each message, ...) and every write commits
// the records it changes in one synced batch. The stored records are
// therefore always a complete, current snapshot of the actor; activation
// reads its own key range and there is nothing to replay.
//
// The package never talks HTTP: requests and replies are kitpb messages and
// errors are kiterr values.
package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
)

// Kind names of the virtual actors.
const (
	KindWorkspace    = "workspace"
	KindConversation = "conversation"
	KindInstallation = "installation"
	KindKit          = "kit"
	KindSlug         = "slug"
	KindWebhook      = "webhook"
)

// Invalidator is told when something a node may have cached about
// credentials changes; the change is committed before it is called.
type Invalidator interface {
	InstallationChanged(installationID string)
	CredentialRevoked(hash []byte)
	// UserChanged: the member was deactivated; their credentials end.
	UserChanged(userID string)
	// SessionEnded: the web session ended; user tokens it authorized end.
	SessionEnded(sessionID string)
}

// Env is what every actor needs from its node.
type Env struct {
	Store  *persistence.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Limits is nil when rate limits are off.
	Limits limits.Table
	// Node is set once the node has joined; actors use it to ask each other.
	Node        *cluster.Node
	Invalidator Invalidator
	// Fatal is called when storage can no longer promise durability; it
	// must stop the node.
	Fatal func(error)
	// IdleTimeout passivates actors nobody asked anything for about this
	// long; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration

	logPrunes devLogPrunes // state of the node, not configuration
}

func (e *Env) idleTimeout() time.Duration {
	if e.IdleTimeout > 0 {
		return e.IdleTimeout
	}
	return DefaultIdleTimeout
}

// mailboxThroughput is how many messages an actor handles before yielding.
const mailboxThroughput = 300

// Kinds returns the virtual actor kinds to register with the cluster.
func Kinds(env *Env) []*pcluster.Kind {
	return []*pcluster.Kind{
		pcluster.NewKind(KindWorkspace, actor.PropsFromProducer(func() actor.Actor { return &workspaceActor{env: env} })),
		// Conversations run their mailbox on the sending goroutine instead of
		// a new goroutine per wake-up: they never wait on other actors, and
		// their hot path (Apply) does not block, so the hand-off is pure
		// overhead. Measured: about +10% POST /messages throughput.
		pcluster.NewKind(KindConversation, actor.PropsFromProducer(func() actor.Actor { return &conversationActor{env: env} },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(mailboxThroughput)), actor.WithMailbox(cluster.NewInlineMailbox))),
		pcluster.NewKind(KindInstallation, actor.PropsFromProducer(func() actor.Actor { return &installationActor{env: env} })),
		pcluster.NewKind(KindKit, actor.PropsFromProducer(func() actor.Actor { return &kitActor{env: env} })),
		pcluster.NewKind(KindSlug, actor.PropsFromProducer(func() actor.Actor { return &slugActor{env: env} })),
		// Webhooks too: they check a post and forward it without waiting
		// (measured with the forward: 12% less CPU per webhook post). Both
		// kinds use the inline mailbox, which hands a message to an idle
		// actor without queueing it: +0.03 of trivial for webhook posts,
		// which cross both (bench/README.md).
		pcluster.NewKind(KindWebhook, actor.PropsFromProducer(func() actor.Actor { return &webhookActor{env: env} },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(mailboxThroughput)), actor.WithMailbox(cluster.NewInlineMailbox))),
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
	loadErr error
	asked   uint64 // requests so far
	looked  uint64 // asked at the previous look
	timer   *time.Timer
}

// idleCheck is the timer's message to its actor; it is not a request.
type idleCheck struct{}

// forwardTo is a handler's answer that passes the request on: receive
// sends msg to the actor the route names, with the original sender
// (cluster.Node.Forward), and that actor answers instead. It travels as
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

// durability lets an actor apply a write and go on with its next request
// while the write's fsync is in flight, so that one busy actor's writes share
// fsyncs. The rule that keeps this safe: nobody acts on a reply of the actor
// before every write it has applied is durable. A reply to a local sender
// leaves at once as a pendingReply, which cluster.Request awaits before it
// returns the reply: the requester's own goroutine waits for the sync, so a
// write costs no extra goroutine and no extra hand-off. A reply to a remote
// sender (none yet: one node) is sent by a goroutine once the sync is done.
type durability struct {
	inflight *syncGroup // the latest applied write, until it is known durable
	fatal    func(error)
}

// syncGroup is one applied write whose sync is in flight. The first waiter
// waits on Pebble; any other waits for the first.
type syncGroup struct {
	w       persistence.Durable
	fatal   func(error)
	once    sync.Once
	err     error
	durable atomic.Bool
}

func (g *syncGroup) await() error {
	g.once.Do(func() {
		if g.err = g.w.Wait(); g.err != nil {
			// The WAL could not be synced: nothing written since can be
			// trusted to be on disk, so the node must not go on answering.
			g.fatal(g.err)
			return
		}
		g.durable.Store(true)
	})
	return g.err
}

// pendingReply is a reply that may be acted on only once its actor's
// applied writes are durable (cluster.Pending).
type pendingReply struct {
	msg any
	g   *syncGroup
}

func (p *pendingReply) Await() (any, error) {
	if err := p.g.await(); err != nil {
		return nil, err
	}
	return p.msg, nil
}

// applied registers a write whose sync is in flight. Syncs complete in WAL
// order, so once this one is durable every earlier one is too.
func (d *durability) applied(w persistence.Durable) {
	d.inflight = &syncGroup{w: w, fatal: d.fatal}
}

// respond sends reply, bound to the latest applied write until that write is
// known durable.
func (d *durability) respond(ctx actor.Context, reply any) {
	if d == nil || d.inflight == nil {
		ctx.Respond(reply)
		return
	}
	g := d.inflight
	if g.durable.Load() {
		d.inflight = nil
		ctx.Respond(reply)
		return
	}
	sender := ctx.Sender()
	if sender.Address != ctx.Self().Address {
		root := ctx.ActorSystem().Root
		go func() {
			if g.await() == nil {
				root.Send(sender, reply)
			}
		}()
		return
	}
	ctx.Respond(&pendingReply{msg: reply, g: g})
}

func receiveDurable(h handler, life *lifecycle, env *Env, d *durability, ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pcluster.ClusterInit:
		if err := h.activate(m.Identity.Identity); err != nil {
			life.loadErr = err
		}
		root, self := ctx.ActorSystem().Root, ctx.Self()
		life.timer = time.AfterFunc(env.idleTimeout(), func() { root.Send(self, idleCheck{}) })
	case idleCheck:
		if life.asked == life.looked {
			ctx.Stop(ctx.Self())
			return
		}
		life.looked = life.asked
		life.timer.Reset(env.idleTimeout())
	case *actor.Stopping:
		if life.timer != nil {
			life.timer.Stop()
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
			env.Node.Forward(ctx, fw.route, fw.msg)
		case err != nil:
			d.respond(ctx, kiterr.ToFailure(err))
		default:
			d.respond(ctx, reply)
		}
		if !h.exists() {
			ctx.Stop(ctx.Self())
		}
	}
}

// unknownRequest answers a message the actor kind does not understand.
func unknownRequest(kind string, msg proto.Message) error {
	return fmt.Errorf("%s: unexpected request %T", kind, msg)
}

// load reads the record at k into m; found is false when it is absent.
func load(store *persistence.Store, k []byte, m proto.Message) (found bool, err error) {
	v, err := store.Get(k)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("decode %q: %w", k, err)
	}
	return true, nil
}

// put adds the record to the batch.
func put(b *persistence.Batch, k []byte, m proto.Message) {
	v, err := proto.Marshal(m)
	if err != nil {
		// Marshalling a well-formed generated message cannot fail.
		panic(fmt.Sprintf("actors: marshal %T: %v", m, err))
	}
	b.Set(k, v)
}

func nanos(t time.Time) int64 { return t.UnixNano() }

// bucketSet keeps the buckets of one actor by name and key.
type bucketSet struct {
	table   limits.Table
	buckets map[string]*limits.Bucket
}

// take spends one token of the named bucket for key. With limits off it
// always allows and returns a zero decision.
func (s *bucketSet) take(name limits.Name, key string, now time.Time) (limits.Decision, bool) {
	if s.table == nil {
		return limits.Decision{OK: true}, false
	}
	r, ok := s.table[name]
	if !ok {
		return limits.Decision{OK: true}, false
	}
	if s.buckets == nil {
		s.buckets = make(map[string]*limits.Bucket)
	}
	k := string(name) + "\x00" + key
	b := s.buckets[k]
	if b == nil {
		nb := limits.NewBucket(r, now)
		b = &nb
		s.buckets[k] = b
	}
	return b.Take(r, now), true
}

type actorContext = actor.Context

// Caller kinds.
const (
	CallerBot       = "bot"
	CallerUser      = "user"
	CallerDeveloper = "developer"
	CallerOperator  = "operator"
)

func (a *workspaceActor) exists() bool    { return a.ws != nil }
func (a *conversationActor) exists() bool { return a.conv != nil }
func (a *installationActor) exists() bool { return a.inst != nil }
func (a *kitActor) exists() bool          { return a.kit != nil }
func (a *slugActor) exists() bool         { return a.owner != nil }
func (a *webhookActor) exists() bool      { return a.hook != nil }
