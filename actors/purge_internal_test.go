package actors

import (
	"bytes"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// mailboxCtx is an actor context whose sends to the actor itself wait in
// queue for the test to deliver them: the order of the messages is the
// test's.
type mailboxCtx struct {
	actor.Context
	msg     any
	queue   []any
	replies []any
}

func (c *mailboxCtx) Message() any                 { return c.msg }
func (c *mailboxCtx) Sender() *actor.PID           { return &actor.PID{Id: "test"} }
func (c *mailboxCtx) Self() *actor.PID             { return &actor.PID{Id: "self"} }
func (c *mailboxCtx) Respond(r any)                { c.replies = append(c.replies, r) }
func (c *mailboxCtx) Send(_ *actor.PID, m any)     { c.queue = append(c.queue, m) }
func (c *mailboxCtx) Stop(*actor.PID)              {}
func (c *mailboxCtx) deliver(a actor.Actor, m any) { c.msg = m; a.Receive(c) }

// next delivers the first message waiting; false when none is.
func (c *mailboxCtx) next(a actor.Actor) bool {
	if len(c.queue) == 0 {
		return false
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	c.deliver(a, m)
	return true
}

// TestARunThatEndsMidPassLeavesNoMarker: the outcome of a run that a purge
// pass kept, in while the pass goes on over the keys after it, deletes
// the run; the purge then deletes its marker too (docs/credentials.md
// "Purge on uninstall": the pass that leaves nothing deletes it). The
// marker had stayed until the installation's next activation: the pass
// under way ended having kept a run, and the next one finishRun asked for
// was taken for its continuation.
func TestARunThatEndsMidPassLeavesNoMarker(t *testing.T) {
	inst, run := ids.New(), ids.New()
	env := &Env{Store: expiryStore(t), Clock: clock.NewTest(), testHookWriteSweepMax: 1}
	b := env.newBatch()
	put(b, runKey(inst, run), &kitpb.Run{Id: run, Status: RunRunning})
	b.Set(openRunKey(inst, run), nil)
	for i := range 3 { // keys after the run's
		put(b, responseURLKey(inst, bytes.Repeat([]byte{byte(i)}, 32)), &kitpb.ResponseURL{})
	}
	b.Set(purgeKey(inst), nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	a := &installationActor{env: env, id: inst, inst: &kitpb.Installation{Id: inst, KitId: ids.New(), Uninstalled: true}}
	a.purge.due = true // as the uninstall leaves it
	ctx := &mailboxCtx{}
	ctx.deliver(a, &kitpb.GetInstallation{})
	ctx.next(a) // the first batch: the running run, kept
	if !a.purge.kept || len(ctx.queue) != 1 {
		t.Fatalf("after the first batch: kept %v, %d waiting; want the run kept and the next batch waiting", a.purge.kept, len(ctx.queue))
	}
	ctx.deliver(a, &kitpb.FinishRun{RunId: run, Succeeded: true})
	for ctx.next(a) {
	}
	for _, r := range ctx.replies {
		if f, ok := r.(*kitpb.Failure); ok {
			t.Fatalf("a request failed: %v", f)
		}
	}
	prefix := installationRecordsPrefix(inst)
	err := env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		t.Errorf("left: %s", KeyKind(k))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if marked, err := env.Store.Has(purgeKey(inst)); err != nil || marked {
		t.Fatalf("the purge marker left (%v) once nothing is", err)
	}
}
