package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kitd/kitd/proto/kitpb"
)

// The hand-written message encoder must give exactly what encoding/json
// gives for the view, for every shape a message can take.
func TestAppendMessageMatchesEncodingJSON(t *testing.T) {
	base := func() *kitpb.Message {
		return &kitpb.Message{
			Id: "01a20000-0000-7000-8000-000000000001", ConversationId: "01a20000-0000-7000-8000-000000000002",
			AuthorKind: "bot", AuthorId: "01a20000-0000-7000-8000-000000000003",
			Text: "hello", CreatedAt: 1_790_000_000_123_456_789, Seq: 7,
		}
	}
	tests := []struct {
		name   string
		change func(m *kitpb.Message)
	}{
		{"a plain message", func(*kitpb.Message) {}},
		{"a reply with blocks", func(m *kitpb.Message) {
			m.ThreadParentId = "01a20000-0000-7000-8000-000000000009"
			m.Blocks = []byte(`[{"type":"header","text":"Hi"},{"type":"divider"}]`)
		}},
		{"an edited message", func(m *kitpb.Message) { m.EditedAt = m.CreatedAt + 5e9 }},
		{"a tombstone hides text, blocks and reactions", func(m *kitpb.Message) {
			m.DeletedAt = m.CreatedAt + 1
			m.Text = ""
			m.Reactions = []*kitpb.Reaction{{Reaction: "heart", UserIds: []string{"u1"}}}
		}},
		{"reactions with counts and users", func(m *kitpb.Message) {
			m.Reactions = []*kitpb.Reaction{
				{Reaction: "thumbs_up", UserIds: []string{"u1", "u2"}},
				{Reaction: "eyes", UserIds: []string{"u3"}},
			}
		}},
		{"HTML, quotes and backslashes are escaped like encoding/json", func(m *kitpb.Message) {
			m.Text = `<b>"quoted"</b> & \path\ 'single'`
		}},
		{"control characters, newlines and tabs", func(m *kitpb.Message) { m.Text = "a\nb\tc\rd\x00e\x1ff\bg\fh\x7f" }},
		{"unicode, line and paragraph separators", func(m *kitpb.Message) { m.Text = "héllo 世界 🎉 \u2028 \u2029 end" }},
		{"invalid UTF-8 becomes the replacement character", func(m *kitpb.Message) { m.Text = "bad \xff\xfe byte \xc3" }},
		{"mentions are kept as written", func(m *kitpb.Message) { m.Text = "hi <@user:01a20000-0000-7000-8000-000000000004>" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.change(m)
			want, err := json.Marshal(messageBody{viewMessage(m)})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendMessageBody(nil, m); string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			next := "abc<>"
			wantPage, _ := json.Marshal(messagesPage{viewMessages([]*kitpb.Message{m, base()}), &next})
			if got := appendMessagesPage(nil, []*kitpb.Message{m, base()}, &next); string(got) != string(wantPage) {
				t.Fatalf("page got  %s\nwant %s", got, wantPage)
			}
		})
	}
	t.Run("the body is appended after what the buffer holds", func(t *testing.T) {
		m := base()
		buf := append(make([]byte, 0, 4), "kept"...)
		got := appendMessageBody(buf, m)
		if string(got) != "kept"+string(appendMessageBody(nil, m)) {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("an empty last page", func(t *testing.T) {
		want, _ := json.Marshal(messagesPage{viewMessages(nil), nil})
		if got := appendMessagesPage(nil, nil, nil); string(got) != string(want) {
			t.Fatalf("got %s want %s", got, want)
		}
	})
}

func BenchmarkMessagesPageJSON(b *testing.B) {
	ms := make([]*kitpb.Message, 50)
	for i := range ms {
		ms[i] = &kitpb.Message{Id: "01a20000-0000-7000-8000-000000000001", ConversationId: "01a20000-0000-7000-8000-000000000002",
			AuthorKind: "bot", AuthorId: "01a20000-0000-7000-8000-000000000003", Text: "a message of ordinary length, posted by a bot", CreatedAt: 1_790_000_000_123_456_789}
	}
	b.Run("hand-written", func(b *testing.B) {
		for range b.N {
			appendMessagesPage(nil, ms, nil)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			_, _ = json.Marshal(messagesPage{viewMessages(ms), nil})
		}
	})
}

// A page of messages the actor answered encoded is the page encoded here.
func TestAppendEncodedPageIsTheMessagesPage(t *testing.T) {
	ms := []*kitpb.Message{
		{Id: "01a20000-0000-7000-8000-000000000001", ConversationId: "c", AuthorKind: "bot", AuthorId: "b", Text: "<one>", CreatedAt: 1},
		{Id: "01a20000-0000-7000-8000-000000000002", ConversationId: "c", AuthorKind: "user", AuthorId: "u", DeletedAt: 5, CreatedAt: 2},
	}
	next := "cursor"
	for _, tt := range []struct {
		name string
		ms   []*kitpb.Message
		next *string
	}{
		{"two messages and a cursor", ms, &next},
		{"one message, the last page", ms[:1], nil},
		{"an empty page", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var encoded [][]byte
			for _, m := range tt.ms {
				encoded = append(encoded, appendMessage(nil, m))
			}
			if got, want := appendEncodedPage(nil, encoded, tt.next), appendMessagesPage(nil, tt.ms, tt.next); string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// The hand-written body of a message event is exactly encoding/json's.
func TestEventBodyMatchesEncodingJSON(t *testing.T) {
	base := func() *kitpb.Event {
		return &kitpb.Event{
			Id: "01a20000-0000-7000-8000-00000000000a", Sequence: 42, Type: "message.posted",
			OccurredAt: 1_790_000_000_123_456_789, ConversationId: "01a20000-0000-7000-8000-000000000002",
			Message: &kitpb.Message{
				Id: "01a20000-0000-7000-8000-000000000001", ConversationId: "01a20000-0000-7000-8000-000000000002",
				AuthorKind: "user", AuthorId: "01a20000-0000-7000-8000-000000000003",
				Text: "hello", CreatedAt: 1_790_000_000_123_456_789,
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(ev *kitpb.Event)
	}{
		{"a posted message", func(*kitpb.Event) {}},
		{"a test event carries test: true", func(ev *kitpb.Event) { ev.Test = true }},
		{"an edited message with blocks and reactions", func(ev *kitpb.Event) {
			ev.Type = "message.edited"
			ev.Message.EditedAt = ev.Message.CreatedAt + 1
			ev.Message.Blocks = []byte(`[{"type":"divider"}]`)
			ev.Message.Reactions = []*kitpb.Reaction{{Reaction: "eyes", UserIds: []string{"u1"}}}
		}},
		{"a deleted message's tombstone", func(ev *kitpb.Event) {
			ev.Type = "message.deleted"
			ev.Message.DeletedAt = ev.Message.CreatedAt + 1
			ev.Message.Text = ""
		}},
		{"escaped text", func(ev *kitpb.Event) { ev.Message.Text = "<b>\"x\"</b> \u2028 \xff" }},
		{"a sequence of the largest size", func(ev *kitpb.Event) { ev.Sequence = 1<<64 - 1 }},
		{"an event with more than a message takes encoding/json", func(ev *kitpb.Event) {
			ev.Type = "reaction.added"
			ev.Reaction = &kitpb.EventReaction{MessageId: "m", Reaction: "eyes", UserId: "u"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := base()
			tc.change(ev)
			want, err := eventBodyJSON(ev, "01a20000-0000-7000-8000-0000000000ff")
			if err != nil {
				t.Fatal(err)
			}
			got, err := EventBody(ev, "01a20000-0000-7000-8000-0000000000ff")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// A page answered by a node built before pages came encoded (messages,
// not encoded: a cluster in a rolling upgrade) is written the same.
func TestAppendPageOfAnOlderNode(t *testing.T) {
	ms := []*kitpb.Message{
		{Id: "01a20000-0000-7000-8000-000000000009", ConversationId: "c", AuthorKind: "bot", AuthorId: "b", Text: "nine", CreatedAt: 9, Seq: 9},
		{Id: "01a20000-0000-7000-8000-000000000007", ConversationId: "c", AuthorKind: "user", AuthorId: "u", Text: "seven", CreatedAt: 7, Seq: 7},
	}
	encoded := &kitpb.MessagesReply{More: true, LastSeq: 7}
	for _, m := range ms {
		encoded.Encoded = append(encoded.Encoded, appendMessage(nil, m))
	}
	older := &kitpb.MessagesReply{Messages: ms, More: true}
	got, want := appendPage(nil, older, "messages:c"), appendPage(nil, encoded, "messages:c")
	if string(got) != string(want) {
		t.Fatalf("older node's page %s\nwant %s", got, want)
	}
	if !strings.Contains(string(want), `"nextCursor":"`) || !strings.Contains(string(want), `"text":"seven"`) {
		t.Fatalf("page %s lacks its messages or its cursor", want)
	}
}
