package jepsen

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

const wsA, wsB, wsObs = "wa", "wb", "wobs"

func claim(client int, ws string, call, ret int64, out SlugOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: SlugInput{Slug: "s", Workspace: ws}, Call: call, Output: out, Return: ret}
}

func check(client int, ws string, call, ret int64, r Result) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: SlugInput{Slug: "s", Workspace: ws, Check: true}, Call: call, Output: SlugOutput{Result: r}, Return: ret}
}

func claimed(kit string, created bool) SlugOutput {
	return SlugOutput{Result: Claimed, KitID: kit, Created: created}
}

var (
	taken   = SlugOutput{Result: Taken}
	unknown = SlugOutput{Result: Unknown}
)

func TestSlugModel(t *testing.T) {
	tests := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"concurrent claims: one wins, the others are taken, the winner claims again", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			claim(1, wsB, 0, 10, taken),
			claim(0, wsA, 11, 20, claimed("k1", false)),
			claim(1, wsB, 11, 20, taken),
		}, true},
		{"a check concurrent with the winning claim may see the slug open or taken", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			check(1, wsObs, 1, 9, Open),
			check(2, wsObs, 2, 8, Taken),
		}, true},
		{"the owner's check sees its own slug open", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			check(0, wsA, 11, 20, Open),
		}, true},
		{"a claim with no answer may have won", []porcupine.Operation{
			claim(0, wsA, 0, never, unknown),
			claim(1, wsB, 5, 10, taken),
			claim(2, wsA, 20, 30, claimed("k1", false)),
		}, true},
		{"a claim with no answer may not have happened", []porcupine.Operation{
			claim(0, wsA, 0, never, unknown),
			claim(1, wsB, 5, 10, claimed("k2", true)),
		}, true},
		{"two workspaces both won the slug", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			claim(1, wsB, 20, 30, claimed("k2", true)),
		}, false},
		{"a claim was taken before anyone claimed", []porcupine.Operation{
			claim(1, wsB, 0, 5, taken),
			claim(0, wsA, 10, 20, claimed("k1", true)),
		}, false},
		{"the winner's second claim names another Kit", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			claim(0, wsA, 11, 20, claimed("k2", false)),
		}, false},
		{"a check after the claim returned sees the slug open", []porcupine.Operation{
			claim(0, wsA, 0, 10, claimed("k1", true)),
			check(1, wsObs, 20, 30, Open),
		}, false},
		{"a check saw the slug taken, a later one open again", []porcupine.Operation{
			claim(0, wsA, 0, 50, claimed("k1", true)),
			check(1, wsObs, 10, 20, Taken),
			check(1, wsObs, 30, 40, Open),
		}, false},
		{"an unexpected answer is never linearizable", []porcupine.Operation{
			claim(0, wsA, 0, 10, SlugOutput{Result: Unexpected, Detail: "400"}),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(SlugModel.ToModel(), tt.ops); got != tt.ok {
				t.Errorf("linearizable = %v, want %v", got, tt.ok)
			}
		})
	}
}

func keyPost(client int, text string, call, ret int64, r Result, id string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: PostInput{Key: "k", Text: text}, Call: call, Output: PostOutput{Result: r, ID: id}, Return: ret}
}

func TestReplayModel(t *testing.T) {
	tests := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"concurrent posts of one key and content: one made the message, the others replay it", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Replayed, "m1"),
			keyPost(1, "a", 0, 10, Created, "m1"),
			keyPost(2, "a", 0, 10, Replayed, "m1"),
		}, true},
		{"other content conflicts once the key holds a message", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Created, "m1"),
			keyPost(1, "b", 0, 10, Conflict, ""),
			keyPost(2, "b", 11, 20, Conflict, ""),
		}, true},
		{"either content may win a race", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Conflict, ""),
			keyPost(1, "b", 0, 10, Created, "m1"),
		}, true},
		{"a post with no answer may have made the message the others replay", []porcupine.Operation{
			keyPost(0, "a", 0, never, Unknown, ""),
			keyPost(1, "a", 5, 10, Replayed, "m1"),
			keyPost(2, "a", 11, 20, Replayed, "m1"),
		}, true},
		{"two posts of one key both made a message", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Created, "m1"),
			keyPost(1, "a", 0, 10, Created, "m2"),
		}, false},
		{"a replay names another message than the one made", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Created, "m1"),
			keyPost(1, "a", 11, 20, Replayed, "m2"),
		}, false},
		{"a replay answered before any post that could make the message was sent", []porcupine.Operation{
			keyPost(0, "a", 0, 5, Replayed, "m1"),
			keyPost(1, "a", 10, 20, Created, "m1"),
		}, false},
		{"the same content answered as a conflict", []porcupine.Operation{
			keyPost(0, "a", 0, 10, Created, "m1"),
			keyPost(1, "a", 11, 20, Conflict, ""),
		}, false},
		{"a conflict before the key held anything", []porcupine.Operation{
			keyPost(0, "b", 0, 5, Conflict, ""),
			keyPost(1, "a", 10, 20, Created, "m1"),
		}, false},
		{"a message made after the key was replayed", []porcupine.Operation{
			keyPost(0, "a", 0, never, Unknown, ""),
			keyPost(1, "a", 5, 10, Replayed, "m1"),
			keyPost(2, "a", 11, 20, Created, "m2"),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(ReplayModel.ToModel(), tt.ops); got != tt.ok {
				t.Errorf("linearizable = %v, want %v", got, tt.ok)
			}
		})
	}
}
