package jepsen

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

// Kind is the rule a finding breaks.
type Kind int

const (
	// LostWrite: a post answered 2xx is not in a reader's history.
	LostWrite Kind = iota + 1
	// AnswerDiffers: the history holds a post's message with another id,
	// text, conversation or position than its 2xx answer named.
	AnswerDiffers
	// ReadersDisagree: two nodes list a conversation differently.
	ReadersDisagree
	// PositionGap: a history skips a position (positions run 1, 2, 3, ...
	// oldest first, as message ids carry them).
	PositionGap
	// PositionDuplicate: a history lists a position or an id twice.
	PositionDuplicate
	// AppliedTwice: one Idempotency-Key made two messages (two messages of
	// its text, or two 2xx answers naming different ids).
	AppliedTwice
	// UnexpectedAnswer: an answer that is neither a 2xx of the post nor a
	// failure a client may see (503 unavailable with Retry-After, 502,
	// 504, no answer).
	UnexpectedAnswer
	// FailedApplied: a post every attempt of which was refused (a 4xx says
	// nothing changed) is in the history.
	FailedApplied
	// PhantomMessage: a history holds a message nobody posted to that
	// conversation.
	PhantomMessage
	// RealTimeOrder: a message is listed before one whose post was
	// acknowledged before the first was even sent.
	RealTimeOrder
	// Unreadable: a node did not answer the read of a conversation.
	Unreadable
)

var kindNames = map[Kind]string{
	LostWrite:         "lost write",
	AnswerDiffers:     "answer differs",
	ReadersDisagree:   "readers disagree",
	PositionGap:       "position gap",
	PositionDuplicate: "position duplicate",
	AppliedTwice:      "applied twice",
	UnexpectedAnswer:  "unexpected answer",
	FailedApplied:     "failed post applied",
	PhantomMessage:    "phantom message",
	RealTimeOrder:     "real-time order",
	Unreadable:        "unreadable",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Finding is one broken rule, with where and what.
type Finding struct {
	Kind   Kind
	Node   string // the reader, when a read showed it
	Conv   string
	Key    string
	Detail string
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Kind.String())
	if f.Node != "" {
		b.WriteString(" through " + f.Node)
	}
	if f.Conv != "" {
		b.WriteString(" in " + f.Conv)
	}
	if f.Key != "" {
		fmt.Fprintf(&b, " (key %q)", f.Key)
	}
	return b.String() + ": " + f.Detail
}

// Message is one message as a reader listed it.
type Message struct {
	ID, Conv, Text string
}

// Read is one conversation's whole history as one node listed it, oldest
// first.
type Read struct {
	Node, Conv string
	Messages   []Message
	Err        error
}

// Outage is a window in which writes to one conversation kept failing:
// from the start of a failed attempt to the end of the first attempt that
// started after it and succeeded.
type Outage struct {
	Conv      string
	From, To  time.Time
	Failures  int  // attempts that failed in the window
	Recovered bool // false: no write succeeded after it (To is the last failure's end)
}

// Duration is how long the writes failed.
func (o Outage) Duration() time.Duration { return o.To.Sub(o.From) }

// Report is what Check found.
type Report struct {
	Findings []Finding
	// Posts, Acked and Unresolved count keys: every post, those answered
	// 2xx, and those with neither a 2xx nor a refusal.
	Posts, Acked, Unresolved int
	Attempts                 int
	// Answers counts the attempts by answer: "201", "503 unavailable",
	// "no answer", ...
	Answers map[string]int
	// Outages: every window of failing writes, longest first.
	Outages []Outage
}

// Longest is the longest outage (zero when writes never failed).
func (r *Report) Longest() Outage {
	if len(r.Outages) == 0 {
		return Outage{}
	}
	return r.Outages[0]
}

// Of returns the findings of kind k.
func (r *Report) Of(k Kind) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Kind == k {
			out = append(out, f)
		}
	}
	return out
}

// Summary is one line: counts, answers and the longest outage.
func (r *Report) Summary() string {
	answers := make([]string, 0, len(r.Answers))
	for a, n := range r.Answers {
		answers = append(answers, fmt.Sprintf("%s ×%d", a, n))
	}
	sort.Strings(answers)
	s := fmt.Sprintf("%d posts (%d acknowledged, %d unresolved) in %d attempts; answers: %s; %d findings",
		r.Posts, r.Acked, r.Unresolved, r.Attempts, strings.Join(answers, ", "), len(r.Findings))
	if o := r.Longest(); o.Failures > 0 {
		s += fmt.Sprintf("; longest outage %v in %s (%d failed attempts, recovered %v)", o.Duration().Round(time.Millisecond), o.Conv, o.Failures, o.Recovered)
	}
	return s
}

// Check judges a history against what every node listed. reads must hold
// every conversation of the history, read through every node after the
// workload stopped.
func Check(ops []Op, reads []Read) *Report {
	c := &checker{r: &Report{Answers: make(map[string]int)}}
	ps := posts(ops)
	c.byText = make(map[string]*post, len(ps))
	for _, p := range ps {
		c.byText[p.text] = p
		c.r.Posts++
		switch {
		case p.acked != nil:
			c.r.Acked++
		case p.mayExist:
			c.r.Unresolved++
		}
		c.answers(p)
	}
	c.r.Attempts = len(ops)
	for _, rd := range reads {
		if rd.Err != nil {
			c.add(Finding{Kind: Unreadable, Node: rd.Node, Conv: rd.Conv, Detail: rd.Err.Error()})
			continue
		}
		c.history(rd, ps)
	}
	c.agree(reads)
	c.r.Outages = outages(ops)
	return c.r
}

type checker struct {
	r      *Report
	byText map[string]*post
}

func (c *checker) add(f Finding) { c.r.Findings = append(c.r.Findings, f) }

// answers checks what each attempt of a post was answered.
func (c *checker) answers(p *post) {
	ids := make(map[string]bool)
	for _, op := range p.attempts {
		c.r.Answers[answerName(op)]++
		if !op.Allowed {
			c.add(Finding{Kind: UnexpectedAnswer, Conv: p.conv, Key: p.key, Detail: op.String()})
			continue
		}
		if op.Outcome != OK {
			continue
		}
		if op.AnsText != p.text || op.AnsConv != p.conv || op.Pos == 0 {
			c.add(Finding{Kind: UnexpectedAnswer, Conv: p.conv, Key: p.key,
				Detail: fmt.Sprintf("2xx names message %s with text %q in %s; posted %q", op.ID, op.AnsText, op.AnsConv, p.text)})
		}
		ids[op.ID] = true
	}
	if len(ids) > 1 {
		c.add(Finding{Kind: AppliedTwice, Conv: p.conv, Key: p.key, Detail: fmt.Sprintf("its 2xx answers name %d messages: %v", len(ids), sortedKeys(ids))})
	}
}

func answerName(op Op) string {
	switch {
	case op.Status == 0:
		return "no answer"
	case op.Code != "":
		return fmt.Sprintf("%d %s", op.Status, op.Code)
	}
	return fmt.Sprint(op.Status)
}

// history checks one node's list of one conversation.
func (c *checker) history(rd Read, ps []*post) {
	at := func(f Finding) Finding { f.Node, f.Conv = rd.Node, rd.Conv; return f }
	byID := make(map[string]int, len(rd.Messages))
	byText := make(map[string]int, len(rd.Messages))
	// Positions must run 1, 2, 3, ...: each the one before plus one. Only
	// the first break is reported; everything after it is off by as much.
	var prev uint64
	broken := false
	for i, m := range rd.Messages {
		if j, dup := byID[m.ID]; dup {
			c.add(at(Finding{Kind: PositionDuplicate, Detail: fmt.Sprintf("message %s is listed at %d and %d", m.ID, j+1, i+1)}))
			broken = true
			continue
		}
		byID[m.ID] = i
		_, pos, ok := ids.ParseMessage(m.ID)
		switch {
		case broken:
		case !ok:
			broken = true
			c.add(at(Finding{Kind: PositionGap, Detail: fmt.Sprintf("message %s at %d carries no position", m.ID, i+1)}))
		case pos <= prev:
			broken = true
			c.add(at(Finding{Kind: PositionDuplicate, Detail: fmt.Sprintf("message %s at %d carries position %d, after position %d", m.ID, i+1, pos, prev)}))
		case pos > prev+1:
			broken = true
			c.add(at(Finding{Kind: PositionGap, Detail: fmt.Sprintf("message %s at %d carries position %d after position %d", m.ID, i+1, pos, prev)}))
		}
		prev = pos
		p := c.byText[m.Text]
		switch {
		case p == nil || p.conv != rd.Conv:
			c.add(at(Finding{Kind: PhantomMessage, Detail: fmt.Sprintf("message %s at %d with text %q", m.ID, i+1, m.Text)}))
			continue
		case !p.mayExist:
			c.add(at(Finding{Kind: FailedApplied, Key: p.key, Detail: fmt.Sprintf("message %s at %d; every attempt was refused: %s", m.ID, i+1, p.attempts[len(p.attempts)-1])}))
		}
		if j, twice := byText[m.Text]; twice {
			c.add(at(Finding{Kind: AppliedTwice, Key: p.key, Detail: fmt.Sprintf("its text is listed at %d and %d", j+1, i+1)}))
			continue
		}
		byText[m.Text] = i
		if m.Conv != rd.Conv {
			c.add(at(Finding{Kind: PhantomMessage, Key: p.key, Detail: fmt.Sprintf("message %s at %d says it belongs to %s", m.ID, i+1, m.Conv)}))
		}
	}
	for _, p := range ps {
		if p.conv != rd.Conv || p.acked == nil {
			continue
		}
		a := p.acked
		i, ok := byID[a.ID]
		if !ok {
			if j, found := byText[p.text]; found {
				c.add(at(Finding{Kind: AnswerDiffers, Key: p.key, Detail: fmt.Sprintf("answered as %s, listed as %s at %d", a.ID, rd.Messages[j].ID, j+1)}))
			} else {
				c.add(at(Finding{Kind: LostWrite, Key: p.key, Detail: fmt.Sprintf("message %s (answered %d at %s) is not listed", a.ID, a.Status, a.End.Format(time.RFC3339Nano))}))
			}
			continue
		}
		// Its position is the one its id carries, which the run of
		// positions above checked against where it is listed.
		if m := rd.Messages[i]; m.Text != p.text {
			c.add(at(Finding{Kind: AnswerDiffers, Key: p.key, Detail: fmt.Sprintf("message %s is listed with text %q, answered with %q", a.ID, m.Text, p.text)}))
		}
	}
	c.realTime(rd)
}

// realTime checks the order against real time: a post acknowledged before
// another post was first sent must be listed before it. Walking from the
// newest message down, it keeps the earliest acknowledgement among the
// newer ones; a message first sent after it is listed too early.
func (c *checker) realTime(rd Read) {
	var earliest *post
	for i := len(rd.Messages) - 1; i >= 0; i-- {
		p := c.byText[rd.Messages[i].Text]
		if p == nil || p.conv != rd.Conv {
			continue
		}
		if earliest != nil && earliest.acked.End.Before(p.firstStart) {
			c.add(Finding{Kind: RealTimeOrder, Node: rd.Node, Conv: rd.Conv, Key: p.key,
				Detail: fmt.Sprintf("listed at %d, before key %q, which was acknowledged %v before this post was sent", i+1, earliest.key, p.firstStart.Sub(earliest.acked.End))})
			return
		}
		if p.acked != nil && (earliest == nil || p.acked.End.Before(earliest.acked.End)) {
			earliest = p
		}
	}
}

// agree compares each conversation's list across the nodes that read it.
func (c *checker) agree(reads []Read) {
	first := make(map[string]Read)
	for _, rd := range reads {
		if rd.Err != nil {
			continue
		}
		f, ok := first[rd.Conv]
		if !ok {
			first[rd.Conv] = rd
			continue
		}
		if i, differs := firstDifference(f.Messages, rd.Messages); differs {
			c.add(Finding{Kind: ReadersDisagree, Node: rd.Node, Conv: rd.Conv,
				Detail: fmt.Sprintf("from position %d on: %s lists %s, %s lists %s", i+1, f.Node, idAt(f.Messages, i), rd.Node, idAt(rd.Messages, i))})
		}
	}
}

func firstDifference(a, b []Message) (int, bool) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i, true
		}
	}
	return min(len(a), len(b)), len(a) != len(b)
}

func idAt(ms []Message, i int) string {
	if i >= len(ms) {
		return fmt.Sprintf("nothing (%d messages)", len(ms))
	}
	return ms[i].ID
}

// outages finds, per conversation, the windows in which writes kept
// failing. A window opens at the start of a failed attempt and closes at
// the earliest end of a successful attempt that started after it; failed
// attempts that started before that end belong to the window.
func outages(ops []Op) []Outage {
	byConv := make(map[string][]Op)
	for _, op := range ops {
		byConv[op.Conv] = append(byConv[op.Conv], op)
	}
	var out []Outage
	for conv, ops := range byConv {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start.Before(ops[j].Start) })
		// okEnd[i]: the earliest end of a successful attempt among ops[i:].
		okEnd := make([]time.Time, len(ops)+1)
		for i := len(ops) - 1; i >= 0; i-- {
			okEnd[i] = okEnd[i+1]
			if ops[i].Outcome == OK && (okEnd[i].IsZero() || ops[i].End.Before(okEnd[i])) {
				okEnd[i] = ops[i].End
			}
		}
		for i := 0; i < len(ops); i++ {
			if ops[i].Outcome == OK {
				continue
			}
			o := Outage{Conv: conv, From: ops[i].Start, To: okEnd[i], Recovered: !okEnd[i].IsZero()}
			for ; i < len(ops) && (!o.Recovered || !ops[i].Start.After(o.To)); i++ {
				if ops[i].Outcome != OK {
					o.Failures++
					if !o.Recovered && ops[i].End.After(o.To) {
						o.To = ops[i].End
					}
				}
			}
			i--
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Duration() > out[j].Duration() })
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
