package actors

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// FileChunkSize is the most bytes of a file one chunk record holds. 768 KiB
// keeps every stored value under 1 MB (however counted) and is exactly
// 1 MiB of base64.
const FileChunkSize = 768 << 10

// handleFiles answers the conversation's file and reaction requests; ok is
// false for any other request.
func (a *conversationActor) handleFiles(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.UploadFile:
		reply, err = a.uploadFile(m)
	case *kitpb.GetFile:
		reply, err = a.getFile(m)
	case *kitpb.AddReaction:
		reply, err = a.react(m.Caller, m.MessageId, m.Reaction, true)
	case *kitpb.RemoveReaction:
		reply, err = a.react(m.Caller, m.MessageId, m.Reaction, false)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// uploadFile stores a file of a member of the conversation: metadata,
// chunks and locator in one synced batch, answered only once durable.
func (a *conversationActor) uploadFile(m *kitpb.UploadFile) (proto.Message, error) {
	if err := a.writable(m.Caller); err != nil {
		return nil, err
	}
	if m.Caller.Kind != CallerUser {
		// Kit bots cannot upload in v1 (docs/api.md "Files"); the front end refuses
		// them first, this keeps the rule with the owner too.
		return nil, kiterr.New(kiterr.Forbidden, "only user tokens can upload files")
	}
	if len(m.Chunks) == 0 {
		return nil, kiterr.Invalid("contentBase64", "must not be empty")
	}
	if tag, _, ok := ids.ParseMessage(m.FileId); !ok || tag != a.tag {
		// LocateFile finds a file by the tag of its id: one without it
		// could never be read back.
		return nil, fmt.Errorf("upload file into %s: id %s does not carry the conversation's tag", a.id, m.FileId)
	}
	size, err := chunkedSize(m.Chunks)
	if err != nil {
		return nil, fmt.Errorf("upload file into %s: %w", a.id, err)
	}
	n := len(m.Chunks)
	f := &kitpb.File{
		Id: m.FileId, ConversationId: a.id, Name: m.Name, MimeType: m.MimeType,
		SizeBytes: int64(size), UploadedByUserId: m.Caller.UserId,
		CreatedAt: nanos(a.env.Clock.Now()), Chunks: uint32(n),
	}
	prefix := fileChunksPrefix(a.id, f.Id)
	b := a.env.newBatchSize(size + n*(len(prefix)+32) + 512)
	for i, c := range m.Chunks {
		b.Set(fileChunkKey(a.id, f.Id, uint64(i)), c)
	}
	// The batch holds its own copy now. Letting go of the request's chunks
	// lets the collector reclaim them while the sync below is in flight,
	// rather than hold every upload's bytes twice until its reply.
	m.Chunks = nil
	put(b, fileKey(a.id, f.Id), f)
	if a.emits(eventFileShared) {
		ev := a.newEvent(eventFileShared, f.CreatedAt)
		ev.File = f
		a.emit(b, eventFileShared, ev, nil, "")
	}
	// A large batch takes a while to sync: the actor goes on meanwhile and
	// the reply waits for durability (see durability).
	if err := a.applyLater(b); err != nil {
		return nil, fmt.Errorf("upload file into %s: %w", a.id, err)
	}
	return &kitpb.FileReply{File: f}, nil
}

// chunkedSize checks that chunks follow the stored layout (every chunk full
// but the last, none empty) and returns their total size. The front end cuts
// them; a mismatch is a bug there, not the caller's input.
func chunkedSize(chunks [][]byte) (int, error) {
	size := 0
	for i, c := range chunks {
		last := i == len(chunks)-1
		if len(c) == 0 || len(c) > FileChunkSize || !last && len(c) != FileChunkSize {
			return 0, fmt.Errorf("chunk %d of %d has %d bytes, want %d", i, len(chunks), len(c), FileChunkSize)
		}
		size += len(c)
	}
	return size, nil
}

func (a *conversationActor) getFile(m *kitpb.GetFile) (proto.Message, error) {
	if !a.visible(m.Caller) {
		return nil, kiterr.Absent("file")
	}
	f, err := a.fileByID(m.FileId)
	if err != nil {
		return nil, err
	}
	return &kitpb.FileReply{File: f}, nil
}

func (a *conversationActor) fileByID(id string) (*kitpb.File, error) {
	f := &kitpb.File{}
	if err := loadExisting(a.env.Store, fileKey(a.id, id), f, "file"); err != nil {
		return nil, err
	}
	return f, nil
}

// fileVisible reports whether an image block may show the file here: it
// must be a file of this conversation. Whoever may post here can see the
// conversation, and so its files.
func (a *conversationActor) fileVisible(id string) bool {
	_, err := a.fileByID(id)
	return err == nil
}

// react adds or removes the caller's reaction on a message. Both are
// idempotent: adding a reaction already there, or removing one that is not,
// changes nothing and succeeds.
func (a *conversationActor) react(c *kitpb.Caller, messageID string, reaction string, add bool) (proto.Message, error) {
	if !a.visible(c) {
		return nil, kiterr.Absent("message")
	}
	if c.Kind != CallerUser {
		return nil, kiterr.New(kiterr.Forbidden, "only user tokens can react")
	}
	msg, err := a.messageByID(messageID)
	if err != nil {
		return nil, err
	}
	if msg.DeletedAt != 0 {
		return nil, kiterr.Absent("message")
	}
	if a.conv.Archived {
		return nil, errArchived
	}
	i := slices.IndexFunc(msg.Reactions, func(r *kitpb.Reaction) bool { return r.Reaction == reaction })
	switch {
	case add && i < 0:
		msg.Reactions = append(msg.Reactions, &kitpb.Reaction{Reaction: reaction, UserIds: []string{c.UserId}})
	case add:
		r := msg.Reactions[i]
		if slices.Contains(r.UserIds, c.UserId) {
			return &kitpb.Ok{}, nil
		}
		r.UserIds = append(r.UserIds, c.UserId)
	case i < 0:
		return &kitpb.Ok{}, nil
	default:
		r := msg.Reactions[i]
		j := slices.Index(r.UserIds, c.UserId)
		if j < 0 {
			return &kitpb.Ok{}, nil
		}
		r.UserIds = slices.Delete(r.UserIds, j, j+1)
		if len(r.UserIds) == 0 {
			msg.Reactions = slices.Delete(msg.Reactions, i, i+1)
		}
	}
	k := eventReactionAdded
	if !add {
		k = eventReactionRemoved
	}
	ev := &kitpb.EventReaction{MessageId: msg.Id, Reaction: reaction, UserId: c.UserId}
	if _, err := a.rewrite(msg, k, nanos(a.env.Clock.Now()), ev); err != nil {
		return nil, err
	}
	return &kitpb.Ok{}, nil
}
