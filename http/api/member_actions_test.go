package api

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/proto/kitpb"
)

// A Kit's 2xx answer to a member action (docs/deliveries.md "Member
// actions"): what it posts, what it shows the member only, and what is the
// Kit failing.
func TestReadAnswer(t *testing.T) {
	s := &Server{env: &actors.Env{Clock: clock.NewTest()}}
	const header = `[{"type":"header","text":"Title"}]`
	tests := []struct {
		rule      string
		body      string
		post      bool   // a message to store
		text      string // the message's text (stored or ephemeral)
		ephemeral bool
		invalid   bool
	}{
		{"an empty body posts nothing", "", false, "", false, false},
		{"{} posts nothing", `{}`, false, "", false, false},
		{"text posts a message", `{"text":"done"}`, true, "done", false, false},
		{"text with blocks posts both (the conversation checks the blocks)", `{"text":"done","blocks":` + header + `}`, true, "done", false, false},
		{"other keys are ignored", `{"text":"done","response_type":"in_channel"}`, true, "done", false, false},
		{"an ephemeral message is shown, not posted", `{"text":"only you","ephemeral":true}`, false, "only you", true, false},
		{"an ephemeral message keeps valid blocks", `{"text":"only you","ephemeral":true,"blocks":` + header + `}`, false, "only you", true, false},
		{"a body that is not JSON is invalid", `ok`, false, "", false, true},
		{"a JSON array is invalid", `[]`, false, "", false, true},
		{"blocks without text are invalid", `{"blocks":` + header + `}`, false, "", false, true},
		{"blank text is invalid", `{"text":"   "}`, false, "", false, true},
		{"text over 8,000 characters is invalid", `{"text":"` + strings.Repeat("a", 8001) + `"}`, false, "", false, true},
		{"a key given twice is invalid, as in every body (which text?)", `{"text":"a","text":"b"}`, false, "", false, true},
		{"ephemeral given twice is invalid (shown to one, or posted to all?)", `{"text":"x","ephemeral":true,"ephemeral":false}`, false, "", false, true},
		{"an ephemeral message with invalid blocks is invalid", `{"text":"x","ephemeral":true,"blocks":[{"type":"header"}]}`, false, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			grant := &kitpb.MemberActionGrant{BotId: "bot"}
			finish := &kitpb.FinishMemberAction{}
			shown := s.readAnswer([]byte(tt.body), "conv", grant, finish)
			if got := finish.ErrorCode == actors.ErrorInvalidAnswer; got != tt.invalid {
				t.Fatalf("invalid = %v (errorCode %q), want %v", got, finish.ErrorCode, tt.invalid)
			}
			if finish.Post != tt.post || tt.post && finish.Text != tt.text {
				t.Fatalf("post %v %q, want %v %q", finish.Post, finish.Text, tt.post, tt.text)
			}
			if (shown != nil) != tt.ephemeral || tt.ephemeral && (shown.Text != tt.text || shown.AuthorId != "bot" || shown.ConversationId != "conv") {
				t.Fatalf("shown %v, want ephemeral %v", shown, tt.ephemeral)
			}
		})
	}
}
