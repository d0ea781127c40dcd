package cluster

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is the actor side of a mailbox under test: it records what it
// handles and checks that it never handles two messages at once.
type recorder struct {
	mb      *inlineMailbox
	inside  atomic.Bool
	overlap atomic.Bool
	mu      sync.Mutex
	got     []any
	failed  []any // messages whose handling panicked, as escalated
	onUser  func(msg any)
}

func newRecorder(throughput int) *recorder {
	r := &recorder{mb: NewInlineMailbox().(*inlineMailbox)}
	r.mb.RegisterHandlers(r, syncDispatcher(throughput))
	return r
}

type syncDispatcher int

func (d syncDispatcher) Schedule(fn func()) { fn() }
func (d syncDispatcher) Throughput() int    { return int(d) }

func (r *recorder) handle(msg any) {
	if r.inside.Swap(true) {
		r.overlap.Store(true)
	}
	r.mu.Lock()
	r.got = append(r.got, msg)
	r.mu.Unlock()
	r.inside.Store(false)
}

func (r *recorder) InvokeSystemMessage(msg any) { r.handle(msg) }

func (r *recorder) InvokeUserMessage(msg any) {
	r.handle(msg)
	if r.onUser != nil {
		r.onUser(msg)
	}
}

func (r *recorder) EscalateFailure(_ any, msg any) {
	r.failed = append(r.failed, msg)
	r.mb.PostSystemMessage(&actor.SuspendMailbox{}) // as actorContext does
}

func (r *recorder) handled() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func TestInlineMailbox(t *testing.T) {
	type sys string // a system message of the test
	tests := []struct {
		name string
		run  func(r *recorder)
		want []any
	}{
		{"an idle actor handles a message at once", func(r *recorder) {
			r.mb.PostUserMessage("a")
		}, []any{"a"}},
		{"messages are handled in the order sent", func(r *recorder) {
			for _, m := range []string{"a", "b", "c"} {
				r.mb.PostUserMessage(m)
			}
		}, []any{"a", "b", "c"}},
		{"a message the actor sends itself waits until the current one is done", func(r *recorder) {
			r.onUser = func(msg any) {
				if msg == "a" {
					r.mb.PostUserMessage("b")
					r.handle("a done")
				}
			}
			r.mb.PostUserMessage("a")
		}, []any{"a", "a done", "b"}},
		{"system messages go before queued user messages", func(r *recorder) {
			r.onUser = func(msg any) {
				if msg == "a" {
					r.mb.PostUserMessage("b")
					r.mb.PostSystemMessage(sys("s"))
				}
			}
			r.mb.PostUserMessage("a")
		}, []any{"a", sys("s"), "b"}},
		{"a suspended mailbox holds user messages until resumed", func(r *recorder) {
			r.mb.PostSystemMessage(&actor.SuspendMailbox{})
			r.mb.PostUserMessage("held")
			r.handle("resuming")
			r.mb.PostSystemMessage(&actor.ResumeMailbox{})
		}, []any{"resuming", "held"}},
		{"a panic is escalated with its message, and the next waits for the resume", func(r *recorder) {
			r.onUser = func(msg any) {
				if msg == "boom" {
					panic("boom")
				}
			}
			r.mb.PostUserMessage("boom")
			r.mb.PostUserMessage("after")
			if !slices.Equal(r.failed, []any{"boom"}) {
				panic(fmt.Sprintf("escalated %v, want [boom]", r.failed))
			}
			r.handle("resuming")
			r.mb.PostSystemMessage(&actor.ResumeMailbox{})
		}, []any{"boom", "resuming", "after"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder(300)
			tt.run(r)
			if got := r.handled(); !slices.Equal(got, tt.want) {
				t.Fatalf("handled %v, want %v", got, tt.want)
			}
			if r.mb.UserMessageCount() != 0 {
				t.Errorf("%d user messages left", r.mb.UserMessageCount())
			}
		})
	}
}

// Many senders at once: every message is handled exactly once, never two
// at a time, and each sender's in the order it sent them.
func TestInlineMailboxConcurrentSenders(t *testing.T) {
	const senders, each = 8, 5000
	r := newRecorder(7) // a small throughput also exercises the yields
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r.mb.PostUserMessage([2]int{s, i})
			}
		}()
	}
	wg.Wait()
	if r.overlap.Load() {
		t.Fatal("two messages were handled at once")
	}
	got := r.handled()
	if len(got) != senders*each {
		t.Fatalf("%d messages handled, want %d", len(got), senders*each)
	}
	next := make([]int, senders)
	for _, m := range got {
		p := m.([2]int)
		if p[1] != next[p[0]] {
			t.Fatalf("sender %d: message %d handled when %d was next", p[0], p[1], next[p[0]])
		}
		next[p[0]]++
	}
}

func TestFIFOReusesItsSpace(t *testing.T) {
	var q fifo
	for i := range 10_000 {
		q.push(i)
		q.push(i)
		if got := q.pop(); got == nil {
			t.Fatal("empty")
		}
	}
	if cap(q.items) > 3*(len(q.items)-q.head)+64 {
		t.Fatalf("capacity %d for %d queued messages", cap(q.items), len(q.items)-q.head)
	}
	for q.pop() != nil {
	}
	if q.pop() != nil {
		t.Fatal("a drained queue is not empty")
	}
}
