package actors

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/blocks"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// IdempotencyTTL is how long a POST /messages Idempotency-Key is remembered
// (docs/api.md "Idempotency record").
const IdempotencyTTL = 24 * 60 * 60 * 1e9

// conversationActor owns one conversation: its record, members (people and
// Kit bots), messages, threads, the per-conversation post bucket and the
// idempotency records of posts into it. History lives in Pebble under
// ordered keys; the actor keeps in memory what its rules need and its
// newest messages as the API answers them (conversation_history.go).
type conversationActor struct {
	env  *Env
	life lifecycle

	id       string
	tag      uint32              // carried by every message id (ids.MessageTag)
	messages []byte              // messagesPrefix, for the scans of history
	conv     *kitpb.Conversation // nil: the conversation does not exist (yet)
	members  map[string]*kitpb.Member
	bots     map[string]*kitpb.BotMember
	lastSeq  uint64
	buckets  bucketSet
	sync     durability

	idemSweepAt int64 // when the next sweep of expired Idempotency records is due (conversation_idempotency.go); 0: on the next post

	eventMask uint32 // the kinds any bot here gets (events.go)
	outbox    outbox

	window  *history.Window // the newest messages, encoded; nil: none kept (conversation_history.go)
	scratch []byte          // where a kept message is encoded first
}

func (a *conversationActor) Receive(ctx actorContext) {
	receiveDurable(a, &a.life, a.env, &a.sync, ctx)
}

func (a *conversationActor) exists() bool { return a.conv != nil }

func (a *conversationActor) activate(identity string) error {
	a.id = identity
	a.outbox.source = identity
	a.tag = ids.MessageTag(identity)
	a.messages = messagesPrefix(identity)
	a.buckets.table = a.env.Limits
	a.sync.fatal = a.env.Fatal
	a.members = make(map[string]*kitpb.Member)
	a.bots = make(map[string]*kitpb.BotMember)
	conv := &kitpb.Conversation{}
	found, err := load(a.env.Store, conversationKey(a.id), conv)
	if err != nil || !found {
		return err
	}
	a.conv = conv
	a.window = a.env.History.NewWindow()
	if err := a.ensureTagIndex(); err != nil {
		return err
	}
	if err := scanRecords(a.env.Store, membersPrefix(a.id), func() proto.Message { return &kitpb.Member{} }, func(m proto.Message) {
		mem := m.(*kitpb.Member)
		a.members[mem.UserId] = mem
	}); err != nil {
		return err
	}
	if err := scanRecords(a.env.Store, botMembersPrefix(a.id), func() proto.Message { return &kitpb.BotMember{} }, func(m proto.Message) {
		b := m.(*kitpb.BotMember)
		a.bots[b.BotId] = b
	}); err != nil {
		return err
	}
	a.refreshEventMask()
	if err := a.outbox.resume(a.env.Store, a.botInstallations()); err != nil {
		return err
	}
	// The newest message names the last sequence number.
	lower := a.messages
	return a.env.Store.Scan(lower, persistence.PrefixEnd(lower), true, func(k, _ []byte) bool {
		a.lastSeq = decodeSeq(k[len(lower):])
		return false
	})
}

func (a *conversationActor) handle(msg proto.Message) (proto.Message, error) {
	if _, ok := msg.(*kitpb.CreateConversation); !ok && a.conv == nil {
		return nil, kiterr.Absent("conversation")
	}
	switch m := msg.(type) {
	case *kitpb.CreateConversation:
		return a.create(m)
	case *kitpb.GetConversation:
		if !a.visible(m.Caller) {
			return nil, kiterr.Absent("conversation")
		}
		return &kitpb.ConversationReply{Conversation: a.conv}, nil
	case *kitpb.AddMember:
		return a.addMember(m)
	case *kitpb.RemoveMember:
		return a.removeMember(m)
	case *kitpb.ArchiveConversation:
		return a.archive()
	case *kitpb.AddBot:
		return a.addBot(m)
	case *kitpb.RemoveBot:
		return a.removeBot(m)
	case *kitpb.SetBotEvents:
		return a.setBotEvents(m)
	case *kitpb.ListMembers:
		return a.listMembers(m)
	case *kitpb.PostMessage:
		return a.post(m)
	case *kitpb.GetMessage:
		if !a.visible(m.Caller) {
			return nil, kiterr.Absent("message")
		}
		msg, err := a.messageByID(m.MessageId)
		if err != nil {
			return nil, err
		}
		return &kitpb.MessageReply{Message: msg}, nil
	case *kitpb.EditMessage:
		return a.edit(m)
	case *kitpb.DeleteMessage:
		return a.delete(m)
	case *kitpb.ListMessages:
		return a.list(m)
	}
	return askConcerns(a, KindConversation, msg, conversationConcerns[:])
}

// conversationConcerns take the requests the switch of handle leaves, one
// concern (and file) each.
var conversationConcerns = [...]concern[*conversationActor]{
	(*conversationActor).handleFiles,
	(*conversationActor).handleWebhooks,
	(*conversationActor).handleMemberActions,
}

// visible: bots see channels they were added to, members see their
// conversations, the operator sees everything.
func (a *conversationActor) visible(c *kitpb.Caller) bool {
	switch c.GetKind() {
	case CallerOperator:
		return true
	case CallerBot:
		_, ok := a.bots[c.BotId]
		return ok && a.conv.WorkspaceId == c.WorkspaceId
	case CallerUser, CallerDeveloper:
		_, ok := a.members[c.UserId]
		return ok && a.conv.WorkspaceId == c.WorkspaceId
	}
	return false
}

func (a *conversationActor) create(m *kitpb.CreateConversation) (proto.Message, error) {
	if a.conv != nil {
		return nil, kiterr.New(kiterr.Conflict, "conversation already exists")
	}
	now := a.env.Clock.Now()
	conv := &kitpb.Conversation{
		Id: a.id, WorkspaceId: m.WorkspaceId, Kind: m.Kind, Visibility: m.Visibility,
		Name: m.Name, Topic: m.Topic, CreatedAt: nanos(now),
	}
	// The index entries first, the conversation's records last
	// (commitInSteps): a kill between leaves entries that lead to no
	// conversation, and a create that a retry does whole.
	index, b := a.env.newBatch(), a.env.newBatch()
	index.Set(messageTagKey(a.tag, a.id), nil)
	put(b, conversationKey(a.id), conv)
	members := make(map[string]*kitpb.Member, len(m.MemberIds))
	for _, uid := range m.MemberIds {
		mem := &kitpb.Member{UserId: uid, JoinedAt: nanos(now)}
		members[uid] = mem
		put(b, memberKey(a.id, uid), mem)
		index.Set(memberConversationKey(uid, a.id), nil)
	}
	if err := a.env.commitInSteps(index, b); err != nil {
		return nil, fmt.Errorf("create conversation %s: %w", a.id, err)
	}
	a.conv, a.members = conv, members
	a.window = a.env.History.NewWindow()
	return &kitpb.ConversationReply{Conversation: conv}, nil
}

func (a *conversationActor) addMember(m *kitpb.AddMember) (proto.Message, error) {
	if m.UserWorkspaceId != a.conv.WorkspaceId {
		return nil, kiterr.Absent("user")
	}
	if a.conv.Archived {
		return nil, errArchived
	}
	if _, ok := a.members[m.UserId]; ok {
		return &kitpb.Ok{}, nil
	}
	if a.conv.Kind == "dm" {
		// A dm is between exactly two people (its creation's rule).
		return nil, kiterr.New(kiterr.Conflict, "a dm has exactly two members")
	}
	mem := &kitpb.Member{UserId: m.UserId, JoinedAt: nanos(a.env.Clock.Now())}
	// The member's entry first, the member last: a retry finds no member.
	index, b := a.env.newBatch(), a.env.newBatch()
	index.Set(memberConversationKey(m.UserId, a.id), nil)
	put(b, memberKey(a.id, m.UserId), mem)
	a.emitMember(b, eventChannelMemberJoined, mem, mem.JoinedAt)
	if err := a.commit(index, b); err != nil {
		return nil, fmt.Errorf("add member to %s: %w", a.id, err)
	}
	a.members[m.UserId] = mem
	return &kitpb.Ok{}, nil
}

func (a *conversationActor) removeMember(m *kitpb.RemoveMember) (proto.Message, error) {
	if _, ok := a.members[m.UserId]; !ok {
		return nil, kiterr.Absent("member")
	}
	if a.conv.Archived {
		// As addMember: an archive keeps its members as they were, and
		// emits no channel.member_left into a conversation that is over.
		return nil, errArchived
	}
	if a.conv.Kind == "dm" {
		// As addMember: one left alone in a dm could never be joined again.
		return nil, kiterr.New(kiterr.Conflict, "a dm has exactly two members")
	}
	// The member's entry first, the member last: a retry finds the member.
	index, b := a.env.newBatch(), a.env.newBatch()
	index.Delete(memberConversationKey(m.UserId, a.id))
	b.Delete(memberKey(a.id, m.UserId))
	a.emitMember(b, eventChannelMemberLeft, a.members[m.UserId], nanos(a.env.Clock.Now()))
	if err := a.commit(index, b); err != nil {
		return nil, fmt.Errorf("remove member from %s: %w", a.id, err)
	}
	delete(a.members, m.UserId)
	return &kitpb.Ok{}, nil
}

func (a *conversationActor) archive() (proto.Message, error) {
	if !a.conv.Archived {
		next := proto.Clone(a.conv).(*kitpb.Conversation)
		next.Archived = true
		b := a.env.newBatch()
		put(b, conversationKey(a.id), next)
		if a.emits(eventChannelArchived) {
			ev := a.newEvent(eventChannelArchived, nanos(a.env.Clock.Now()))
			ev.Conversation = next
			a.emit(b, eventChannelArchived, ev, nil, "")
		}
		if err := a.commit(b); err != nil {
			return nil, fmt.Errorf("archive %s: %w", a.id, err)
		}
		a.conv = next
	}
	return &kitpb.ConversationReply{Conversation: a.conv}, nil
}

func (a *conversationActor) addBot(m *kitpb.AddBot) (proto.Message, error) {
	if a.conv.Kind != "channel" {
		return nil, kiterr.Invalid("conversationId", "must be a channel")
	}
	if a.conv.Archived {
		return nil, errArchived
	}
	if _, ok := a.bots[m.BotId]; ok {
		if _, err := a.setBotEvents(&kitpb.SetBotEvents{BotId: m.BotId, Events: m.Events}); err != nil {
			return nil, err
		}
		return &kitpb.ConversationReply{Conversation: a.conv}, nil
	}
	bm := &kitpb.BotMember{BotId: m.BotId, InstallationId: m.InstallationId, JoinedAt: nanos(a.env.Clock.Now()), Events: m.Events}
	b := a.env.newBatch()
	put(b, botMemberKey(a.id, m.BotId), bm)
	if err := a.outbox.resume(a.env.Store, []string{bm.InstallationId}); err != nil {
		return nil, err
	}
	a.emitBot(b, eventBotAdded, bm)
	if err := a.commit(b); err != nil {
		return nil, fmt.Errorf("add bot to %s: %w", a.id, err)
	}
	a.bots[m.BotId] = bm
	a.refreshEventMask()
	return &kitpb.ConversationReply{Conversation: a.conv}, nil
}

func (a *conversationActor) removeBot(m *kitpb.RemoveBot) (proto.Message, error) {
	bm, ok := a.bots[m.BotId]
	if !ok {
		return &kitpb.Ok{}, nil
	}
	b := a.env.newBatch()
	b.Delete(botMemberKey(a.id, m.BotId))
	a.emitBot(b, eventBotRemoved, bm)
	if err := a.commit(b); err != nil {
		return nil, fmt.Errorf("remove bot from %s: %w", a.id, err)
	}
	delete(a.bots, m.BotId)
	a.refreshEventMask()
	return &kitpb.Ok{}, nil
}

// setBotEvents changes the kinds a bot here gets (its installation was
// updated or uninstalled).
func (a *conversationActor) setBotEvents(m *kitpb.SetBotEvents) (proto.Message, error) {
	bm, ok := a.bots[m.BotId]
	if !ok || bm.Events == m.Events {
		return &kitpb.Ok{}, nil
	}
	next := proto.Clone(bm).(*kitpb.BotMember)
	next.Events = m.Events
	b := a.env.newBatch()
	put(b, botMemberKey(a.id, m.BotId), next)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("set events of bot %s in %s: %w", m.BotId, a.id, err)
	}
	a.bots[m.BotId] = next
	a.refreshEventMask()
	return &kitpb.Ok{}, nil
}

// commit commits b and then sends the notices of the events it wrote.
func (a *conversationActor) commit(steps ...batch) error {
	if err := a.env.commitInSteps(steps...); err != nil {
		a.outbox.failed()
		return err
	}
	a.outbox.applied(a.env)
	return nil
}

func (a *conversationActor) listMembers(m *kitpb.ListMembers) (proto.Message, error) {
	if !a.visible(m.Caller) {
		return nil, kiterr.Absent("conversation")
	}
	lower := memberKey(a.id, m.AfterId)
	if m.AfterId != "" {
		lower = keyAfter(lower) // strictly after the cursor's member
	}
	upper := persistence.PrefixEnd(membersPrefix(a.id))
	reply := &kitpb.MembersReply{}
	err := a.env.Store.Scan(lower, upper, false, func(_, v []byte) bool {
		if len(reply.Members) == int(m.Limit) {
			reply.More = true
			return false
		}
		mem := &kitpb.Member{}
		if err := proto.Unmarshal(v, mem); err == nil {
			reply.Members = append(reply.Members, mem)
		}
		return true
	})
	return reply, err
}

// writable checks what every write into the conversation needs.
func (a *conversationActor) writable(c *kitpb.Caller) error {
	if !a.visible(c) {
		return kiterr.Absent("conversation")
	}
	if a.conv.Archived {
		return errArchived
	}
	return nil
}

// liveIdempotency is the Idempotency record under key, if one is there
// and has not expired.
func (a *conversationActor) liveIdempotency(key []byte, now time.Time) (*kitpb.Idempotency, bool, error) {
	rec := &kitpb.Idempotency{}
	found, err := load(a.env.Store, key, rec)
	return rec, found && rec.ExpiresAt > nanos(now), err
}

// errArchived refuses a write into an archived conversation.
var errArchived = kiterr.New(kiterr.Conflict, "conversation is archived")

func author(c *kitpb.Caller) (kind, id string) {
	if c.Kind == CallerBot {
		return "bot", c.BotId
	}
	return "user", c.UserId
}

// idempotencyOwner is whose Idempotency-Key space a post uses: the Kit
// bot's, or the member's as one installation's user token acts for it, so
// that two Kits acting for one member never replay or refuse each other's
// posts.
func idempotencyOwner(c *kitpb.Caller, authorID string) string {
	if c.Kind == CallerUser && c.InstallationId != "" {
		return authorID + "/" + c.InstallationId
	}
	return authorID
}

// contentHash identifies "the same content" of a post for idempotency.
func contentHash(conversationID, text string, blocks []byte, threadParentID string) []byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(conversationID), []byte(text), blocks, []byte(threadParentID)} {
		var n [8]byte
		h.Write(persistence.AppendUint64(n[:0], uint64(len(part))))
		h.Write(part)
	}
	return h.Sum(nil)
}

// sentBlocks is what "the same content" compares of a post's blocks: the
// blocks as sent, made compact (so that other whitespace is the same
// content), whatever the interactivity rule removed from the stored form.
// Two posts that differ only in what was removed are not the same, and a
// retry after the installation's interactivity changed still is. The two
// forms are the same bytes when nothing was removed (FuzzValidate), so
// records written before compare as ever but for those.
func sentBlocks(c *kitpb.Caller, raw, stored []byte) []byte {
	if c.Interactive || len(raw) == 0 {
		return stored
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return stored
	}
	return b.Bytes()
}

func (a *conversationActor) post(m *kitpb.PostMessage) (proto.Message, error) {
	if !a.visible(m.Caller) {
		return nil, kiterr.Absent("conversation")
	}
	if a.conv.Archived && m.IdempotencyKey == "" {
		return nil, errArchived
	}
	now := a.env.Clock.Now()
	kind, authorID := author(m.Caller)
	content, err := a.checkBlocks(m.Caller, m.Blocks)
	if err != nil {
		return nil, err
	}
	var idemKey, memberKey []byte
	var hash []byte
	if m.IdempotencyKey != "" {
		owner := idempotencyOwner(m.Caller, authorID)
		idemKey = idempotencyKey(a.id, kind, owner, m.IdempotencyKey)
		hash = contentHash(a.id, m.Text, sentBlocks(m.Caller, m.Blocks, content), m.ThreadParentId)
		rec, found, err := a.liveIdempotency(idemKey, now)
		if err == nil && !found && owner != authorID {
			// The member-wide record: one of a build before a user
			// token's keys were its installation's (no installation; at
			// most 24 hours old at the upgrade), or this installation's
			// copy for such a build (below).
			memberKey = idempotencyKey(a.id, kind, authorID, m.IdempotencyKey)
			var shared *kitpb.Idempotency
			if shared, found, err = a.liveIdempotency(memberKey, now); found {
				memberKey = nil // kept as it is
				if found = shared.InstallationId == "" || shared.InstallationId == m.Caller.InstallationId; found {
					rec = shared
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("load idempotency record: %w", err)
		}
		if found {
			if !bytes.Equal(rec.ContentHash, hash) {
				return nil, kiterr.New(kiterr.IdempotencyConflict, "Idempotency-Key was used with different content")
			}
			msg, err := a.messageBySeq(rec.MessageSeq)
			if err != nil {
				return nil, err
			}
			return &kitpb.MessageReply{Message: msg, Replayed: true}, nil
		}
	}
	if a.conv.Archived {
		// Only a replay, above, is answered: it writes nothing.
		return nil, errArchived
	}
	var parentSeq uint64
	if m.ThreadParentId != "" {
		parent, err := a.messageByID(m.ThreadParentId)
		if err != nil || parent.ThreadParentId != "" || parent.DeletedAt != 0 {
			return nil, kiterr.Invalid("threadParentId", "must be a live top-level message of this conversation")
		}
		parentSeq = parent.Seq
	}
	d, limited := a.buckets.take(limits.PostMessage, "", now)
	if limited && !d.OK {
		return nil, kiterr.OverLimit(d)
	}
	seq, err := a.nextSeq()
	if err != nil {
		return nil, err
	}
	msg := &kitpb.Message{
		Id: ids.NewMessage(now, a.tag, seq), ConversationId: a.id, AuthorKind: kind, AuthorId: authorID,
		Text: m.Text, Blocks: content, ThreadParentId: m.ThreadParentId,
		CreatedAt: nanos(now), Seq: seq,
	}
	b := a.env.newBatch()
	// The sweep first: a record this post writes again must follow the
	// deletion of its expired self in the batch.
	sweepAt, err := a.sweepIdempotency(b, nanos(now))
	if err != nil {
		b.Close()
		if limited {
			a.buckets.giveBack(limits.PostMessage, "", now)
		}
		return nil, fmt.Errorf("sweep idempotency records of %s: %w", a.id, err)
	}
	rec := a.putMessage(b, msg)
	if a.eventMask != 0 {
		a.emitPosted(b, msg, rec)
	}
	if parentSeq != 0 {
		b.Set(threadReplyKey(a.id, parentSeq, seq), nil)
	}
	if idemKey != nil {
		rec := &kitpb.Idempotency{
			ContentHash: hash, MessageId: msg.Id, MessageSeq: seq,
			ExpiresAt: nanos(now) + IdempotencyTTL,
		}
		put(b, idemKey, rec)
		var copyRest []byte // what the expiry index entry names besides idemKey
		if memberKey != nil {
			// In a rolling upgrade a node of an older build may lead the
			// conversation next, and it reads the member-wide key alone:
			// without this copy, a retry it answers posts again.
			put(b, memberKey, &kitpb.Idempotency{
				ContentHash: rec.ContentHash, MessageId: rec.MessageId, MessageSeq: rec.MessageSeq,
				ExpiresAt: rec.ExpiresAt, InstallationId: m.Caller.InstallationId,
			})
			copyRest = idempotencyRest(a.id, memberKey)
		}
		b.Set(idempotencyExpiryKey(a.id, rec.ExpiresAt, idemKey), copyRest)
	}
	// Posts are the hot path: apply now, and let the reply wait for the
	// sync while the next post is applied (see durability).
	if err := a.applyPost(b, msg, seq); err != nil {
		if limited {
			// A post that failed (503, to retry) posted nothing.
			a.buckets.giveBack(limits.PostMessage, "", now)
		}
		return nil, fmt.Errorf("post into %s: %w", a.id, err)
	}
	a.idemSweepAt = sweepAt
	return &kitpb.MessageReply{Message: msg}, nil
}

// applyPost applies the batch b of a post of msg at seq (applyLater), and
// keeps the post in the conversation's memory once it is applied.
func (a *conversationActor) applyPost(b batch, msg *kitpb.Message, seq uint64) error {
	if err := a.applyLater(b); err != nil {
		a.window.Drop()
		return err
	}
	a.lastSeq = seq
	a.keepPosted(msg)
	return nil
}

// applyLater applies b and sends the notices of the events it wrote; the
// reply waits for b's sync (see durability) while the actor goes on.
func (a *conversationActor) applyLater(b batch) error {
	w, err := b.Apply()
	if err != nil {
		a.outbox.failed()
		return err
	}
	a.sync.applied(w)
	a.outbox.applied(a.env)
	return nil
}

// checkBlocks validates blocks under the caller's policy and returns the
// form to store: interactive elements are kept only when the installed
// manifest declares interactivity.
func (a *conversationActor) checkBlocks(c *kitpb.Caller, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out, err := blocks.Validate(raw, blocks.Policy{Interactive: c.Interactive, FileVisible: a.fileVisible})
	if err != nil {
		var be *blocks.Error
		if errors.As(err, &be) {
			return nil, kiterr.Invalid(be.Path, be.Reason)
		}
		return nil, err
	}
	return out, nil
}

// ownMessage finds a message the caller may change.
func (a *conversationActor) ownMessage(c *kitpb.Caller, id string) (*kitpb.Message, error) {
	if !a.visible(c) {
		return nil, kiterr.Absent("message")
	}
	msg, err := a.messageByID(id)
	if err != nil {
		return nil, err
	}
	kind, authorID := author(c)
	if msg.AuthorKind != kind || msg.AuthorId != authorID {
		return nil, kiterr.New(kiterr.Forbidden, "only the author can change a message")
	}
	return msg, nil
}

func (a *conversationActor) edit(m *kitpb.EditMessage) (proto.Message, error) {
	msg, err := a.ownMessage(m.Caller, m.MessageId)
	if err != nil {
		return nil, err
	}
	if a.conv.Archived {
		return nil, errArchived
	}
	if msg.DeletedAt != 0 {
		return nil, kiterr.New(kiterr.Conflict, "message is deleted")
	}
	if !m.KeepBlocks {
		content, err := a.checkBlocks(m.Caller, m.Blocks)
		if err != nil {
			return nil, err
		}
		msg.Blocks = content
	}
	msg.Text, msg.EditedAt = m.Text, nanos(a.env.Clock.Now())
	return a.rewrite(msg, eventMessageEdited, msg.EditedAt, nil)
}

func (a *conversationActor) delete(m *kitpb.DeleteMessage) (proto.Message, error) {
	msg, err := a.ownMessage(m.Caller, m.MessageId)
	if err != nil {
		return nil, err
	}
	if msg.DeletedAt != 0 {
		// Idempotent (SPEC.md 3), archived or not: it writes nothing.
		return &kitpb.MessageReply{Message: msg}, nil
	}
	if a.conv.Archived {
		return nil, errArchived
	}
	// A tombstone keeps its place in history and nothing of its content.
	msg.Text, msg.Blocks, msg.Reactions, msg.DeletedAt = "", nil, nil, nanos(a.env.Clock.Now())
	return a.rewrite(msg, eventMessageDeleted, msg.DeletedAt, nil)
}

// rewrite stores a changed message, and the event of kind k about it at
// the time at: with the message as its data, or reaction when set.
func (a *conversationActor) rewrite(msg *kitpb.Message, k eventKind, at int64, reaction *kitpb.EventReaction) (proto.Message, error) {
	b := a.env.newBatch()
	rec := a.putMessage(b, msg)
	if a.emits(k) {
		ev := a.newEvent(k, at)
		if reaction != nil {
			ev.Reaction, rec = reaction, nil
		}
		a.emit(b, k, ev, rec, "")
	}
	if err := a.commit(b); err != nil {
		a.window.Drop()
		return nil, fmt.Errorf("rewrite message %s: %w", msg.Id, err)
	}
	a.keepChanged(msg)
	return &kitpb.MessageReply{Message: msg}, nil
}

// nextSeq is the position of the next message, while ids can carry it.
func (a *conversationActor) nextSeq() (uint64, error) {
	if a.lastSeq >= ids.MaxMessageSeq {
		return 0, fmt.Errorf("conversation %s: message positions exhausted", a.id)
	}
	return a.lastSeq + 1, nil
}

// messageByID finds a message of this conversation by its id, which says
// where it is (ids.NewMessage); the stored id must match, so an id of
// another conversation with the same tag finds nothing.
func (a *conversationActor) messageByID(id string) (*kitpb.Message, error) {
	if tag, seq, ok := ids.ParseMessage(id); ok && tag == a.tag && seq <= a.lastSeq {
		msg, err := a.messageBySeq(seq)
		if err != nil && kiterr.CodeOf(err) != kiterr.NotFound {
			return nil, err
		}
		if err == nil && msg.Id == id {
			return msg, nil
		}
	}
	return a.messageByLocator(id)
}

// messageByLocator finds a message written before ids carried their
// position, through the locator record written with it.
func (a *conversationActor) messageByLocator(id string) (*kitpb.Message, error) {
	loc, err := olderMessageLocator(a.env, id)
	if err != nil {
		return nil, err
	}
	if loc.Owner != a.id {
		return nil, kiterr.Absent("message")
	}
	msg, err := a.messageBySeq(loc.Seq)
	if err != nil {
		return nil, err
	}
	if msg.Id != id {
		return nil, kiterr.Absent("message")
	}
	return msg, nil
}

// ensureTagIndex writes the conversation's tag index entry when it lacks
// one: a conversation created before message ids carried their position
// gets it the first time it activates, before it mints any such id.
func (a *conversationActor) ensureTagIndex() error {
	k := messageTagKey(a.tag, a.id)
	if _, err := a.env.Store.Get(k); !errors.Is(err, persistence.ErrNotFound) {
		return err
	}
	b := a.env.newBatch()
	b.Set(k, nil)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("index tag of conversation %s: %w", a.id, err)
	}
	return nil
}

// putMessage stores a message under its position and returns the stored
// record. It leaves out the conversation id, which its key carries; readers
// put it back (messageBySeq, list, the events that carry the record).
func (a *conversationActor) putMessage(b batch, msg *kitpb.Message) []byte {
	msg.ConversationId = ""
	rec := marshal(msg)
	msg.ConversationId = a.id
	b.Set(messageKey(a.id, msg.Seq), rec)
	return rec
}

func (a *conversationActor) messageBySeq(seq uint64) (*kitpb.Message, error) {
	msg := &kitpb.Message{}
	if err := loadExisting(a.env.Store, messageKey(a.id, seq), msg, "message"); err != nil {
		return nil, err
	}
	msg.ConversationId = a.id
	return msg, nil
}
