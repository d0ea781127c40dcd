package actors_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// TestStateSurvivesARestart writes state on one node, stops it and closes its store,
// then opens a second node over the same in-memory filesystem and checks
// that every actor finds its state again.
func TestStateSurvivesARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			n.stop()
		}
	})

	w := n.workspace(t, 3)
	conv := n.channel(t, w.id, w.users[0], w.users[1])
	alice := userCaller(w.id, w.users[0])
	slug := newSlug()
	v := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0", chatScopes...), true)
	inst := n.install(t, w.id, v.Kit.Id, "")
	inst = n.addChannel(t, inst.Id, conv)
	token := n.botToken(t, inst.Id)
	revoked := n.botToken(t, inst.Id)
	noErr(t, n.auth.Revoke(revoked))
	devSecret := ids.NewSecret(ids.DeveloperToken)
	devHash := ids.Hash(devSecret)
	ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{
		UserId: w.users[0], TokenId: ids.New(), Name: "ci", SecretHash: devHash[:],
	})
	p, err := n.auth.Authenticate([]byte(token))
	noErr(t, err)
	botCaller := p.Caller

	top := n.post(t, alice, conv, postReq{text: "top", key: "restart-key"})
	reply := n.post(t, botCaller, conv, postReq{text: "reply", parent: top.Id})
	gone := n.post(t, alice, conv, postReq{text: "gone"})
	ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.DeleteMessage{Caller: alice, MessageId: gone.Id})
	edited := ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.EditMessage{Caller: alice, MessageId: top.Id, Text: "top, edited"}).Message
	ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.DeactivateUser{UserId: w.users[2]})
	archived := n.channel(t, w.id, w.users[0])
	ask[*kitpb.ConversationReply](t, n, actors.KindConversation, archived, &kitpb.ArchiveConversation{})
	historyBefore, err := n.list(alice, conv, "", 0, 50)
	noErr(t, err)

	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	r, err := startNode(fs, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop() })

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"conversation members survive", func(t *testing.T) {
			m := ask[*kitpb.MembersReply](t, r, actors.KindConversation, conv, &kitpb.ListMembers{Caller: alice, Limit: 10})
			var got []string
			for _, mem := range m.Members {
				got = append(got, mem.UserId)
			}
			if want := slices.Sorted(slices.Values(w.users[:2])); !slices.Equal(got, want) {
				t.Fatalf("members %v, want %v", got, want)
			}
			_, err := try[*kitpb.ConversationReply](r, actors.KindConversation, conv, &kitpb.GetConversation{Caller: userCaller(w.id, w.users[2])})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"messages survive with edits, tombstones and order", func(t *testing.T) {
			h, err := r.list(alice, conv, "", 0, 50)
			noErr(t, err)
			if len(h.Messages) != len(historyBefore.Messages) {
				t.Fatalf("%d messages, want %d", len(h.Messages), len(historyBefore.Messages))
			}
			for i, m := range h.Messages {
				b := historyBefore.Messages[i]
				if m.Id != b.Id || m.Seq != b.Seq || m.Text != b.Text || m.DeletedAt != b.DeletedAt || m.EditedAt != b.EditedAt || m.ThreadParentId != b.ThreadParentId {
					t.Fatalf("message %d: %v, want %v", i, m, b)
				}
			}
			got := ask[*kitpb.MessageReply](t, r, actors.KindConversation, conv, &kitpb.GetMessage{Caller: alice, MessageId: top.Id}).Message
			if got.Text != edited.Text || got.EditedAt != edited.EditedAt {
				t.Fatalf("edited message %v", got)
			}
		}},
		{"threads survive", func(t *testing.T) {
			h, err := r.list(alice, conv, top.Id, 0, 50)
			noErr(t, err)
			if len(h.Messages) != 1 || h.Messages[0].Id != reply.Id {
				t.Fatalf("thread %v", h.Messages)
			}
		}},
		{"idempotency records survive", func(t *testing.T) {
			res, err := r.send(alice, conv, postReq{text: "top", key: "restart-key"})
			noErr(t, err)
			if !res.Replayed || res.Message.Id != top.Id {
				t.Fatalf("got %v, want a replay of %s", res.Message, top.Id)
			}
		}},
		{"the next post continues the sequence", func(t *testing.T) {
			r.clk.Advance(time.Second)
			res, err := r.send(alice, conv, postReq{text: "after restart"})
			noErr(t, err)
			if want := gone.Seq + 1; res.Message.Seq != want {
				t.Fatalf("seq %d, want %d", res.Message.Seq, want)
			}
		}},
		{"installation channels survive", func(t *testing.T) {
			got := ask[*kitpb.InstallationReply](t, r, actors.KindInstallation, inst.Id, &kitpb.GetInstallation{}).Installation
			if !slices.Equal(got.ChannelIds, []string{conv}) || got.BotId != inst.BotId || got.KitVersion != "1.0.0" ||
				!slices.Equal(got.BotScopes, chatScopes) {
				t.Fatalf("installation %v", got)
			}
		}},
		{"credentials survive", func(t *testing.T) {
			p, err := r.auth.Authenticate([]byte(token))
			noErr(t, err)
			if p.Caller.BotId != inst.BotId || !slices.Equal(slices.Sorted(slices.Values(p.Scopes)), slices.Sorted(slices.Values(chatScopes))) {
				t.Fatalf("principal %+v", p)
			}
			ask[*kitpb.ConversationReply](t, r, actors.KindConversation, conv, &kitpb.GetConversation{Caller: p.Caller})
			_, err = r.auth.Authenticate([]byte(revoked))
			wantCode(t, err, kiterr.InvalidToken)
			d, err := r.auth.Authenticate([]byte(devSecret))
			noErr(t, err)
			if d.Caller.UserId != w.users[0] {
				t.Fatalf("developer principal %+v", d)
			}
		}},
		{"users survive with their state", func(t *testing.T) {
			u := ask[*kitpb.UsersReply](t, r, actors.KindWorkspace, w.id, &kitpb.ListUsers{Limit: 10})
			var got []string
			for _, x := range u.Users {
				got = append(got, x.Id)
			}
			if !slices.Equal(got, w.users[:2]) {
				t.Fatalf("active users %v, want %v", got, w.users[:2])
			}
		}},
		{"archived stays archived", func(t *testing.T) {
			_, err := r.send(alice, archived, postReq{})
			wantCode(t, err, kiterr.Conflict)
		}},
		{"installing again updates the same installation", func(t *testing.T) {
			again := r.install(t, w.id, v.Kit.Id, "")
			if again.Id != inst.Id {
				t.Fatalf("install after restart made installation %s, want %s", again.Id, inst.Id)
			}
		}},
		{"Kit versions and slug ownership survive", func(t *testing.T) {
			_, err := r.upload(w.id, manifestJSON(slug, "1.0.0"), false)
			wantCode(t, err, kiterr.Conflict)
			_, err = r.upload(w.id, manifestJSON(slug, "0.9.0", chatScopes...), false)
			wantCode(t, err, kiterr.Conflict)
			_, err = r.upload(r.workspace(t, 0).id, manifestJSON(slug, "5.0.0"), false)
			wantCode(t, err, kiterr.SlugTaken)
			same, err := r.upload(w.id, manifestJSON(slug, "1.0.0", chatScopes...), false)
			noErr(t, err)
			if same.Created || same.Kit.Id != v.Kit.Id || !same.Version.Published {
				t.Fatalf("re-upload %v", same)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// A data directory written before message ids carried their position has
// conversations without a tag index entry and messages with random ids and
// locator records. Both keep working: the conversation indexes its tag when
// it activates, and older messages are found through their locators.
func TestMessagesFromBeforeIDsCarriedTheirPosition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users[0])
	alice := userCaller(w.id, w.users[0])

	// The older layout, written by hand: no conv's tag entry, one message
	// at position 1 under a random id, with its locator.
	old := &kitpb.Message{Id: ids.New(), ConversationId: conv, AuthorKind: "user", AuthorId: w.users[0], Text: "from before", CreatedAt: 1, Seq: 1}
	b := n.store.NewBatch()
	b.Delete(actors.MessageTagKey(ids.MessageTag(conv), conv))
	b.Set(actors.MessageKey(conv, 1), mustMarshal(t, old))
	b.Set(actors.LocatorKey(old.Id), mustMarshal(t, &kitpb.Locator{Kind: actors.KindConversation, Owner: conv, Seq: 1}))
	noErr(t, b.Commit())
	noErr(t, n.stop())

	r, err := startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { _ = r.stop() })

	t.Run("an older message is located before its conversation activates", func(t *testing.T) {
		got, err := actors.LocateMessage(r.env, old.Id)
		noErr(t, err)
		if got != conv {
			t.Fatalf("LocateMessage = %s, want %s", got, conv)
		}
	})
	t.Run("an older message is found by its id", func(t *testing.T) {
		got := ask[*kitpb.MessageReply](t, r, actors.KindConversation, conv, &kitpb.GetMessage{Caller: alice, MessageId: old.Id}).Message
		if got.Text != "from before" {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("a new message after it is located through the tag the conversation indexed", func(t *testing.T) {
		m := r.post(t, alice, conv, postReq{text: "after"})
		if m.Seq != 2 {
			t.Fatalf("seq %d, want 2", m.Seq)
		}
		got, err := actors.LocateMessage(r.env, m.Id)
		noErr(t, err)
		if got != conv {
			t.Fatalf("LocateMessage = %s, want %s", got, conv)
		}
	})
	t.Run("another conversation's older message is not found here", func(t *testing.T) {
		other := r.channel(t, w.id, w.users[0])
		_, err := try[*kitpb.MessageReply](r, actors.KindConversation, other, &kitpb.GetMessage{Caller: alice, MessageId: old.Id})
		wantCode(t, err, kiterr.NotFound)
	})
}

// A file uploaded before file ids carried their conversation's tag has a
// random id and a locator record; it is found through the locator.
func TestFilesFromBeforeIDsCarriedTheirTag(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users[0])
	alice := userCaller(w.id, w.users[0])
	old := &kitpb.File{Id: ids.New(), ConversationId: conv, Name: "old.txt", MimeType: "text/plain", SizeBytes: 1, Chunks: 1, UploadedByUserId: w.users[0], CreatedAt: 1}
	b := n.store.NewBatch()
	b.Set(actors.FileKey(conv, old.Id), mustMarshal(t, old))
	b.Set(actors.LocatorKey(old.Id), mustMarshal(t, &kitpb.Locator{Kind: actors.KindConversation, Owner: conv}))
	noErr(t, b.Commit())

	got, err := actors.LocateFile(n.env, old.Id)
	noErr(t, err)
	if got != conv {
		t.Fatalf("LocateFile = %s, want %s", got, conv)
	}
	f, err := n.getFile(alice, conv, old.Id)
	noErr(t, err)
	if f.Name != "old.txt" {
		t.Fatalf("file %v", f)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	noErr(t, err)
	return b
}
