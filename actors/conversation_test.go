package actors_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestVisibility(t *testing.T) {
	n := shared
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a bot sees only channels it was added to", func(t *testing.T) {
			w := n.workspace(t, 1)
			in, out := n.channel(t, w.id, w.users...), n.channel(t, w.id, w.users...)
			b := n.bot(t, w.id, chatScopes, in)
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, in, &kitpb.GetConversation{Caller: b.caller})
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, out, &kitpb.GetConversation{Caller: b.caller})
			wantCode(t, err, kiterr.NotFound)
			_, err = n.list(b.caller, out, "", 0, 10)
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.MembersReply](n, actors.KindConversation, out, &kitpb.ListMembers{Caller: b.caller, Limit: 10})
			wantCode(t, err, kiterr.NotFound)
			_, err = n.send(b.caller, out, postReq{})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a bot removed from a channel no longer sees it", func(t *testing.T) {
			w := n.workspace(t, 0)
			c := n.channel(t, w.id)
			b := n.bot(t, w.id, chatScopes, c)
			r := ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, b.inst.Id, &kitpb.RemoveChannel{ConversationId: c})
			if slices.Contains(r.Installation.ChannelIds, c) {
				t.Fatalf("channelIds still lists the channel: %v", r.Installation.ChannelIds)
			}
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, c, &kitpb.GetConversation{Caller: b.caller})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a bot of another installation does not see the channel", func(t *testing.T) {
			w := n.workspace(t, 0)
			c := n.channel(t, w.id)
			n.bot(t, w.id, chatScopes, c)
			other := n.bot(t, w.id, chatScopes)
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, c, &kitpb.GetConversation{Caller: other.caller})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a bot can be added only to a channel", func(t *testing.T) {
			w := n.workspace(t, 2)
			dm := n.conversation(t, w.id, "dm", w.users...)
			b := n.bot(t, w.id, chatScopes)
			_, err := try[*kitpb.InstallationReply](n, actors.KindInstallation, b.inst.Id, &kitpb.AddChannel{ConversationId: dm})
			wantCode(t, err, kiterr.Validation, "conversationId")
		}},
		{"a bot cannot be added to a channel of another workspace", func(t *testing.T) {
			w, other := n.workspace(t, 0), n.workspace(t, 0)
			c := n.channel(t, other.id)
			b := n.bot(t, w.id, chatScopes)
			_, err := try[*kitpb.InstallationReply](n, actors.KindInstallation, b.inst.Id, &kitpb.AddChannel{ConversationId: c})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a member sees only conversations they belong to", func(t *testing.T) {
			w := n.workspace(t, 2)
			a, b := w.users[0], w.users[1]
			mine, theirs := n.channel(t, w.id, a), n.conversation(t, w.id, "group", b)
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, mine, &kitpb.GetConversation{Caller: userCaller(w.id, a)})
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, theirs, &kitpb.GetConversation{Caller: userCaller(w.id, a)})
			wantCode(t, err, kiterr.NotFound)
			_, err = n.list(userCaller(w.id, a), theirs, "", 0, 10)
			wantCode(t, err, kiterr.NotFound)
			_, err = n.send(userCaller(w.id, a), theirs, postReq{})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a removed member no longer sees the conversation", func(t *testing.T) {
			w := n.workspace(t, 1)
			c := n.channel(t, w.id, w.users...)
			ask[*kitpb.Ok](t, n, actors.KindConversation, c, &kitpb.RemoveMember{UserId: w.users[0]})
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, c, &kitpb.GetConversation{Caller: userCaller(w.id, w.users[0])})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"an added member sees the conversation", func(t *testing.T) {
			w := n.workspace(t, 1)
			c := n.channel(t, w.id)
			ask[*kitpb.Ok](t, n, actors.KindConversation, c, &kitpb.AddMember{UserId: w.users[0], UserWorkspaceId: w.id})
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, c, &kitpb.GetConversation{Caller: userCaller(w.id, w.users[0])})
		}},
		{"a user of another workspace cannot be added", func(t *testing.T) {
			w, other := n.workspace(t, 0), n.workspace(t, 1)
			c := n.channel(t, w.id)
			_, err := try[*kitpb.Ok](n, actors.KindConversation, c, &kitpb.AddMember{UserId: other.users[0], UserWorkspaceId: other.id})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a caller of another workspace never sees the conversation", func(t *testing.T) {
			w, other := n.workspace(t, 1), n.workspace(t, 0)
			c := n.channel(t, w.id, w.users...)
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, c, &kitpb.GetConversation{Caller: userCaller(other.id, w.users[0])})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a conversation that was never created is not found", func(t *testing.T) {
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, ids.New(), &kitpb.GetConversation{Caller: &kitpb.Caller{Kind: actors.CallerOperator}})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"members of a conversation must be active users of its workspace", func(t *testing.T) {
			w, other := n.workspace(t, 1), n.workspace(t, 1)
			_, err := try[*kitpb.ConversationReply](n, actors.KindWorkspace, w.id, &kitpb.CreateConversation{
				ConversationId: ids.New(), Kind: "group", Visibility: "private", MemberIds: []string{w.users[0], other.users[0]},
			})
			wantCode(t, err, kiterr.Validation, "memberIds[1]")
		}},
		{"members list pages in member order", func(t *testing.T) {
			w := n.workspace(t, 3)
			c := n.channel(t, w.id, w.users...)
			caller := userCaller(w.id, w.users[0])
			var got []string
			after := ""
			for range 4 {
				r := ask[*kitpb.MembersReply](t, n, actors.KindConversation, c, &kitpb.ListMembers{Caller: caller, AfterId: after, Limit: 2})
				for _, m := range r.Members {
					got = append(got, m.UserId)
					after = m.UserId
				}
				if !r.More {
					break
				}
			}
			want := slices.Sorted(slices.Values(w.users))
			if !slices.Equal(got, want) {
				t.Fatalf("members %v, want %v", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestArchivedConversation(t *testing.T) {
	n := shared
	type fixture struct {
		ws     *workspace
		conv   string
		caller *kitpb.Caller
		msg    *kitpb.Message
	}
	setup := func(t *testing.T) fixture {
		w := n.workspace(t, 1)
		c := n.channel(t, w.id, w.users...)
		caller := userCaller(w.id, w.users[0])
		m := n.post(t, caller, c, postReq{text: "before archive"})
		r := ask[*kitpb.ConversationReply](t, n, actors.KindConversation, c, &kitpb.ArchiveConversation{})
		if !r.Conversation.Archived {
			t.Fatal("archive did not set archived")
		}
		return fixture{w, c, caller, m}
	}
	tests := []struct {
		name string
		run  func(t *testing.T, f fixture) error
		want kiterr.Code // "" = allowed
	}{
		{"post into an archived conversation is a conflict", func(t *testing.T, f fixture) error {
			_, err := n.send(f.caller, f.conv, postReq{text: "after"})
			return err
		}, kiterr.Conflict},
		{"edit in an archived conversation is a conflict", func(t *testing.T, f fixture) error {
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.caller, MessageId: f.msg.Id, Text: "x"})
			return err
		}, kiterr.Conflict},
		{"delete in an archived conversation is a conflict", func(t *testing.T, f fixture) error {
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.DeleteMessage{Caller: f.caller, MessageId: f.msg.Id})
			return err
		}, kiterr.Conflict},
		{"adding a bot to an archived channel is a conflict", func(t *testing.T, f fixture) error {
			b := n.bot(t, f.ws.id, chatScopes)
			_, err := try[*kitpb.InstallationReply](n, actors.KindInstallation, b.inst.Id, &kitpb.AddChannel{ConversationId: f.conv})
			return err
		}, kiterr.Conflict},
		{"reading a message of an archived conversation works", func(t *testing.T, f fixture) error {
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.GetMessage{Caller: f.caller, MessageId: f.msg.Id})
			return err
		}, ""},
		{"listing an archived conversation works", func(t *testing.T, f fixture) error {
			r, err := n.list(f.caller, f.conv, "", 0, 10)
			if err == nil && len(r.Messages) != 1 {
				t.Fatalf("got %d messages, want 1", len(r.Messages))
			}
			return err
		}, ""},
		{"archiving twice keeps it archived", func(t *testing.T, f fixture) error {
			r, err := try[*kitpb.ConversationReply](n, actors.KindConversation, f.conv, &kitpb.ArchiveConversation{})
			if err == nil && !r.Conversation.Archived {
				t.Fatal("not archived")
			}
			return err
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(t, setup(t))
			if tt.want == "" {
				noErr(t, err)
				return
			}
			wantCode(t, err, tt.want)
		})
	}
}

func TestThreadParent(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv, other := n.channel(t, w.id, w.users...), n.channel(t, w.id, w.users...)
	caller := userCaller(w.id, w.users[0])
	top := n.post(t, caller, conv, postReq{text: "top"})
	reply := n.post(t, caller, conv, postReq{text: "reply", parent: top.Id})
	gone := n.post(t, caller, conv, postReq{text: "to delete"})
	ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.DeleteMessage{Caller: caller, MessageId: gone.Id})
	elsewhere := n.post(t, caller, other, postReq{text: "other conversation"})

	tests := []struct {
		name   string
		parent string
		ok     bool
	}{
		{"a live top-level message is a parent", top.Id, true},
		{"reply to reply", reply.Id, false},
		{"unknown parent", ids.New(), false},
		{"deleted parent", gone.Id, false},
		{"parent in another conversation", elsewhere.Id, false},
	}
	t.Run("threadParentId must be a live top-level message of the same conversation", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				n.clk.Advance(time.Second)
				r, err := n.send(caller, conv, postReq{text: "answer", parent: tt.parent})
				if tt.ok {
					noErr(t, err)
					if r.Message.ThreadParentId != tt.parent {
						t.Fatalf("threadParentId %q, want %q", r.Message.ThreadParentId, tt.parent)
					}
					return
				}
				wantCode(t, err, kiterr.Validation, "threadParentId")
			})
		}
	})
}

func TestAuthorship(t *testing.T) {
	n := shared
	type fixture struct {
		conv       string
		alice, bob *kitpb.Caller
		bot        *kitpb.Caller
		msg        *kitpb.Message // posted by alice
	}
	setup := func(t *testing.T) fixture {
		w := n.workspace(t, 2)
		c := n.channel(t, w.id, w.users...)
		f := fixture{conv: c, alice: userCaller(w.id, w.users[0]), bob: userCaller(w.id, w.users[1])}
		f.bot = n.bot(t, w.id, chatScopes, c).caller
		f.msg = n.post(t, f.alice, c, postReq{text: "alice wrote this"})
		return f
	}
	edit := func(c *kitpb.Caller, f fixture, text string) (*kitpb.MessageReply, error) {
		return try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: c, MessageId: f.msg.Id, Text: text})
	}
	del := func(c *kitpb.Caller, f fixture) (*kitpb.MessageReply, error) {
		return try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.DeleteMessage{Caller: c, MessageId: f.msg.Id})
	}
	tests := []struct {
		name string
		run  func(t *testing.T, f fixture)
	}{
		{"editing another author's message is forbidden", func(t *testing.T, f fixture) {
			_, err := edit(f.bob, f, "bob was here")
			wantCode(t, err, kiterr.Forbidden)
			_, err = edit(f.bot, f, "bot was here")
			wantCode(t, err, kiterr.Forbidden)
			got := ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.GetMessage{Caller: f.alice, MessageId: f.msg.Id})
			if got.Message.Text != "alice wrote this" || got.Message.EditedAt != 0 {
				t.Fatalf("message changed: %v", got.Message)
			}
		}},
		{"deleting another author's message is forbidden", func(t *testing.T, f fixture) {
			_, err := del(f.bob, f)
			wantCode(t, err, kiterr.Forbidden)
			_, err = del(f.bot, f)
			wantCode(t, err, kiterr.Forbidden)
		}},
		{"a bot edits and deletes only what the bot posted", func(t *testing.T, f fixture) {
			m := n.post(t, f.bot, f.conv, postReq{text: "from the bot"})
			r := ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.bot, MessageId: m.Id, Text: "edited by the bot"})
			if r.Message.Text != "edited by the bot" || r.Message.AuthorKind != "bot" || r.Message.AuthorId != f.bot.BotId {
				t.Fatalf("edit: %v", r.Message)
			}
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.DeleteMessage{Caller: f.alice, MessageId: m.Id})
			wantCode(t, err, kiterr.Forbidden)
		}},
		{"the author edits their message", func(t *testing.T, f fixture) {
			r, err := edit(f.alice, f, "alice edited this")
			noErr(t, err)
			if r.Message.Text != "alice edited this" || r.Message.EditedAt == 0 || r.Message.Seq != f.msg.Seq {
				t.Fatalf("edit: %v", r.Message)
			}
		}},
		{"an edit without blocks keeps them; an edit with none clears them", func(t *testing.T, f fixture) {
			m := n.post(t, f.alice, f.conv, postReq{text: "with blocks", blocks: `[{"type":"divider"}]`})
			if len(m.Blocks) == 0 {
				t.Fatal("the post lost its blocks")
			}
			r := ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.alice, MessageId: m.Id, Text: "kept", KeepBlocks: true})
			if string(r.Message.Blocks) != string(m.Blocks) {
				t.Fatalf("blocks %s, want %s kept", r.Message.Blocks, m.Blocks)
			}
			r = ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.alice, MessageId: m.Id, Text: "cleared"})
			if len(r.Message.Blocks) != 0 || r.Message.Text != "cleared" {
				t.Fatalf("blocks %s, want none", r.Message.Blocks)
			}
		}},
		{"invalid blocks are a validation error under blocks", func(t *testing.T, f fixture) {
			_, err := n.send(f.alice, f.conv, postReq{text: "x", blocks: `[{"type":"no-such-block"}]`})
			wantCode(t, err, kiterr.Validation)
			if p := err.(*kiterr.Error).Path; !strings.HasPrefix(p, "blocks") {
				t.Fatalf("path %q", p)
			}
			_, err = try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.alice, MessageId: f.msg.Id, Text: "x", Blocks: []byte(`{"type":"divider"}`)})
			wantCode(t, err, kiterr.Validation)
		}},
		{"editing a deleted message is a conflict", func(t *testing.T, f fixture) {
			_, err := del(f.alice, f)
			noErr(t, err)
			_, err = edit(f.alice, f, "too late")
			wantCode(t, err, kiterr.Conflict)
		}},
		{"deleting twice returns the same tombstone", func(t *testing.T, f fixture) {
			first, err := del(f.alice, f)
			noErr(t, err)
			n.clk.Advance(time.Minute)
			second, err := del(f.alice, f)
			noErr(t, err)
			for i, m := range []*kitpb.Message{first.Message, second.Message} {
				if m.DeletedAt == 0 || m.Text != "" || len(m.Blocks) != 0 || m.Id != f.msg.Id {
					t.Fatalf("delete %d: not a tombstone: %v", i+1, m)
				}
			}
			if first.Message.DeletedAt != second.Message.DeletedAt {
				t.Fatalf("deletedAt changed: %d then %d", first.Message.DeletedAt, second.Message.DeletedAt)
			}
		}},
		{"a tombstone keeps its place in history and none of its content", func(t *testing.T, f fixture) {
			n.post(t, f.alice, f.conv, postReq{text: "after"})
			_, err := del(f.alice, f)
			noErr(t, err)
			r, err := n.list(f.alice, f.conv, "", 0, 10)
			noErr(t, err)
			if len(r.Messages) != 2 || r.Messages[1].Id != f.msg.Id || r.Messages[1].DeletedAt == 0 || r.Messages[1].Text != "" {
				t.Fatalf("history %v", r.Messages)
			}
		}},
		{"a message id of another conversation is not found here", func(t *testing.T, f fixture) {
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, f.conv, &kitpb.GetMessage{Caller: f.alice, MessageId: ids.New()})
			wantCode(t, err, kiterr.NotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, setup(t)) })
	}
}
