package jepsen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

// Workload is the write load of a run: Writers clients posting to
// Conversations through Nodes, each post with a text and an
// Idempotency-Key of its own. A post whose outcome is unknown (no answer,
// a timeout, a 5xx) is retried with the same key and text, as docs/api.md
// "Errors" lets a client do, until it is answered or refused; a retry
// goes to the next node.
type Workload struct {
	// Nodes are the base URLs of the nodes ("http://127.0.0.1:8080").
	Nodes []string
	// Token is a bot token every node accepts, whose bot was added to
	// every conversation (messages:write and messages:read).
	Token         string
	Conversations []string
	// Writers defaults to 16.
	Writers int
	// AttemptTimeout bounds one attempt (default 2 s): past it the
	// outcome is unknown and the post is retried.
	AttemptTimeout time.Duration
	// Settle bounds how long, after Stop, writers keep retrying the posts
	// they have in hand (default 15 s); what is still unknown then stays
	// unresolved in the history.
	Settle time.Duration
	Client Client
}

// Run is a started workload.
type Run struct {
	w       *Workload
	id      string
	history History
	acked   atomic.Int64
	stop    chan struct{}
	settle  chan struct{} // closed when writers should give up retrying
	wg      sync.WaitGroup
	stopped sync.Once
}

// Start starts the writers. ctx bounds the whole run: once it ends,
// nothing more is sent.
func (w *Workload) Start(ctx context.Context) *Run {
	if w.Writers == 0 {
		w.Writers = 16
	}
	if w.AttemptTimeout == 0 {
		w.AttemptTimeout = 2 * time.Second
	}
	if w.Settle == 0 {
		w.Settle = 15 * time.Second
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	r := &Run{w: w, id: hex.EncodeToString(b), stop: make(chan struct{}), settle: make(chan struct{})}
	for i := range w.Writers {
		r.wg.Add(1)
		go r.writer(ctx, i)
	}
	return r
}

// Acked is how many posts were answered 2xx so far.
func (r *Run) Acked() int { return int(r.acked.Load()) }

// Stop lets each writer finish the post it has in hand (for at most
// Settle) and returns every attempt, in the order they started.
func (r *Run) Stop() []Op {
	r.stopped.Do(func() {
		close(r.stop)
		t := time.AfterFunc(r.w.Settle, func() { close(r.settle) })
		r.wg.Wait()
		t.Stop()
	})
	return r.history.Ops()
}

func (r *Run) writer(ctx context.Context, w int) {
	defer r.wg.Done()
	nodes, convs := r.w.Nodes, r.w.Conversations
	for n := 0; ; n++ {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		key := fmt.Sprintf("jepsen-%s-w%02d-%06d", r.id, w, n)
		text := fmt.Sprintf("jepsen run %s writer %02d post %06d", r.id, w, n)
		conv := convs[(w+n)%len(convs)]
		backoff := 25 * time.Millisecond
		for attempt := 1; ; attempt++ {
			op := r.post(ctx, Op{Writer: w, Node: nodes[(w+n+attempt-1)%len(nodes)], Conv: conv, Key: key, Text: text, Attempt: attempt})
			r.history.Add(op)
			if op.Outcome == OK {
				r.acked.Add(1)
			}
			if op.Outcome != Indeterminate {
				break
			}
			// Jittered exponential backoff, 25 ms doubling to 400 ms: a
			// client's retry, not a wait for anything.
			wait := backoff/2 + mrand.N(backoff/2+1)
			backoff = min(2*backoff, 400*time.Millisecond)
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
			case <-r.settle:
			}
			break
		}
	}
}

// post makes one attempt and classifies its answer.
func (r *Run) post(ctx context.Context, op Op) Op {
	body := map[string]any{"conversationId": op.Conv, "text": op.Text}
	op.Start = time.Now()
	e, err := r.w.Client.do(ctx, r.w.AttemptTimeout, "POST", op.Node+"/api/v1/messages", r.w.Token, map[string]string{"Idempotency-Key": op.Key}, body)
	op.End = time.Now()
	if err != nil {
		op.Outcome, op.Allowed, op.Err = Indeterminate, true, err.Error()
		return op
	}
	classify(&op, e)
	return op
}

// classify reads an answer into op: its outcome and whether a client may
// see it.
func classify(op *Op, e *Exchange) {
	op.Status, op.RetryAfter = e.Status, e.Header.Get("Retry-After")
	switch {
	case e.Status == 200 || e.Status == 201:
		var b struct {
			Message struct {
				ID             string `json:"id"`
				ConversationID string `json:"conversationId"`
				Text           string `json:"text"`
			} `json:"message"`
		}
		if json.Unmarshal(e.Body, &b) != nil || b.Message.ID == "" {
			// A 2xx without its message: the post may have happened, and
			// the answer is wrong.
			op.Outcome, op.Allowed = Indeterminate, false
			return
		}
		op.Outcome, op.Allowed = OK, true
		op.ID, op.AnsText, op.AnsConv = b.Message.ID, b.Message.Text, b.Message.ConversationID
		_, op.Pos, _ = ids.ParseMessage(op.ID)
	case e.Status >= 500:
		op.Code = e.code()
		op.Outcome = Indeterminate
		switch e.Status {
		case 503:
			// The cluster's answer while a partition has no leader; the
			// client waits Retry-After, then retries with its key.
			op.Allowed = op.Code == "unavailable" && op.RetryAfter != ""
		case 502, 504:
			op.Allowed = true
		}
	default:
		// A 4xx (or anything else) says the request was refused: nothing
		// changed. None is expected of a valid post with a fresh key.
		op.Code = e.code()
		op.Outcome, op.Allowed = Failed, false
	}
}
