package cluster

import (
	"github.com/asynkron/protoactor-go/actor"
)

// replySlot is a reusable reply address for requests from outside any
// actor (the HTTP front end). protoactor's futures register a new process,
// a timer and a goroutine hand-off per request; a slot is registered once
// and reused, which keeps the request path lean. A slot is reused only after
// it received the one reply of its request; a slot whose request timed out
// is retired, so a late reply can never be taken for another request's.
type replySlot struct {
	pid *actor.PID
	ch  chan any // capacity 1: one reply per request
}

func (r *replySlot) SendUserMessage(_ *actor.PID, m any) {
	_, msg, _ := actor.UnwrapEnvelope(m)
	select {
	case r.ch <- msg:
	default: // a second message for one request: nobody waits for it
	}
}

func (r *replySlot) SendSystemMessage(_ *actor.PID, m any) { r.SendUserMessage(nil, m) }
func (r *replySlot) Stop(*actor.PID)                       {}

// replyPool hands out reply slots.
type replyPool struct {
	system *actor.ActorSystem
	free   chan *replySlot
}

// maxIdleSlots bounds the slots kept between requests: about the number of
// requests in flight at once.
const maxIdleSlots = 4096

func newReplyPool(system *actor.ActorSystem) *replyPool {
	return &replyPool{system: system, free: make(chan *replySlot, maxIdleSlots)}
}

func (p *replyPool) get() *replySlot {
	select {
	case s := <-p.free:
		return s
	default:
	}
	s := &replySlot{ch: make(chan any, 1)}
	s.pid, _ = p.system.ProcessRegistry.Add(s, "reply$"+p.system.ProcessRegistry.NextId())
	return s
}

// put returns a slot whose reply was received.
func (p *replyPool) put(s *replySlot) {
	select {
	case p.free <- s:
	default:
		p.retire(s)
	}
}

// retire unregisters a slot for good: a reply that arrives later goes to
// dead letters.
func (p *replyPool) retire(s *replySlot) {
	p.system.ProcessRegistry.Remove(s.pid)
}
