package api

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Field limits of SPEC.md sections 4.3 and 8.
const (
	maxTextLen        = 8000
	maxIdempotencyKey = 255
)

func (s *Server) authTest(in call) (reply, error) {
	return jsonReply(fasthttp.StatusOK, struct {
		OK             bool     `json:"ok"`
		TokenType      string   `json:"tokenType"`
		WorkspaceID    string   `json:"workspaceId"`
		InstallationID string   `json:"installationId"`
		KitSlug        string   `json:"kitSlug"`
		BotID          *string  `json:"botId"`
		UserID         *string  `json:"userId"`
		Scopes         []string `json:"scopes"`
	}{true, in.p.TokenType, in.p.Caller.WorkspaceId, in.p.Caller.InstallationId, in.p.KitSlug,
		optString(in.p.Caller.BotId), optString(in.p.Caller.UserId), nonNil(in.p.Scopes)})
}

// ---- conversations ----

func (s *Server) listConversations(in call) (reply, error) {
	pg, err := parsePage(in.ctx, "conversations", maxLimit)
	if err != nil {
		return reply{}, err
	}
	page, more, err := s.conversationPage(in.p, pg)
	if err != nil {
		return reply{}, err
	}
	out := make([]conversationView, 0, len(page))
	last := ""
	for _, id := range page {
		c, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: in.p.Caller})
		if kiterr.CodeOf(err) == kiterr.NotFound {
			continue // left the conversation since the page was read
		}
		if err != nil {
			return reply{}, err
		}
		out = append(out, viewConversation(c.Conversation))
		last = id
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Conversations []conversationView `json:"conversations"`
		NextCursor    *string            `json:"nextCursor"`
	}{out, cursorFor("conversations", last, more)})
}

func (s *Server) getConversation(in call) (reply, error) {
	id := in.param("id")
	if !ids.Valid(id) {
		return reply{}, kiterr.Absent("conversation")
	}
	c, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: in.p.Caller})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, conversationBody{viewConversation(c.Conversation)})
}

func (s *Server) listMembers(in call) (reply, error) {
	id := in.param("id")
	pg, err := parsePage(in.ctx, "members:"+id, maxLimit)
	if err == nil && !ids.Valid(id) {
		err = kiterr.Absent("conversation")
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MembersReply](s, actors.KindConversation, id, &kitpb.ListMembers{Caller: in.p.Caller, AfterId: pg.position, Limit: int32(pg.limit)})
	if err != nil {
		return reply{}, err
	}
	out := make([]memberView, len(r.Members))
	last := ""
	for i, m := range r.Members {
		out[i] = memberView{UserID: m.UserId, JoinedAt: isoTime(m.JoinedAt)}
		last = m.UserId
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Members    []memberView `json:"members"`
		NextCursor *string      `json:"nextCursor"`
	}{out, cursorFor("members:"+id, last, r.More)})
}

// conversationPage returns the ids of one page of the caller's
// conversations: the channels its Kit bot was added to, or the member's
// conversations. UUIDv7 ids sort by creation, which gives a stable order.
func (s *Server) conversationPage(p *actors.Principal, pg page) ([]string, bool, error) {
	if p.TokenType != actors.CallerBot {
		return actors.MemberConversations(s.env, p.Caller.UserId, pg.position, pg.limit)
	}
	inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, p.Caller.InstallationId, &kitpb.GetInstallation{})
	if err != nil {
		return nil, false, err
	}
	all := slices.Sorted(slices.Values(inst.Installation.ChannelIds))
	start, found := slices.BinarySearch(all, pg.position)
	if pg.position != "" && found {
		start++
	}
	rest := all[start:]
	if len(rest) > pg.limit {
		return rest[:pg.limit], true, nil
	}
	return rest, false, nil
}

// ---- messages ----

type messagesPage struct {
	Messages   []messageView `json:"messages"`
	NextCursor *string       `json:"nextCursor"`
}

type messageBody struct {
	Message messageView `json:"message"`
}

func (s *Server) listMessages(in call) (reply, error) {
	convID := in.param("id")
	return s.messagePage(in, convID, "", "messages:"+convID)
}

func (s *Server) listReplies(in call) (reply, error) {
	msgID := in.param("id")
	convID, err := actors.LocateMessage(s.env, msgID)
	if err != nil {
		return reply{}, err
	}
	return s.messagePage(in, convID, msgID, "replies:"+msgID)
}

func (s *Server) messagePage(in call, convID, parentID, list string) (reply, error) {
	pg, err := parsePage(in.ctx, list, maxLimit)
	if err != nil {
		return reply{}, err
	}
	before, err := seqPosition(pg)
	if err == nil && !ids.Valid(convID) {
		err = kiterr.Absent("conversation")
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessagesReply](s, actors.KindConversation, convID, &kitpb.ListMessages{
		Caller: in.p.Caller, ThreadParentId: parentID, BeforeSeq: before, Limit: int32(pg.limit),
	})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendPage(bodyBuffer(in.ctx), r, list))
}

// appendPage appends the page of list that r answered: its messages as
// the conversation encoded them, or, from a node built before pages came
// encoded (a cluster in a rolling upgrade), as it sent them.
func appendPage(b []byte, r *kitpb.MessagesReply, list string) []byte {
	if n := len(r.Messages); n > 0 {
		last := strconv.FormatUint(r.Messages[n-1].Seq, 10)
		return appendMessagesPage(b, r.Messages, cursorFor(list, last, r.More))
	}
	last := ""
	if len(r.Encoded) > 0 {
		last = strconv.FormatUint(r.LastSeq, 10)
	}
	return appendEncodedPage(b, r.Encoded, cursorFor(list, last, r.More))
}

func (s *Server) getMessage(in call) (reply, error) {
	id := in.param("id")
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.GetMessage{Caller: in.p.Caller, MessageId: id})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

type postBody struct {
	ConversationID *string         `json:"conversationId"`
	Text           *string         `json:"text"`
	Blocks         json.RawMessage `json:"blocks"`
	ThreadParentID *string         `json:"threadParentId"`
}

func (s *Server) postMessage(in call) (reply, error) {
	var body postBody
	key, err := idempotencyKey(in.ctx)
	if err == nil {
		err = in.decode(&body)
	}
	if err == nil {
		err = input.FirstError(
			input.RequireUUID("conversationId", body.ConversationID),
			messageText(body.Text),
		)
	}
	if err == nil && body.ThreadParentID != nil && !ids.Valid(*body.ThreadParentID) {
		err = kiterr.Invalid("threadParentId", "must be a live top-level message of this conversation")
	}
	if err != nil {
		return reply{}, err
	}
	msg := &kitpb.PostMessage{
		Caller: in.p.Caller, Text: *body.Text,
		Blocks: rawBlocks(body.Blocks), IdempotencyKey: key,
	}
	if body.ThreadParentID != nil {
		msg.ThreadParentId = *body.ThreadParentID
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, *body.ConversationID, msg)
	if err != nil {
		return reply{}, err
	}
	status := fasthttp.StatusCreated
	if r.Replayed {
		status = fasthttp.StatusOK
	}
	return rawReply(status, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

type editBody struct {
	Text   *string         `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

func (s *Server) editMessage(in call) (reply, error) {
	id := in.param("id")
	var body editBody
	err := in.decode(&body)
	if err == nil {
		err = messageText(body.Text)
	}
	if err != nil {
		return reply{}, err
	}
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.EditMessage{
		Caller: in.p.Caller, MessageId: id, Text: *body.Text, Blocks: rawBlocks(body.Blocks),
		KeepBlocks: body.Blocks == nil,
	})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

func (s *Server) deleteMessage(in call) (reply, error) {
	id := in.param("id")
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.DeleteMessage{Caller: in.p.Caller, MessageId: id})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

func messageText(text *string) error {
	if err := input.RequireString("text", text, 1, maxTextLen); err != nil {
		return err
	}
	return input.NotBlank("text", *text)
}

// rawBlocks returns the blocks as sent, nil for none (absent or null). The
// conversation validates them: it knows the files and the installation's
// interactivity.
func rawBlocks(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// idempotencyKey reads the optional Idempotency-Key header: 1-255
// printable ASCII characters (0x21-0x7e).
func idempotencyKey(ctx *fasthttp.RequestCtx) (string, error) {
	raw := ctx.Request.Header.Peek("Idempotency-Key")
	if raw == nil {
		return "", nil
	}
	if len(raw) < 1 || len(raw) > maxIdempotencyKey {
		return "", kiterr.Invalid("Idempotency-Key", "must be 1 to 255 characters")
	}
	for _, c := range raw {
		if c < 0x21 || c > 0x7e {
			return "", kiterr.Invalid("Idempotency-Key", "must be printable ASCII without spaces")
		}
	}
	return string(raw), nil
}

// ---- users ----

func (s *Server) listUsers(in call) (reply, error) {
	pg, err := parsePage(in.ctx, "users", maxLimit)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.UsersReply](s, actors.KindWorkspace, in.p.Caller.WorkspaceId, &kitpb.ListUsers{AfterId: pg.position, Limit: int32(pg.limit)})
	if err != nil {
		return reply{}, err
	}
	withEmail := in.p.HasScope("users:read.email")
	out := make([]userView, len(r.Users))
	last := ""
	for i, u := range r.Users {
		out[i] = viewUser(u, withEmail)
		last = u.Id
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Users      []userView `json:"users"`
		NextCursor *string    `json:"nextCursor"`
	}{out, cursorFor("users", last, r.More)})
}

func (s *Server) usersMe(in call) (reply, error) {
	type botView struct {
		ID          string `json:"id"`
		DisplayName string `json:"displayName"`
	}
	out := struct {
		User *userView `json:"user"`
		Bot  *botView  `json:"bot"`
	}{}
	if in.p.TokenType == actors.CallerBot {
		inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, in.p.Caller.InstallationId, &kitpb.GetInstallation{})
		if err != nil {
			return reply{}, err
		}
		out.Bot = &botView{inst.Installation.BotId, inst.Installation.BotDisplayName}
	} else {
		u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, in.p.Caller.WorkspaceId, &kitpb.GetUser{UserId: in.p.Caller.UserId})
		if err != nil {
			return reply{}, err
		}
		v := viewUser(u.User, in.p.HasScope("users:read.email"))
		out.User = &v
	}
	return jsonReply(fasthttp.StatusOK, out)
}

func (s *Server) getUser(in call) (reply, error) {
	id := in.param("id")
	if !ids.Valid(id) {
		return reply{}, kiterr.Absent("user")
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, in.p.Caller.WorkspaceId, &kitpb.GetUser{UserId: id})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, struct {
		User userView `json:"user"`
	}{viewUser(u.User, in.p.HasScope("users:read.email"))})
}

func (s *Server) getInstallation(in call) (reply, error) {
	inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, in.p.Caller.InstallationId, &kitpb.GetInstallation{})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, installationBody{viewInstallation(inst.Installation)})
}
