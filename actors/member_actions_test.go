package actors_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Member actions (docs/deliveries.md "Member actions"): what the
// conversation and the installation decide for a slash command, an
// interaction and a responseUrl.

const (
	commandsURL = "https://kit.example.com/commands"
	interactURL = "https://kit.example.com/interact"
	buttonsJSON = `[{"type":"actions","elements":[{"type":"button","actionId":"approve","text":"Approve","value":"yes"},` +
		`{"type":"static_select","actionId":"env","options":[{"text":"Prod","value":"prod"},{"text":"Dev","value":"dev"}]}]}]`
)

// actionFixture is a Kit declaring /deploy and interactivity, installed
// with its bot in a channel of a member, and a message of the bot with a
// button and a select.
type actionFixture struct {
	ws, member, outsider, conv string
	inst                       *kitpb.Installation
	bot                        *kitpb.Caller
	message                    string
}

func (n *testNode) actionFixture(t *testing.T) *actionFixture {
	t.Helper()
	w := n.workspace(t, 2)
	f := &actionFixture{ws: w.id, member: w.users[0], outsider: w.users[1]}
	f.conv = n.channel(t, w.id, f.member)
	var man map[string]any
	noErr(t, json.Unmarshal([]byte(manifestJSON(newSlug(), "1.0.0", chatScopes...)), &man))
	man["commands"] = []any{map[string]any{"name": "/deploy", "description": map[string]any{"en": "Deploys"}}}
	man["endpoints"] = map[string]any{"commands": commandsURL}
	man["interactivity"] = map[string]any{"url": interactURL}
	b, _ := json.Marshal(man)
	v := n.mustUpload(t, w.id, string(b), false)
	f.inst = n.install(t, w.id, v.Kit.Id, "")
	f.inst = n.addChannel(t, f.inst.Id, f.conv)
	f.bot = &kitpb.Caller{Kind: actors.CallerBot, WorkspaceId: w.id, InstallationId: f.inst.Id, BotId: f.inst.BotId, Interactive: true}
	f.message = n.post(t, f.bot, f.conv, postReq{text: "Deploy?", blocks: buttonsJSON}).Id
	return f
}

func (f *actionFixture) command(user string) *kitpb.BeginMemberAction {
	return &kitpb.BeginMemberAction{Kind: actors.ActionCommand, WorkspaceId: f.ws, UserId: user, ConversationId: f.conv, Command: "/deploy"}
}

func (f *actionFixture) interaction(user string) *kitpb.BeginMemberAction {
	return &kitpb.BeginMemberAction{Kind: actors.ActionInteraction, WorkspaceId: f.ws, UserId: user, ConversationId: f.conv, MessageId: f.message}
}

func TestFindAction(t *testing.T) {
	n := shared
	f := n.actionFixture(t)
	userMsg := n.post(t, userCaller(f.ws, f.member), f.conv, postReq{text: "mine"}).Id
	deleted := n.post(t, f.bot, f.conv, postReq{text: "gone", blocks: buttonsJSON}).Id
	ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.DeleteMessage{Caller: f.bot, MessageId: deleted})
	str := func(s string) *string { return &s }
	tests := []struct {
		rule      string
		user      string
		message   string
		action    string
		value     *string
		wantValue string
		wantCode  kiterr.Code
	}{
		{"a button of a Kit bot's message goes to its installation with the button's value", f.member, f.message, "approve", nil, "yes", ""},
		{"a button ignores a value sent with it", f.member, f.message, "approve", str("other"), "yes", ""},
		{"a select sends the chosen option", f.member, f.message, "env", str("dev"), "dev", ""},
		{"a select without a choice is 400", f.member, f.message, "env", nil, "", kiterr.Validation},
		{"a choice that is none of the options is 400", f.member, f.message, "env", str("staging"), "", kiterr.Validation},
		{"a member not in the conversation gets 404", f.outsider, f.message, "approve", nil, "", kiterr.NotFound},
		{"an actionId no element has is 404", f.member, f.message, "nothing", nil, "", kiterr.NotFound},
		{"a member's own message is no Kit's: 404", f.member, userMsg, "approve", nil, "", kiterr.NotFound},
		{"a deleted message is 404", f.member, deleted, "approve", nil, "", kiterr.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			r, err := try[*kitpb.ActionReply](n, actors.KindConversation, f.conv, &kitpb.FindAction{
				Caller: userCaller(f.ws, tt.user), MessageId: tt.message, ActionId: tt.action, Value: tt.value,
			})
			if tt.wantCode != "" {
				wantCode(t, err, tt.wantCode)
				return
			}
			noErr(t, err)
			if r.InstallationId != f.inst.Id || r.Value != tt.wantValue {
				t.Fatalf("reply %v, want installation %s and value %q", r, f.inst.Id, tt.wantValue)
			}
		})
	}
}

func TestBeginMemberAction(t *testing.T) {
	n := ownNode(t)
	f := n.actionFixture(t)
	tests := []struct {
		rule     string
		req      *kitpb.BeginMemberAction
		wantURL  string
		wantCode kiterr.Code
	}{
		{"a command the installed version declares goes to endpoints.commands", f.command(f.member), commandsURL, ""},
		{"an interaction goes to interactivity.url", f.interaction(f.member), interactURL, ""},
		{"a command it does not declare is 404", &kitpb.BeginMemberAction{Kind: actors.ActionCommand, WorkspaceId: f.ws, UserId: f.member, ConversationId: f.conv, Command: "/status"}, "", kiterr.NotFound},
		{"a member of another workspace gets 404", &kitpb.BeginMemberAction{Kind: actors.ActionCommand, WorkspaceId: ids.New(), UserId: f.member, ConversationId: f.conv, Command: "/deploy"}, "", kiterr.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			g, err := try[*kitpb.MemberActionGrant](n, actors.KindInstallation, f.inst.Id, tt.req)
			if tt.wantCode != "" {
				wantCode(t, err, tt.wantCode)
				return
			}
			noErr(t, err)
			if g.Url != tt.wantURL || g.KitId != f.inst.KitId || g.BotId != f.inst.BotId || !ids.WellFormed(g.ResponseToken, actors.ResponseTokenPrefix) {
				t.Fatalf("grant %v", g)
			}
		})
	}
	t.Run("the responseUrl token is stored only as its hash", func(t *testing.T) {
		g := ask[*kitpb.MemberActionGrant](t, n, actors.KindInstallation, f.inst.Id, f.command(f.member))
		noErr(t, n.store.Scan(nil, []byte{0xff}, false, func(k, v []byte) bool {
			if bytes.Contains(k, []byte(g.ResponseToken)) || bytes.Contains(v, []byte(g.ResponseToken)) {
				t.Errorf("the token is stored under %q", k)
			}
			return true
		}))
	})
	limited := []struct {
		rule     string
		capacity int
		req      func(user string) *kitpb.BeginMemberAction
	}{
		{"the 11th command of a member in a minute is 429", 10, f.command},
		{"the 31st interaction of a member with a Kit in a minute is 429", 30, f.interaction},
	}
	for _, tt := range limited {
		t.Run(tt.rule, func(t *testing.T) {
			n.clk.Advance(time.Minute) // full buckets
			for i := range tt.capacity {
				if _, err := try[*kitpb.MemberActionGrant](n, actors.KindInstallation, f.inst.Id, tt.req(f.member)); err != nil {
					t.Fatalf("action %d: %v", i+1, err)
				}
			}
			_, err := try[*kitpb.MemberActionGrant](n, actors.KindInstallation, f.inst.Id, tt.req(f.member))
			wantCode(t, err, kiterr.RateLimited)
			// Counted per member: another member still goes.
			ask[*kitpb.MemberActionGrant](t, n, actors.KindInstallation, f.inst.Id, tt.req(f.outsider))
		})
	}
}

func TestFinishMemberAction(t *testing.T) {
	n := shared
	f := n.actionFixture(t)
	tests := []struct {
		rule     string
		finish   *kitpb.FinishMemberAction
		wantCode kiterr.Code
		logCode  string // the developer log entry's errorCode
		posted   bool
	}{
		{"a 2xx without a message posts nothing", &kitpb.FinishMemberAction{Kind: actors.ActionCommand, HttpStatus: 200}, "", "", false},
		{"a 2xx with a message posts it as the Kit bot", &kitpb.FinishMemberAction{Kind: actors.ActionCommand, HttpStatus: 200, Post: true, Text: "done"}, "", "", true},
		{"a failed call is 502 kit_unavailable", &kitpb.FinishMemberAction{Kind: actors.ActionInteraction, HttpStatus: 500, ErrorCode: "http_error"}, kiterr.KitUnavailable, "http_error", false},
		{"an answer breaking a rule of POST /messages is 502 kit_unavailable and posts nothing", &kitpb.FinishMemberAction{Kind: actors.ActionCommand, HttpStatus: 200, Post: true, Text: "x", Blocks: []byte(`[{"type":"header"}]`)}, kiterr.KitUnavailable, actors.ErrorInvalidAnswer, false},
		{"a call not made, its Kit suspended while it waited, is 403 forbidden", &kitpb.FinishMemberAction{Kind: actors.ActionCommand, ErrorCode: actors.ErrorKitSuspended}, kiterr.Forbidden, actors.ErrorKitSuspended, false},
		{"a call not made for want of a slot is 502 kit_unavailable, saying so", &kitpb.FinishMemberAction{Kind: actors.ActionCommand, ErrorCode: actors.ErrorInFlightLimit}, kiterr.KitUnavailable, actors.ErrorInFlightLimit, false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			n.clk.Advance(time.Second) // the conversation's post bucket
			tt.finish.ConversationId, tt.finish.DurationMs = f.conv, 12
			before := len(n.list1(t, f))
			r, err := try[*kitpb.MessageReply](n, actors.KindInstallation, f.inst.Id, tt.finish)
			if tt.wantCode != "" {
				wantCode(t, err, tt.wantCode)
				// The Kit was asked, or it was not: the message says which.
				asked := tt.finish.HttpStatus != 0
				if said := strings.Contains(err.Error(), "did not answer"); tt.wantCode == kiterr.KitUnavailable && said != asked {
					t.Fatalf("%v, for a Kit asked: %v", err, asked)
				}
			} else {
				noErr(t, err)
			}
			if tt.posted != (r.GetMessage() != nil) || tt.posted && (r.Message.AuthorId != f.inst.BotId || r.Message.Text != tt.finish.Text) {
				t.Fatalf("posted %v", r.GetMessage())
			}
			if got := len(n.list1(t, f)); got != before+btoi(tt.posted) {
				t.Fatalf("history grew by %d", got-before)
			}
			entries, _, err := actors.ReadDevLog(n.env, f.inst.KitId, "", 1, nil)
			noErr(t, err)
			e := entries[0]
			if e.Source != actors.LogSourceDelivery || e.Event != tt.finish.Kind+".delivery" || e.ErrorCode != tt.logCode ||
				e.GetAttempt() != 1 || e.GetDurationMs() != 12 || e.GetHttpStatus() != tt.finish.HttpStatus {
				t.Fatalf("log entry %v", e)
			}
		})
	}
}

// list1 is the conversation's history as its member reads it.
func (n *testNode) list1(t *testing.T, f *actionFixture) []*kitpb.Message {
	t.Helper()
	r, err := n.list(userCaller(f.ws, f.member), f.conv, "", 0, 200)
	noErr(t, err)
	return r.Messages
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestUseResponseURL(t *testing.T) {
	n := ownNode(t)
	f := n.actionFixture(t)
	grant := func(req *kitpb.BeginMemberAction) []byte {
		g := ask[*kitpb.MemberActionGrant](t, n, actors.KindInstallation, f.inst.Id, req)
		h := ids.Hash(g.ResponseToken)
		return h[:]
	}
	use := func(hash []byte, text string) error {
		n.clk.Advance(time.Second) // the conversation's post bucket
		_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: hash, Text: text})
		return err
	}
	t.Run("5 uses, then 404", func(t *testing.T) {
		h := grant(f.command(f.member))
		for i := range limits.ResponseURLUses {
			if err := use(h, "step"); err != nil {
				t.Fatalf("use %d: %v", i+1, err)
			}
		}
		wantCode(t, use(h, "sixth"), kiterr.NotFound)
	})
	t.Run("valid for 30 minutes, then 404", func(t *testing.T) {
		h := grant(f.command(f.member))
		n.clk.Advance(limits.ResponseURLLifetime - 2*time.Second) // use advances one more
		noErr(t, use(h, "in time"))
		wantCode(t, use(h, "late"), kiterr.NotFound)
	})
	t.Run("records that expired unused are deleted by a later grant", func(t *testing.T) {
		stored := func() int {
			return len(storedRecords(t, n, actors.ResponseURLsPrefix(f.inst.Id), func() *kitpb.ResponseURL { return &kitpb.ResponseURL{} }))
		}
		n.clk.Advance(limits.ResponseURLLifetime) // every earlier token expired, and a prune is due
		grant(f.command(f.member))
		if got := stored(); got != 1 {
			t.Fatalf("%d records stored, want only the new one", got)
		}
	})
	t.Run("an unknown token is 404", func(t *testing.T) {
		h := ids.Hash(ids.NewSecret(actors.ResponseTokenPrefix))
		wantCode(t, use(h[:], "x"), kiterr.NotFound)
	})
	t.Run("a refused post spends no use", func(t *testing.T) {
		h := grant(f.command(f.member))
		_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: h, Text: "x", Blocks: []byte(`[{"type":"header"}]`)})
		wantCode(t, err, kiterr.Validation)
		for i := range limits.ResponseURLUses {
			if err := use(h, "ok"); err != nil {
				t.Fatalf("use %d: %v", i+1, err)
			}
		}
	})
	t.Run("replaceOriginal replaces the interaction's message", func(t *testing.T) {
		h := grant(f.interaction(f.member))
		_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: h, Text: "approved", ReplaceOriginal: true})
		noErr(t, err)
		m := ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.GetMessage{Caller: f.bot, MessageId: f.message}).Message
		if m.Text != "approved" || len(m.Blocks) != 0 || m.EditedAt == 0 {
			t.Fatalf("original %v", m)
		}
	})
	t.Run("a post the conversation's bucket refuses spends no response_url token", func(t *testing.T) {
		n.clk.Advance(time.Minute) // every bucket full
		for i := 0; ; i++ {        // the conversation's post bucket emptied
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.PostMessage{Caller: f.bot, Text: "fill"})
			if err != nil {
				wantCode(t, err, kiterr.RateLimited)
				break
			}
			if i > 10 {
				t.Fatal("the conversation's post bucket never refused")
			}
		}
		h := grant(f.interaction(f.member))
		for i := range limits.Spec()[limits.ResponseURL].Capacity {
			_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: h, Text: "refused"})
			var e *kiterr.Error
			if !errors.As(err, &e) || e.Limit == nil || e.Limit.Policy != limits.PostMessage {
				t.Fatalf("use %d: %v, want 429 of %s", i+1, err, limits.PostMessage)
			}
		}
		// An edit takes no post token: only response_url can refuse it.
		_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: h, Text: "edited", ReplaceOriginal: true})
		noErr(t, err)
	})
	t.Run("the 51st use per installation in a minute is 429", func(t *testing.T) {
		n.clk.Advance(time.Minute)
		// Replacing edits: the conversation's post bucket is not spent.
		msg := n.post(t, f.bot, f.conv, postReq{text: "Deploy?", blocks: buttonsJSON}).Id
		req := f.interaction(f.member)
		req.MessageId = msg
		var h []byte
		for i := range 50 {
			if i%limits.ResponseURLUses == 0 {
				h = grant(req) // 11 interactions: within their bucket of 30
			}
			if _, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: h, Text: "again", ReplaceOriginal: true}); err != nil {
				t.Fatalf("use %d: %v", i+1, err)
			}
		}
		_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: grant(req), Text: "again", ReplaceOriginal: true})
		wantCode(t, err, kiterr.RateLimited)
	})
}

// An installation recorded by a build before member actions has no
// commands, endpoints or interactivity URL in its record: it learns them
// from its installed version on the first action, and keeps them.
func TestMemberActionsOfAnOlderRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	f := n.actionFixture(t)
	old := proto.Clone(f.inst).(*kitpb.Installation)
	old.Commands, old.CommandsUrl, old.InteractivityUrl, old.ActionsKnown = nil, "", "", false
	v, err := proto.Marshal(old)
	noErr(t, err)
	b := n.store.NewBatch()
	b.Set(actors.InstallationKey(f.inst.Id), v)
	noErr(t, b.Commit())
	noErr(t, n.stop())
	r, err := startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { _ = r.stop() })

	g := ask[*kitpb.MemberActionGrant](t, r, actors.KindInstallation, f.inst.Id, f.command(f.member))
	if g.Url != commandsURL {
		t.Fatalf("grant %v", g)
	}
	raw, err := r.store.Get(actors.InstallationKey(f.inst.Id))
	noErr(t, err)
	stored := &kitpb.Installation{}
	noErr(t, proto.Unmarshal(raw, stored))
	if !stored.ActionsKnown || stored.InteractivityUrl != interactURL || len(stored.Commands) != 1 {
		t.Fatalf("stored %v", stored)
	}
}
