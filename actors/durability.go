package actors

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
)

// durability lets an actor apply a write and go on with its next request
// while the write's fsync is in flight, so that one busy actor's writes share
// fsyncs. The rule that keeps this safe: nobody acts on a reply of the actor
// before every write it has applied is durable. A reply to a local sender
// leaves at once as a pendingReply, which cluster.Request awaits before it
// returns the reply: the requester's own goroutine waits for the sync, so a
// write costs no extra goroutine and no extra hand-off. A reply to a remote
// sender is sent by a goroutine once the sync is done.
type durability struct {
	inflight awaitable // the latest applied write, until it is known durable
	fatal    func(error)
}

// awaitable is a write that replies bound to it wait for: a sync of the
// node's WAL (syncGroup), or a delivery actor's durable commit in the
// background (commitGroup).
type awaitable interface {
	// await returns once the write is durable, or why it is not.
	await() error
	// isDurable says, without waiting, that await would return nil.
	isDurable() bool
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

func (g *syncGroup) isDurable() bool { return g.durable.Load() }

// pendingReply is a reply that may be acted on only once its actor's
// applied writes are durable (cluster.Pending).
type pendingReply struct {
	msg any
	g   awaitable
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
	if g.isDurable() {
		d.inflight = nil
		ctx.Respond(reply)
		return
	}
	sender := ctx.Sender()
	if sender.Address != ctx.Self().Address {
		root := ctx.ActorSystem().Root
		go func() {
			if err := g.await(); err != nil {
				reply = kiterr.ToFailure(err)
			}
			root.Send(sender, reply)
		}()
		return
	}
	ctx.Respond(&pendingReply{msg: reply, g: g})
}
