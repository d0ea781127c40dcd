package actors

import (
	"errors"
	"fmt"
)

// Commits that do not block the actor (docs/deliveries.md, "Commits in
// the background"). No event leaves the node before its sequence is
// durable: a synced write on a node alone, a raft round of its
// partition's group on a cluster (tens of milliseconds at full load). An
// actor that waited for each took its installation's chains of attempts
// one commit at a time: notices sequence fresh events between commits, so
// nearly every chain's take found a head that no commit covered and
// committed again. So the actor goes on while its commit is in flight, and
// a reply that hands out events waits, in its requester's goroutine
// (durability), for the commit that makes their sequences durable: the
// one in flight, or the next one, which starts when it ends and takes
// everything written meanwhile. A round of ten chains thus waits for at
// most two commits, whatever their number.
//
// One commit at a time keeps the order of the actor's writes: a batch is
// written only once the one before it is, so a taken record is never
// deleted before it is written, and a failed commit leaves nothing after
// it committed. A failure through the groups stops the actor, whose next
// activation reads what the store holds; the replies waiting for it, or
// for the next commit, which is then never proposed, fail, and the sender
// makes those attempts again once the events are taken again. A failed
// sync of a node alone leaves nothing to trust (Env.Fatal).

// commitGroup is one durable commit of the delivery actor, in flight or
// next. It is an awaitable: replies bound to it leave once it committed.
type commitGroup struct {
	last uint64        // the last sequence it makes durable, once sealed
	done chan struct{} // closed once it committed or failed
	err  error         // why it failed; set before done is closed
}

func newCommitGroup() *commitGroup { return &commitGroup{done: make(chan struct{})} }

func (g *commitGroup) finish(err error) {
	g.err = err
	close(g.done)
}

func (g *commitGroup) await() error {
	<-g.done
	return g.err
}

func (g *commitGroup) isDurable() bool {
	select {
	case <-g.done:
		return g.err == nil
	default:
		return false
	}
}

// committed tells the actor that its commit g ended.
type committed struct{ g *commitGroup }

// errEarlierCommitFailed is what replies waiting for a commit that was
// never proposed hear.
var errEarlierCommitFailed = errors.New("an earlier commit of the installation's deliveries failed")

// replicated says whether the actor's writes commit through the groups.
func (a *deliveryActor) replicated() bool { return a.env.Commits != nil }

// durableBy returns what a reply handing out sequences up to seq must
// wait for: the commit in flight when it covers seq, else the next one,
// started now when none is in flight.
func (a *deliveryActor) durableBy(seq uint64) awaitable {
	if g := a.inflight; g != nil {
		if seq <= g.last {
			return g
		}
		if a.next == nil {
			a.next = newCommitGroup()
		}
		return a.next
	}
	if a.next == nil {
		a.next = newCommitGroup()
	}
	g := a.next
	a.startCommit()
	return g
}

// startCommit commits what is pending, durably, as the next commit, in
// the background; the actor hears of its end (committed).
func (a *deliveryActor) startCommit() {
	g := a.next
	a.next = nil
	if g == nil {
		g = newCommitGroup()
	}
	b := a.sealDurable()
	g.last = a.last
	a.inflight = g
	root, self, env := a.root, a.self, a.env
	go func() {
		g.finish(commitDurably(env, b))
		root.Send(self, committed{g})
	}()
}

// sealDurable seals what is pending for a durable commit. On a node alone
// takes that a flush wrote without a sync may be all there is to make
// durable: the last sequence, written again, has the commit sync the WAL,
// which covers them.
func (a *deliveryActor) sealDurable() sealed {
	a.pending()
	if !a.replicated() {
		a.takes = true
	}
	return a.seal()
}

// commitDurably commits b durably: through the groups, or with a WAL sync,
// whose failure leaves nothing to trust on a node alone (Env.Fatal).
func commitDurably(env *Env, s sealed) error {
	err := s.commit(env)
	if err != nil && env.Commits == nil {
		env.Fatal(err)
	}
	return err
}

// ended takes the end of commit g: the next one starts when replies wait
// for it, and what is pending otherwise waits for the flush.
func (a *deliveryActor) ended(ctx actorContext, g *commitGroup) {
	if g != a.inflight {
		return // settle waited for it
	}
	a.inflight = nil
	if g.err != nil {
		a.fail(g.err)
		return
	}
	a.durable = max(a.durable, g.last)
	switch {
	case a.next != nil:
		a.startCommit()
	case a.batch.Batch != nil:
		a.flushLater(ctx)
	}
}

// flush writes what is pending, within flushAfter of a notice's take or
// an attempt's outcome. The commit in flight, when there is one, starts
// the next or asks for a flush again on its end. A node alone writes
// inline, without a sync of its own (settle); through the groups every
// write is a raft round, in the background. A failure stops the actor
// (stopIfBroken), whose next activation starts again from what is stored:
// the outbox still holds the events.
func (a *deliveryActor) flush() {
	switch {
	case a.inflight != nil:
	case a.replicated():
		if a.batch.Batch != nil {
			a.startCommit()
		}
	default:
		_ = a.settle()
	}
}

// settle writes what was taken (the queue's references and the last
// sequence together) and the outcomes of attempts, and returns once every
// write of the actor is applied, so that it reads its own writes: it
// waits for the commit in flight, then writes inline. On a node alone that
// write waits for no WAL sync of its own unless replies wait for the next
// commit: the posts that keep coming sync the WAL anyway, and a crash
// before the next sync undoes all of it at once, leaving the outbox
// entries to be taken again under the same sequences and the attempts to
// be made again. (No event leaves the node before its sequence is
// durable: durableBy.)
func (a *deliveryActor) settle() error {
	if g := a.inflight; g != nil {
		a.inflight = nil
		if err := g.await(); err != nil {
			a.fail(err)
			return fmt.Errorf("queue events of %s: %w", a.id, err)
		}
		a.durable = max(a.durable, g.last)
	}
	g := a.next
	a.next = nil
	var err error
	switch last := a.last; {
	case g != nil:
		if err = commitDurably(a.env, a.sealDurable()); err == nil {
			a.durable = max(a.durable, last)
		}
	case a.batch.Batch == nil:
	case a.replicated():
		if err = a.seal().commit(a.env); err == nil {
			a.durable = max(a.durable, last)
		}
	default:
		err = a.seal().write(a.env)
	}
	if g != nil {
		g.finish(err)
	}
	if err != nil {
		a.fail(err)
		return fmt.Errorf("queue events of %s: %w", a.id, err)
	}
	return nil
}

// fail leaves the actor broken after a commit failed: what was pending is
// dropped, replies waiting for the next commit fail, and the actor answers
// nothing more until it stops (Receive) and its next activation reads the
// store.
func (a *deliveryActor) fail(err error) {
	if a.broken == nil {
		a.broken = err
	}
	a.discard()
	if g := a.next; g != nil {
		a.next = nil
		g.finish(fmt.Errorf("%w: %w", errEarlierCommitFailed, err))
	}
}

// rememberSelf keeps what a commit in the background needs to tell the
// actor of its end.
func (a *deliveryActor) rememberSelf(ctx actorContext) {
	if a.self == nil {
		a.root, a.self = ctx.ActorSystem().Root, ctx.Self()
	}
}
