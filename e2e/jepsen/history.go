package jepsen

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Outcome is what one attempt of a post tells its client.
type Outcome int

const (
	// OK: a 2xx with the message; the post happened.
	OK Outcome = iota + 1
	// Failed: an answer that says nothing was changed (a 4xx). The writer
	// gives the post up.
	Failed
	// Indeterminate: no answer, a timeout or a 5xx; the post may or may not
	// have happened, and the writer retries it with the same key.
	Indeterminate
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Indeterminate:
		return "indeterminate"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Op is one attempt of one post: one HTTP request. A post's attempts share
// its key and text; a retry is a new Op with the next Attempt number.
type Op struct {
	Writer     int
	Node       string // the base URL the attempt went to
	Conv       string
	Key        string // Idempotency-Key, unique per post
	Text       string // unique per post
	Attempt    int    // 1 for a post's first try
	Start, End time.Time

	Outcome Outcome
	Status  int    // HTTP status; 0 without an answer
	Code    string // the error body's code
	// RetryAfter is the Retry-After header of the answer.
	RetryAfter string
	Err        string // transport error or timeout
	// Allowed: the answer is one a client may see (2xx, or a failure
	// docs/decisions.md "Jepsen-style checks" allows: 503 unavailable with Retry-After, 502, 504, no
	// answer). Anything else is a finding.
	Allowed bool

	// Of a 2xx: the message as answered.
	ID      string
	Pos     uint64 // the position the id carries (1 = the first message)
	AnsText string
	AnsConv string
}

func (op Op) String() string {
	s := fmt.Sprintf("writer %d attempt %d of key %q to %s (conversation %s)", op.Writer, op.Attempt, op.Key, op.Node, op.Conv)
	switch {
	case op.Status != 0:
		s += fmt.Sprintf(": %d %s", op.Status, op.Code)
		if op.RetryAfter != "" {
			s += " Retry-After " + op.RetryAfter
		}
	case op.Err != "":
		s += ": " + op.Err
	}
	if op.ID != "" {
		s += fmt.Sprintf(" message %s at %d", op.ID, op.Pos)
	}
	return s
}

// History is every attempt of a run, safe for concurrent appends.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Add records an attempt.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns the attempts in the order they started.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start.Before(ops[j].Start) })
	return ops
}

// post is what the attempts of one key say together.
type post struct {
	key, conv, text string
	attempts        []Op
	firstStart      time.Time
	acked           *Op // the first attempt answered 2xx, by end time
	mayExist        bool
}

// posts groups attempts by key, in the order of their first attempt.
func posts(ops []Op) []*post {
	byKey := make(map[string]*post)
	var out []*post
	for _, op := range ops {
		p := byKey[op.Key]
		if p == nil {
			p = &post{key: op.Key, conv: op.Conv, text: op.Text, firstStart: op.Start}
			byKey[op.Key] = p
			out = append(out, p)
		}
		p.attempts = append(p.attempts, op)
		if op.Start.Before(p.firstStart) {
			p.firstStart = op.Start
		}
		switch op.Outcome {
		case OK:
			if p.acked == nil || op.End.Before(p.acked.End) {
				op := op
				p.acked = &op
			}
			p.mayExist = true
		case Indeterminate:
			p.mayExist = true
		}
	}
	return out
}
