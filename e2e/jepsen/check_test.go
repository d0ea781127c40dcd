package jepsen

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// msgID is the id of message seq of conv, as kitd mints it.
func msgID(conv string, seq uint64) string { return ids.NewMessage(t0, ids.MessageTag(conv), seq) }

const (
	convA, convB = "0b6c6c8e-1d3a-4f5e-9a1b-2c3d4e5f6a7b", "1c7d7d9f-2e4b-4a6f-8b2c-3d4e5f6a7b8c"
	node1, node2 = "http://127.0.0.1:1", "http://127.0.0.1:2"
)

// ok is an attempt answered 2xx with message seq of its conversation.
func ok(w int, conv, key string, attempt int, from, to int, status int, seq uint64) Op {
	op := attempt0(w, conv, key, attempt, from, to)
	op.Outcome, op.Allowed, op.Status = OK, true, status
	op.ID, op.Pos, op.AnsText, op.AnsConv = msgID(conv, seq), seq, op.Text, conv
	return op
}

// failed is an attempt with an answer that is not a 2xx.
func failed(w int, conv, key string, attempt int, from, to int, status int, code, retryAfter string) Op {
	op := attempt0(w, conv, key, attempt, from, to)
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	body := []byte(`{}`)
	if code != "" {
		body = []byte(`{"code":"` + code + `","message":"m","correlationId":"c"}`)
	}
	classify(&op, &Exchange{Status: status, Header: h, Body: body})
	return op
}

// lost is an attempt without an answer.
func lost(w int, conv, key string, attempt int, from, to int) Op {
	op := attempt0(w, conv, key, attempt, from, to)
	op.Outcome, op.Allowed, op.Err = Indeterminate, true, "EOF"
	return op
}

func attempt0(w int, conv, key string, attempt int, from, to int) Op {
	return Op{Writer: w, Node: node1, Conv: conv, Key: key, Text: "text of " + key, Attempt: attempt, Start: ms(from), End: ms(to)}
}

func listed(conv string, keysBySeq ...string) []Message {
	var out []Message
	for i, k := range keysBySeq {
		out = append(out, Message{ID: msgID(conv, uint64(i+1)), Conv: conv, Text: "text of " + k})
	}
	return out
}

// scenario is a history and what the nodes listed after it.
type scenario struct {
	ops   []Op
	reads []Read
}

// clean is a history a correct cluster could have produced: retries with
// one key that end in a replay, allowed failures, one unresolved post that
// did not happen and one that did.
func clean() scenario {
	ops := []Op{
		ok(0, convA, "k1", 1, 0, 10, 201, 1),
		lost(1, convA, "k2", 1, 5, 2005),
		failed(1, convA, "k2", 2, 2100, 2110, 503, "unavailable", "1"),
		ok(1, convA, "k2", 3, 2200, 2210, 200, 2), // the first attempt had made it
		failed(2, convA, "k3", 1, 20, 30, 502, "", ""),
		ok(2, convA, "k3", 2, 40, 50, 201, 3),
		lost(3, convA, "k4", 1, 60, 2060),              // unresolved, not made
		failed(4, convA, "k5", 1, 70, 80, 504, "", ""), // unresolved, made
		ok(5, convB, "k6", 1, 0, 5, 201, 1),
		ok(6, convB, "k7", 1, 10, 15, 201, 2),
	}
	var reads []Read
	for _, n := range []string{node1, node2} {
		reads = append(reads,
			Read{Node: n, Conv: convA, Messages: listed(convA, "k1", "k2", "k3", "k5")},
			Read{Node: n, Conv: convB, Messages: listed(convB, "k6", "k7")})
	}
	return scenario{ops, reads}
}

// read returns the read of conv through node.
func (s *scenario) read(node, conv string) *Read {
	for i := range s.reads {
		if s.reads[i].Node == node && s.reads[i].Conv == conv {
			return &s.reads[i]
		}
	}
	panic("no read of " + conv + " through " + node)
}

// op returns the attempt of key.
func (s *scenario) op(key string, attempt int) *Op {
	for i := range s.ops {
		if s.ops[i].Key == key && s.ops[i].Attempt == attempt {
			return &s.ops[i]
		}
	}
	panic("no attempt of " + key)
}

// onEveryNode applies f to conv's read on every node.
func (s *scenario) onEveryNode(conv string, f func(r *Read)) {
	for _, n := range []string{node1, node2} {
		f(s.read(n, conv))
	}
}

func TestCheckerFindsEachViolation(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(s *scenario)
		want   Kind // 0: no finding at all
	}{
		{"a clean history with retries, replays and allowed failures passes", func(s *scenario) {}, 0},
		{"a 2xx message missing from a reader is a lost write", func(s *scenario) {
			r := s.read(node2, convB)
			r.Messages = r.Messages[:1]
		}, LostWrite},
		{"a 2xx message listed with another text differs from its answer", func(s *scenario) {
			s.onEveryNode(convB, func(r *Read) { r.Messages[1].Text = "text of k6 edited" })
		}, AnswerDiffers},
		{"a key's text listed under another id than its 2xx named differs from its answer", func(s *scenario) {
			s.op("k7", 1).ID = msgID(convA, 9)
		}, AnswerDiffers},
		{"nodes listing a conversation differently disagree", func(s *scenario) {
			// k5 was never answered, so node 2 missing it breaks nothing else.
			r := s.read(node2, convA)
			r.Messages = r.Messages[:3]
		}, ReadersDisagree},
		{"a skipped position is a gap", func(s *scenario) {
			s.onEveryNode(convA, func(r *Read) { r.Messages[3].ID = msgID(convA, 5) })
		}, PositionGap},
		{"a position listed twice is a duplicate", func(s *scenario) {
			s.onEveryNode(convA, func(r *Read) {
				// Another message (a later millisecond) at position 3 again.
				r.Messages[3].ID = ids.NewMessage(t0.Add(time.Millisecond), ids.MessageTag(convA), 3)
			})
		}, PositionDuplicate},
		{"an id listed twice is a duplicate", func(s *scenario) {
			s.onEveryNode(convB, func(r *Read) { r.Messages = append(r.Messages, r.Messages[1]) })
		}, PositionDuplicate},
		{"one key's text listed twice was applied twice", func(s *scenario) {
			s.onEveryNode(convA, func(r *Read) {
				r.Messages = append(r.Messages, Message{ID: msgID(convA, 5), Conv: convA, Text: "text of k2"})
			})
		}, AppliedTwice},
		{"two 2xx answers of one key naming different messages were applied twice", func(s *scenario) {
			s.ops = append(s.ops, ok(2, convA, "k3", 3, 60, 70, 200, 4))
		}, AppliedTwice},
		{"a 500 is an unexpected answer", func(s *scenario) {
			*s.op("k3", 1) = failed(2, convA, "k3", 1, 20, 30, 500, "internal_error", "")
		}, UnexpectedAnswer},
		{"a 503 without Retry-After is an unexpected answer", func(s *scenario) {
			*s.op("k2", 2) = failed(1, convA, "k2", 2, 2100, 2110, 503, "unavailable", "")
		}, UnexpectedAnswer},
		{"a 503 with another code than unavailable is an unexpected answer", func(s *scenario) {
			*s.op("k2", 2) = failed(1, convA, "k2", 2, 2100, 2110, 503, "internal_error", "1")
		}, UnexpectedAnswer},
		{"a 4xx to a fresh key is an unexpected answer", func(s *scenario) {
			s.ops = append(s.ops, failed(7, convB, "k8", 1, 20, 30, 409, "idempotency_conflict", ""))
		}, UnexpectedAnswer},
		{"a 2xx naming another text is an unexpected answer", func(s *scenario) {
			s.op("k6", 1).AnsText = "text of k7"
		}, UnexpectedAnswer},
		{"a refused post that is listed was applied", func(s *scenario) {
			s.ops = append(s.ops, failed(7, convB, "k8", 1, 20, 30, 400, "validation_error", ""))
			s.onEveryNode(convB, func(r *Read) { r.Messages = listed(convB, "k6", "k7", "k8") })
		}, FailedApplied},
		{"a message nobody posted is a phantom", func(s *scenario) {
			s.onEveryNode(convB, func(r *Read) { r.Messages = listed(convB, "k6", "k7", "nobody's") })
		}, PhantomMessage},
		{"a message posted to another conversation is a phantom there", func(s *scenario) {
			s.onEveryNode(convB, func(r *Read) { r.Messages = listed(convB, "k6", "k7", "k5") })
		}, PhantomMessage},
		{"a message listed before a post acknowledged before it was sent breaks real-time order", func(s *scenario) {
			// k7 was sent at 10 ms, after k6's 2xx at 5 ms, but is listed first.
			*s.op("k6", 1) = ok(5, convB, "k6", 1, 0, 5, 201, 2)
			*s.op("k7", 1) = ok(6, convB, "k7", 1, 10, 15, 201, 1)
			s.onEveryNode(convB, func(r *Read) { r.Messages = listed(convB, "k7", "k6") })
		}, RealTimeOrder},
		{"a node that cannot be read is reported", func(s *scenario) {
			r := s.read(node2, convA)
			r.Messages, r.Err = nil, errors.New("GET: connection refused")
		}, Unreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := clean()
			tt.break_(&s)
			r := Check(s.ops, s.reads)
			if tt.want == 0 {
				for _, f := range r.Findings {
					t.Errorf("finding in a clean history: %s", f)
				}
				return
			}
			if len(r.Of(tt.want)) == 0 {
				t.Errorf("no %q finding; findings: %v", tt.want, r.Findings)
			}
			for _, f := range r.Findings {
				t.Logf("%s", f)
			}
		})
	}
}

func TestCheckCounts(t *testing.T) {
	s := clean()
	r := Check(s.ops, s.reads)
	if r.Posts != 7 || r.Acked != 5 || r.Unresolved != 2 || r.Attempts != 10 {
		t.Errorf("posts %d acked %d unresolved %d attempts %d; want 7 5 2 10", r.Posts, r.Acked, r.Unresolved, r.Attempts)
	}
	want := map[string]int{"201": 4, "200": 1, "no answer": 2, "503 unavailable": 1, "502": 1, "504": 1}
	for k, n := range want {
		if r.Answers[k] != n {
			t.Errorf("answers[%q] = %d, want %d (all: %v)", k, r.Answers[k], n, r.Answers)
		}
	}
}

func TestOutages(t *testing.T) {
	type window struct {
		conv      string
		from, to  int
		failures  int
		recovered bool
	}
	tests := []struct {
		name string
		ops  []Op
		want []window // longest first
	}{
		{"writes that never fail have no outage", []Op{
			ok(0, convA, "a", 1, 0, 10, 201, 1), ok(1, convA, "b", 1, 5, 15, 201, 2),
		}, nil},
		{"failures end at the earliest success started after the first of them", []Op{
			ok(0, convA, "a", 1, 0, 1, 201, 1),
			lost(1, convA, "b", 1, 2, 3),
			lost(1, convA, "b", 2, 4, 5),
			ok(1, convA, "b", 3, 6, 8, 201, 2),
			ok(2, convA, "c", 1, 5, 7, 201, 3),
		}, []window{{convA, 2, 7, 2, true}}},
		{"a success sent before the first failure does not end the window", []Op{
			ok(0, convA, "a", 1, 1, 10, 201, 1),
			lost(1, convA, "b", 1, 2, 3),
			ok(1, convA, "b", 2, 4, 5, 201, 2),
		}, []window{{convA, 2, 5, 1, true}}},
		{"failures no success follows are an outage that did not recover", []Op{
			ok(0, convA, "a", 1, 0, 1, 201, 1),
			lost(1, convA, "b", 1, 2, 30),
			lost(2, convA, "c", 1, 3, 20),
		}, []window{{convA, 2, 30, 2, false}}},
		{"separate windows and conversations, longest first", []Op{
			lost(0, convA, "a", 1, 0, 1),
			ok(0, convA, "a", 2, 2, 3, 201, 1),
			lost(1, convA, "b", 1, 10, 11),
			ok(1, convA, "b", 2, 12, 20, 201, 2),
			lost(2, convB, "c", 1, 5, 6),
			ok(2, convB, "c", 2, 7, 12, 201, 1),
		}, []window{{convA, 10, 20, 1, true}, {convB, 5, 12, 1, true}, {convA, 0, 3, 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []window
			for _, o := range outages(tt.ops) {
				got = append(got, window{o.Conv, int(o.From.Sub(t0) / time.Millisecond), int(o.To.Sub(t0) / time.Millisecond), o.Failures, o.Recovered})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("outages %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	msg := []byte(`{"message":{"id":"` + msgID(convA, 7) + `","conversationId":"` + convA + `","text":"t"}}`)
	errBody := func(code string) []byte { return []byte(`{"code":"` + code + `","message":"m","correlationId":"c"}`) }
	tests := []struct {
		name       string
		status     int
		retryAfter string
		body       []byte
		outcome    Outcome
		allowed    bool
	}{
		{"201 with its message is ok", 201, "", msg, OK, true},
		{"200 replay with its message is ok", 200, "", msg, OK, true},
		{"a 2xx without a message is wrong and may have happened", 201, "", []byte(`{}`), Indeterminate, false},
		{"503 unavailable with Retry-After is allowed, outcome unknown", 503, "1", errBody("unavailable"), Indeterminate, true},
		{"503 unavailable without Retry-After is not allowed", 503, "", errBody("unavailable"), Indeterminate, false},
		{"503 with another code is not allowed", 503, "1", errBody("internal_error"), Indeterminate, false},
		{"502 is allowed, outcome unknown", 502, "", nil, Indeterminate, true},
		{"504 is allowed, outcome unknown", 504, "", nil, Indeterminate, true},
		{"500 is not allowed, outcome unknown", 500, "", errBody("internal_error"), Indeterminate, false},
		{"a 4xx is a refusal, not allowed", 409, "", errBody("idempotency_conflict"), Failed, false},
		{"a 429 is a refusal, not allowed (runs go without limits)", 429, "1", errBody("rate_limited"), Failed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.retryAfter != "" {
				h.Set("Retry-After", tt.retryAfter)
			}
			var op Op
			classify(&op, &Exchange{Status: tt.status, Header: h, Body: tt.body})
			if op.Outcome != tt.outcome || op.Allowed != tt.allowed {
				t.Errorf("outcome %v allowed %v, want %v %v", op.Outcome, op.Allowed, tt.outcome, tt.allowed)
			}
			if tt.outcome == OK && (op.Pos != 7 || op.AnsConv != convA) {
				t.Errorf("2xx read as position %d in %s, want 7 in %s", op.Pos, op.AnsConv, convA)
			}
		})
	}
}
