package cluster

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// NewInlineMailbox is a mailbox for actors on protoactor's synchronized
// dispatcher, which runs an actor on the goroutine that sends to it. When
// the actor is idle and nothing waits in its mailbox, a message is handled
// at once, without passing through a queue: protoactor's default mailbox
// would push it into a locked queue, allocate a closure to schedule the
// run, and pop it again, on every send.
//
// Otherwise it behaves as the default mailbox: system messages go before
// user messages; a suspended mailbox (the actor failed and waits for its
// supervisor) holds user messages until it is resumed; a panic in a
// handler is escalated with the message that caused it; a busy actor
// yields its goroutine after each dispatcher.Throughput() messages; one
// sender's messages are handled in the order sent. It does not unpack
// actor.MessageBatch, which kitd never sends.
func NewInlineMailbox() actor.Mailbox {
	return &inlineMailbox{}
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

type inlineMailbox struct {
	status    atomic.Int32 // mailboxIdle or mailboxRunning: who runs the actor
	users     atomic.Int32 // user messages queued
	systems   atomic.Int32 // system messages queued
	suspended atomic.Bool

	mu     sync.Mutex
	user   fifo
	system fifo

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func() // m.processMessages, bound once instead of per schedule
}

func (m *inlineMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.process = m.processMessages
}

func (m *inlineMailbox) Start() {}

func (m *inlineMailbox) UserMessageCount() int { return int(m.users.Load()) }

func (m *inlineMailbox) PostUserMessage(msg any) {
	if m.users.Load() == 0 && m.systems.Load() == 0 && !m.suspended.Load() &&
		m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		// Owning the mailbox now: a message queued between the checks and
		// the swap goes first.
		if m.users.Load() == 0 && m.systems.Load() == 0 {
			m.invokeUser(msg)
		} else {
			m.push(&m.user, &m.users, msg)
		}
		m.processMessages()
		return
	}
	m.push(&m.user, &m.users, msg)
	m.schedule()
}

func (m *inlineMailbox) PostSystemMessage(msg any) {
	m.push(&m.system, &m.systems, msg)
	m.schedule()
}

func (m *inlineMailbox) push(q *fifo, n *atomic.Int32, msg any) {
	m.mu.Lock()
	q.push(msg)
	m.mu.Unlock()
	n.Add(1)
}

func (m *inlineMailbox) pop(q *fifo, n *atomic.Int32) any {
	if n.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	msg := q.pop()
	m.mu.Unlock()
	if msg != nil {
		n.Add(-1)
	}
	return msg
}

func (m *inlineMailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

// processMessages runs the actor while it has messages, then leaves the
// mailbox idle, taking it back if a message arrived meanwhile.
func (m *inlineMailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mailboxIdle)
		if m.systems.Load() == 0 && (m.suspended.Load() || m.users.Load() == 0) {
			return
		}
		if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return // another sender runs it now
		}
	}
}

func (m *inlineMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(Panic{r, debug.Stack()}, msg)
		}
	}()
	for i, limit := 0, m.dispatcher.Throughput(); ; i++ {
		if i == limit {
			i = 0
			runtime.Gosched()
		}
		if msg = m.pop(&m.system, &m.systems); msg != nil {
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg = m.pop(&m.user, &m.users); msg == nil {
			return
		}
		m.invoker.InvokeUserMessage(msg)
	}
}

// invokeUser handles one message outside run, escalating a panic as run
// does.
func (m *inlineMailbox) invokeUser(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(Panic{r, debug.Stack()}, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}

// Panic is what a handler's panic escalates to the actor's supervisor:
// the value and the stack it was raised on, which the node logs (Start).
type Panic struct {
	Value any
	Stack []byte
}

func (p Panic) Error() string { return fmt.Sprintf("panic: %v\n%s", p.Value, p.Stack) }

// fifo is a queue of messages; its zero value is empty. Not safe for
// concurrent use.
type fifo struct {
	items []any
	head  int
}

func (q *fifo) push(msg any) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		// Half of it handled: move the rest to the front, so that a queue
		// that never quite drains does not grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, msg)
}

func (q *fifo) pop() any {
	if q.head == len(q.items) {
		return nil
	}
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	return msg
}
