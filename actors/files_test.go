package actors_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// fileBytes is n bytes that differ from chunk to chunk.
func fileBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/actors.FileChunkSize)
	}
	return b
}

// chunked cuts content the way the front end does: FileChunkSize bytes a
// chunk, the last one shorter.
func chunked(content []byte) [][]byte {
	var chunks [][]byte
	for len(content) > actors.FileChunkSize {
		chunks = append(chunks, content[:actors.FileChunkSize])
		content = content[actors.FileChunkSize:]
	}
	if len(content) > 0 {
		chunks = append(chunks, content)
	}
	return chunks
}

func (n *testNode) uploadFile(c *kitpb.Caller, convID string, content []byte) (*kitpb.File, error) {
	return n.uploadChunks(c, convID, chunked(content))
}

func (n *testNode) uploadChunks(c *kitpb.Caller, convID string, chunks [][]byte) (*kitpb.File, error) {
	r, err := try[*kitpb.FileReply](n, actors.KindConversation, convID, &kitpb.UploadFile{
		Caller: c, FileId: ids.NewTagged(time.Now(), ids.MessageTag(convID)), Name: "notes.txt", MimeType: "text/plain", Chunks: chunks,
	})
	if err != nil {
		return nil, err
	}
	return r.File, nil
}

func (n *testNode) getFile(c *kitpb.Caller, convID, fileID string) (*kitpb.File, error) {
	r, err := try[*kitpb.FileReply](n, actors.KindConversation, convID, &kitpb.GetFile{Caller: c, FileId: fileID})
	if err != nil {
		return nil, err
	}
	return r.File, nil
}

func TestFiles(t *testing.T) {
	n := shared
	w := n.workspace(t, 3)
	conv := n.channel(t, w.id, w.users[0], w.users[1])
	other := n.channel(t, w.id, w.users[0])
	alice, bob, carol := userCaller(w.id, w.users[0]), userCaller(w.id, w.users[1]), userCaller(w.id, w.users[2])
	b := n.bot(t, w.id, chatScopes, conv)
	outsider := n.bot(t, w.id, chatScopes, other)
	f, err := n.uploadFile(alice, conv, []byte("hello"))
	noErr(t, err)

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an upload records its metadata", func(t *testing.T) {
			if f.ConversationId != conv || f.SizeBytes != 5 || f.UploadedByUserId != alice.UserId || f.Chunks != 1 || f.CreatedAt == 0 || f.Name != "notes.txt" || f.MimeType != "text/plain" {
				t.Fatalf("file %v", f)
			}
		}},
		{"a member who is not in the conversation cannot upload into it", func(t *testing.T) {
			_, err := n.uploadFile(carol, conv, []byte("x"))
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a Kit bot cannot upload", func(t *testing.T) {
			_, err := n.uploadFile(b.caller, conv, []byte("x"))
			wantCode(t, err, kiterr.Forbidden)
		}},
		{"no upload into an archived conversation", func(t *testing.T) {
			gone := n.channel(t, w.id, w.users[0])
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, gone, &kitpb.ArchiveConversation{})
			_, err := n.uploadFile(alice, gone, []byte("x"))
			wantCode(t, err, kiterr.Conflict)
		}},
		{"members and bots of the conversation see the file", func(t *testing.T) {
			for _, c := range []*kitpb.Caller{alice, bob, b.caller} {
				got, err := n.getFile(c, conv, f.Id)
				noErr(t, err)
				if got.Id != f.Id {
					t.Fatalf("file %v", got)
				}
			}
		}},
		{"others do not see the file", func(t *testing.T) {
			for _, c := range []*kitpb.Caller{carol, outsider.caller} {
				_, err := n.getFile(c, conv, f.Id)
				wantCode(t, err, kiterr.NotFound)
			}
		}},
		{"a file is not found through another conversation", func(t *testing.T) {
			_, err := n.getFile(alice, other, f.Id)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a file's id finds its conversation, with no locator record", func(t *testing.T) {
			owner, err := actors.LocateFile(n.env, f.Id)
			noErr(t, err)
			if owner != conv {
				t.Fatalf("LocateFile = %s, want %s", owner, conv)
			}
			_, _, err = actors.Locate(n.env, f.Id)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"an id that does not carry the conversation's tag is refused, not stored", func(t *testing.T) {
			_, err := try[*kitpb.FileReply](n, actors.KindConversation, conv, &kitpb.UploadFile{
				Caller: alice, FileId: ids.NewTagged(time.Now(), ids.MessageTag(other)), Name: "x.txt", MimeType: "text/plain", Chunks: [][]byte{[]byte("x")},
			})
			if err == nil || kiterr.CodeOf(err) != kiterr.Internal {
				t.Fatalf("err = %v, want an internal error", err)
			}
		}},
		{"a made-up file id is found nowhere", func(t *testing.T) {
			_, err := actors.LocateFile(n.env, ids.NewTagged(time.Now(), ids.MessageTag(conv)))
			wantCode(t, err, kiterr.NotFound)
			_, err = actors.LocateFile(n.env, ids.New())
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a file id is not a message id", func(t *testing.T) {
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.GetMessage{Caller: alice, MessageId: f.Id})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"content is stored in chunks of at most FileChunkSize and reads back identical", func(t *testing.T) {
			want := fileBytes(2*actors.FileChunkSize + 1)
			big, err := n.uploadFile(alice, conv, want)
			noErr(t, err)
			if big.Chunks != 3 || big.SizeBytes != int64(len(want)) {
				t.Fatalf("file %v", big)
			}
			prefix := actors.FileChunksPrefix(conv, big.Id)
			chunks := 0
			noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
				chunks++
				if len(v) > actors.FileChunkSize {
					t.Errorf("a chunk of %d bytes", len(v))
				}
				return true
			}))
			if chunks != 3 {
				t.Fatalf("%d chunk records", chunks)
			}
			var viaWriteTo bytes.Buffer
			if _, err := actors.OpenFileContent(n.env, big).WriteTo(&viaWriteTo); err != nil {
				t.Fatal(err)
			}
			viaRead, err := io.ReadAll(struct{ io.Reader }{actors.OpenFileContent(n.env, big)})
			noErr(t, err)
			if !bytes.Equal(viaWriteTo.Bytes(), want) || !bytes.Equal(viaRead, want) {
				t.Fatal("content differs from the upload")
			}
		}},
		{"chunks not cut at FileChunkSize are refused, and nothing is stored", func(t *testing.T) {
			prefix := actors.FilesPrefix(conv)
			records := func() int {
				count := 0
				noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool {
					count++
					return true
				}))
				return count
			}
			before := records()
			full := fileBytes(actors.FileChunkSize)
			for name, chunks := range map[string][][]byte{
				"no chunk":                      nil,
				"a short chunk before the last": {full[:10], full},
				"a chunk over FileChunkSize":    {append(full, 1)},
				"an empty last chunk":           {full, {}},
			} {
				if _, err := n.uploadChunks(alice, conv, chunks); err == nil {
					t.Fatalf("%s: stored", name)
				}
			}
			if after := records(); after != before {
				t.Fatalf("%d file records after the refused uploads, want %d", after, before)
			}
		}},
		{"the actor lets go of the request's chunks once they are in its write", func(t *testing.T) {
			req := &kitpb.UploadFile{Caller: alice, FileId: ids.NewTagged(time.Now(), ids.MessageTag(conv)), Name: "n.txt", MimeType: "text/plain", Chunks: chunked(fileBytes(actors.FileChunkSize + 1))}
			ask[*kitpb.FileReply](t, n, actors.KindConversation, conv, req)
			if req.Chunks != nil {
				t.Fatalf("the request still holds %d chunks after the reply", len(req.Chunks))
			}
		}},
		{"an image block resolves a file of its conversation", func(t *testing.T) {
			img := `[{"type":"image","fileId":"` + f.Id + `","alt":"a"}]`
			n.post(t, alice, conv, postReq{text: "see", blocks: img})
		}},
		{"an image block of a file of another conversation is refused", func(t *testing.T) {
			elsewhere, err := n.uploadFile(alice, other, []byte("x"))
			noErr(t, err)
			for _, id := range []string{elsewhere.Id, ids.New()} {
				_, err := n.send(alice, conv, postReq{blocks: `[{"type":"image","fileId":"` + id + `","alt":"a"}]`})
				wantCode(t, err, kiterr.Validation, "blocks[0].fileId")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func (n *testNode) react(c *kitpb.Caller, convID, msgID, reaction string, add bool) error {
	var err error
	if add {
		_, err = try[*kitpb.Ok](n, actors.KindConversation, convID, &kitpb.AddReaction{Caller: c, MessageId: msgID, Reaction: reaction})
	} else {
		_, err = try[*kitpb.Ok](n, actors.KindConversation, convID, &kitpb.RemoveReaction{Caller: c, MessageId: msgID, Reaction: reaction})
	}
	return err
}

// reactions renders a message's reactions as "heart:u1,u2 eyes:u1".
func reactions(t testing.TB, n *testNode, c *kitpb.Caller, convID, msgID string) string {
	t.Helper()
	m := ask[*kitpb.MessageReply](t, n, actors.KindConversation, convID, &kitpb.GetMessage{Caller: c, MessageId: msgID}).Message
	var parts []string
	for _, r := range m.Reactions {
		parts = append(parts, r.Reaction+":"+strings.Join(r.UserIds, ","))
	}
	return strings.Join(parts, " ")
}

func TestReactions(t *testing.T) {
	n := shared
	w := n.workspace(t, 3)
	conv := n.channel(t, w.id, w.users[0], w.users[1])
	alice, bob, carol := userCaller(w.id, w.users[0]), userCaller(w.id, w.users[1]), userCaller(w.id, w.users[2])
	a, b := w.users[0], w.users[1]
	b0 := n.bot(t, w.id, chatScopes, conv)

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"adding a reaction twice keeps one", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			noErr(t, n.react(alice, conv, m.Id, "heart", true))
			noErr(t, n.react(alice, conv, m.Id, "heart", true))
			if got := reactions(t, n, alice, conv, m.Id); got != "heart:"+a {
				t.Fatalf("reactions %q", got)
			}
		}},
		{"reactions keep the order they were first added, and their users in order", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			noErr(t, n.react(bob, conv, m.Id, "eyes", true))
			noErr(t, n.react(alice, conv, m.Id, "check", true))
			noErr(t, n.react(alice, conv, m.Id, "eyes", true))
			if got, want := reactions(t, n, alice, conv, m.Id), "eyes:"+b+","+a+" check:"+a; got != want {
				t.Fatalf("reactions %q, want %q", got, want)
			}
		}},
		{"removing is idempotent and drops an emptied reaction", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			noErr(t, n.react(alice, conv, m.Id, "laugh", true))
			noErr(t, n.react(bob, conv, m.Id, "laugh", true))
			noErr(t, n.react(alice, conv, m.Id, "laugh", false))
			noErr(t, n.react(alice, conv, m.Id, "laugh", false))
			noErr(t, n.react(alice, conv, m.Id, "thanks", false))
			if got := reactions(t, n, alice, conv, m.Id); got != "laugh:"+b {
				t.Fatalf("reactions %q", got)
			}
			noErr(t, n.react(bob, conv, m.Id, "laugh", false))
			if got := reactions(t, n, alice, conv, m.Id); got != "" {
				t.Fatalf("reactions %q", got)
			}
		}},
		{"a member outside the conversation gets not found", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			wantCode(t, n.react(carol, conv, m.Id, "heart", true), kiterr.NotFound)
			wantCode(t, n.react(carol, conv, m.Id, "heart", false), kiterr.NotFound)
		}},
		{"a deleted message gets not found, and its tombstone has no reactions", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			noErr(t, n.react(bob, conv, m.Id, "heart", true))
			ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.DeleteMessage{Caller: alice, MessageId: m.Id})
			wantCode(t, n.react(bob, conv, m.Id, "heart", true), kiterr.NotFound)
			wantCode(t, n.react(bob, conv, m.Id, "heart", false), kiterr.NotFound)
			if got := reactions(t, n, alice, conv, m.Id); got != "" {
				t.Fatalf("tombstone reactions %q", got)
			}
		}},
		{"an unknown message gets not found", func(t *testing.T) {
			wantCode(t, n.react(alice, conv, ids.New(), "heart", true), kiterr.NotFound)
		}},
		{"a Kit bot cannot react", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			wantCode(t, n.react(b0.caller, conv, m.Id, "heart", true), kiterr.Forbidden)
		}},
		{"reacting does not edit the message", func(t *testing.T) {
			m := n.post(t, alice, conv, postReq{})
			noErr(t, n.react(bob, conv, m.Id, "celebrate", true))
			got := ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.GetMessage{Caller: alice, MessageId: m.Id}).Message
			if got.EditedAt != 0 || got.Text != m.Text {
				t.Fatalf("message %v", got)
			}
		}},
		{"no reactions in an archived conversation", func(t *testing.T) {
			gone := n.channel(t, w.id, w.users[0])
			m := n.post(t, alice, gone, postReq{})
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, gone, &kitpb.ArchiveConversation{})
			wantCode(t, n.react(alice, gone, m.Id, "heart", true), kiterr.Conflict)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestFileSurvivesACrash uploads a file, then opens a node over a crash
// clone of the filesystem (what a power cut leaves): an acknowledged upload
// is all there.
func TestFileSurvivesACrash(t *testing.T) {
	n, fs := crashableNode(t)
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users[0])
	alice := userCaller(w.id, w.users[0])
	want := fileBytes(actors.FileChunkSize + 10)
	f, err := n.uploadFile(alice, conv, want)
	noErr(t, err)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	n.stop()

	r, err := startNode(crashed, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	got, err := r.getFile(alice, conv, f.Id)
	noErr(t, err)
	var content bytes.Buffer
	if _, err := actors.OpenFileContent(r.env, got).WriteTo(&content); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(content.Bytes(), want) {
		t.Fatal("content after the crash differs from the upload")
	}
}
