package jepsen

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// Linearizability: two registers of kitd are checked with porcupine
// against a sequential model of what docs/api.md says they do. An operation
// whose outcome is unknown (no answer, a 5xx) may have taken effect at any
// time after its call, so it has no return (math.MaxInt64) and the models
// let it happen or not: porcupine then searches both.

// Result is what one operation of a register was answered.
type Result int

const (
	// Unknown: no answer, a timeout or a 5xx.
	Unknown Result = iota + 1
	// Unexpected: an answer the model has no place for; it makes the
	// history illegal, and Detail says what it was.
	Unexpected

	// Claimed: an upload of the slug's first version answered 201 with
	// the slug's Kit.
	Claimed
	// Taken: 409 slug_taken (a claim), or validate's problem at slug (a
	// check): another workspace's Kit owns the slug.
	Taken
	// Open: validate found the slug free, or the asker's own.
	Open

	// Created: 201, the key's message was made now.
	Created
	// Replayed: 200, the key's stored message.
	Replayed
	// Conflict: 409 idempotency_conflict, the key holds other content.
	Conflict
)

var resultNames = map[Result]string{
	Unknown: "unknown", Unexpected: "unexpected", Claimed: "claimed", Taken: "taken", Open: "open",
	Created: "created", Replayed: "replayed", Conflict: "conflict",
}

func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// never is the return time of an operation whose outcome is unknown.
const never = math.MaxInt64

// SlugInput is a claim of a slug (an upload of a manifest naming it) or a
// check (validate, which changes nothing) by one workspace's developer.
type SlugInput struct {
	Slug, Workspace string
	Check           bool
}

// SlugOutput is a claim's or check's answer.
type SlugOutput struct {
	Result  Result
	KitID   string // of Claimed
	Created bool   // of Claimed: the upload stored a new version
	Detail  string // of Unexpected
}

// slugState is who owns a slug; kitID "" after a claim of unknown outcome
// until an answer names it.
type slugState struct{ owner, kitID string }

// SlugModel: a slug is free until the first claim, which gives it to the
// claimer's workspace and a Kit for good. That workspace's later claims
// are answered with the same Kit; every other workspace's with 409
// slug_taken. A check answers taken exactly when another workspace owns
// it.
var SlugModel = porcupine.NondeterministicModel{
	Partition: partitionBy(func(in any) string { return in.(SlugInput).Slug }),
	Init:      func() []any { return []any{slugState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(slugState), input.(SlugInput), output.(SlugOutput)
		other := s.owner != "" && s.owner != in.Workspace
		if in.Check {
			switch out.Result {
			case Unknown:
				return []any{s}
			case Taken:
				return when(other, s)
			case Open:
				return when(!other, s)
			}
			return nil
		}
		switch out.Result {
		case Unknown:
			if s.owner == "" {
				return []any{s, slugState{owner: in.Workspace}}
			}
			return []any{s}
		case Claimed:
			mine := s.owner == "" || s.owner == in.Workspace && (s.kitID == "" || s.kitID == out.KitID)
			return when(mine, slugState{owner: in.Workspace, kitID: out.KitID})
		case Taken:
			return when(other, s)
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(SlugInput), output.(SlugOutput)
		verb := "claim"
		if in.Check {
			verb = "check"
		}
		return fmt.Sprintf("%s %s by %s → %s", verb, in.Slug, short(in.Workspace), out)
	},
	DescribeState: func(state any) string {
		s := state.(slugState)
		if s.owner == "" {
			return "free"
		}
		return fmt.Sprintf("%s's (kit %s)", short(s.owner), short(s.kitID))
	},
}

func (o SlugOutput) String() string {
	switch o.Result {
	case Claimed:
		return fmt.Sprintf("claimed, kit %s, created %v", short(o.KitID), o.Created)
	case Unexpected:
		return "unexpected " + o.Detail
	}
	return o.Result.String()
}

// PostInput is a POST /messages with an Idempotency-Key: only the key and
// the content matter (the conversation and the caller are the same for
// every post of a key).
type PostInput struct{ Key, Text string }

// PostOutput is its answer.
type PostOutput struct {
	Result Result
	ID     string // of Created and Replayed
	Detail string // of Unexpected
}

func (o PostOutput) String() string {
	switch o.Result {
	case Created, Replayed:
		return fmt.Sprintf("%s %s", o.Result, o.ID)
	case Unexpected:
		return "unexpected " + o.Detail
	}
	return o.Result.String()
}

// keyState is what a key holds: nothing (text "") or a message of text;
// id "" after a post of unknown outcome until an answer names it.
type keyState struct{ text, id string }

// ReplayModel (docs/api.md "Idempotency record"): the first post of
// a key makes its message (201); the same key with the same content
// returns that message (200); with other content, 409
// idempotency_conflict.
var ReplayModel = porcupine.NondeterministicModel{
	Partition: partitionBy(func(in any) string { return in.(PostInput).Key }),
	Init:      func() []any { return []any{keyState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(keyState), input.(PostInput), output.(PostOutput)
		switch out.Result {
		case Unknown:
			if s.text == "" {
				return []any{s, keyState{text: in.Text}}
			}
			return []any{s}
		case Created:
			return when(s.text == "", keyState{text: in.Text, id: out.ID})
		case Replayed:
			same := s.text == in.Text && (s.id == "" || s.id == out.ID)
			return when(same, keyState{text: in.Text, id: out.ID})
		case Conflict:
			return when(s.text != "" && s.text != in.Text, s)
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(PostInput), output.(PostOutput)
		return fmt.Sprintf("post %q with key %s → %s", in.Text, in.Key, out)
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		if s.text == "" {
			return "empty"
		}
		return fmt.Sprintf("%q as %s", s.text, s.id)
	},
}

// when returns {s} if ok, else no state: the step cannot happen.
func when(ok bool, s any) []any {
	if ok {
		return []any{s}
	}
	return nil
}

// partitionBy splits a history into independent registers: a history is
// linearizable when each register's is.
func partitionBy(register func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(ops []porcupine.Operation) [][]porcupine.Operation {
		index := make(map[string]int)
		var out [][]porcupine.Operation
		for _, op := range ops {
			r := register(op.Input)
			i, ok := index[r]
			if !ok {
				i = len(out)
				index[r] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
