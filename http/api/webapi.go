package api

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Field limits of SPEC.md sections 4.3 and 8.
const (
	maxTextLen        = 8000
	maxIdempotencyKey = 255
)

// Token types a method accepts.
var (
	botOrUser = []string{actors.CallerBot, actors.CallerUser}
)

func (s *Server) webAPI(ctx *fasthttp.RequestCtx, seg []string) {
	if len(seg) > 0 && seg[0] == "dev" {
		s.developer(ctx, seg[1:])
		return
	}
	method := string(ctx.Method())
	switch {
	case method == "GET" && route(seg, "auth", "test"):
		s.authTest(ctx)
	case method == "GET" && route(seg, "conversations"):
		s.listConversations(ctx)
	case method == "GET" && route(seg, "conversations", "*"):
		s.getConversation(ctx, seg[1])
	case method == "GET" && route(seg, "conversations", "*", "members"):
		s.listMembers(ctx, seg[1])
	case method == "GET" && route(seg, "conversations", "*", "messages"):
		s.listMessages(ctx, seg[1])
	case method == "POST" && route(seg, "messages"):
		s.postMessage(ctx)
	case method == "GET" && route(seg, "messages", "*"):
		s.getMessage(ctx, seg[1])
	case method == "PATCH" && route(seg, "messages", "*"):
		s.editMessage(ctx, seg[1])
	case method == "DELETE" && route(seg, "messages", "*"):
		s.deleteMessage(ctx, seg[1])
	case method == "GET" && route(seg, "messages", "*", "replies"):
		s.listReplies(ctx, seg[1])
	case method == "GET" && route(seg, "users"):
		s.listUsers(ctx)
	case method == "GET" && route(seg, "users", "me"):
		s.usersMe(ctx)
	case method == "GET" && route(seg, "users", "*"):
		s.getUser(ctx, seg[1])
	case method == "GET" && route(seg, "installation"):
		s.getInstallation(ctx)
	case s.filesAPI(ctx, method, seg), s.credentialsAPI(ctx, method, seg):
	default:
		s.fail(ctx, kiterr.Absent("route"))
	}
}

// authorize authenticates the bearer token, checks its type and scope, and
// spends one token of the family bucket of its installation. It writes the
// error and returns nil when the request may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, types []string, scope string, family limits.Name) *actors.Principal {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return nil
	}
	p, err := s.auth.Authenticate(token)
	if err != nil {
		s.fail(ctx, err)
		return nil
	}
	if !slices.Contains(types, p.TokenType) {
		s.fail(ctx, kiterr.New(kiterr.Forbidden, "this token type cannot call this method"))
		return nil
	}
	if p.TokenType == actors.CallerDeveloper {
		if now := s.env.Clock.Now().UnixNano(); p.TouchDue(now) {
			_, err := ask[*kitpb.Ok](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.TouchDeveloperToken{TokenId: p.TokenID, At: now})
			if err != nil {
				s.fail(ctx, err)
				return nil
			}
		}
	}
	if scope != "" && !p.HasScope(scope) {
		ctx.Response.Header.Set("X-Service-Required-Scope", scope)
		s.fail(ctx, kiterr.New(kiterr.MissingScope, "the token lacks scope "+scope))
		return nil
	}
	if family != "" && s.limits != nil {
		owner, identity := actors.KindInstallation, p.Caller.InstallationId
		key := ""
		if p.TokenType == actors.CallerDeveloper {
			owner, identity, key = actors.KindWorkspace, p.Caller.WorkspaceId, p.TokenID
		}
		d, err := ask[*kitpb.Decision](s, owner, identity, &kitpb.TakeToken{Bucket: string(family), Key: key})
		if err != nil {
			s.fail(ctx, err)
			return nil
		}
		dec := limits.FromWire(d, s.limits)
		if !dec.OK {
			s.fail(ctx, kiterr.OverLimit(dec))
			return nil
		}
		setRateHeaders(ctx, dec)
	}
	return p
}

func setRateHeaders(ctx *fasthttp.RequestCtx, d limits.Decision) {
	if d.Policy == "" {
		return
	}
	ctx.Response.Header.Set("RateLimit-Policy", d.PolicyHeader())
	ctx.Response.Header.Set("RateLimit", d.LimitHeader())
}

// bearer returns the token of an `Authorization: Bearer` header.
func bearer(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	h := ctx.Request.Header.Peek("Authorization")
	if len(h) == 0 {
		return nil, false
	}
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return []byte{}, true // a credential was sent, and it is malformed
	}
	return h[len(prefix):], true
}

func equalFoldASCII(b []byte, s string) bool {
	for i := range b {
		c, d := b[i], s[i]
		if c|0x20 != d|0x20 {
			return false
		}
	}
	return true
}

func (s *Server) authTest(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "", limits.Read)
	if p == nil {
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		OK             bool     `json:"ok"`
		TokenType      string   `json:"tokenType"`
		WorkspaceID    string   `json:"workspaceId"`
		InstallationID string   `json:"installationId"`
		KitSlug        string   `json:"kitSlug"`
		BotID          *string  `json:"botId"`
		UserID         *string  `json:"userId"`
		Scopes         []string `json:"scopes"`
	}{true, p.TokenType, p.Caller.WorkspaceId, p.Caller.InstallationId, p.KitSlug,
		optString(p.Caller.BotId), optString(p.Caller.UserId), nonNil(p.Scopes)})
}

// ---- conversations ----

func (s *Server) listConversations(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "conversations:read", limits.Read)
	if p == nil {
		return
	}
	pg, err := parsePage(ctx, "conversations", maxLimit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	page, more, err := s.conversationPage(p, pg)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	out := make([]conversationView, 0, len(page))
	last := ""
	for _, id := range page {
		c, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: p.Caller})
		if kiterr.CodeOf(err) == kiterr.NotFound {
			continue // left the conversation since the page was read
		}
		if err != nil {
			s.fail(ctx, err)
			return
		}
		out = append(out, viewConversation(c.Conversation))
		last = id
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Conversations []conversationView `json:"conversations"`
		NextCursor    *string            `json:"nextCursor"`
	}{out, cursorFor("conversations", last, more)})
}

func (s *Server) getConversation(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "conversations:read", limits.Read)
	if p == nil {
		return
	}
	if !ids.Valid(id) {
		s.fail(ctx, kiterr.Absent("conversation"))
		return
	}
	c, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: p.Caller})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Conversation conversationView `json:"conversation"`
	}{viewConversation(c.Conversation)})
}

func (s *Server) listMembers(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "conversations:read", limits.Read)
	if p == nil {
		return
	}
	pg, err := parsePage(ctx, "members:"+id, maxLimit)
	if err == nil && !ids.Valid(id) {
		err = kiterr.Absent("conversation")
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.MembersReply](s, actors.KindConversation, id, &kitpb.ListMembers{Caller: p.Caller, AfterId: pg.position, Limit: int32(pg.limit)})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	out := make([]memberView, len(r.Members))
	last := ""
	for i, m := range r.Members {
		out[i] = memberView{UserID: m.UserId, JoinedAt: isoTime(m.JoinedAt)}
		last = m.UserId
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
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

func (s *Server) listMessages(ctx *fasthttp.RequestCtx, convID string) {
	p := s.authorize(ctx, botOrUser, "messages:read", limits.Read)
	if p == nil {
		return
	}
	s.messagePage(ctx, p, convID, "", "messages:"+convID)
}

func (s *Server) listReplies(ctx *fasthttp.RequestCtx, msgID string) {
	p := s.authorize(ctx, botOrUser, "messages:read", limits.Read)
	if p == nil {
		return
	}
	convID, err := actors.LocateMessage(s.env, msgID)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.messagePage(ctx, p, convID, msgID, "replies:"+msgID)
}

func (s *Server) messagePage(ctx *fasthttp.RequestCtx, p *actors.Principal, convID, parentID, list string) {
	pg, err := parsePage(ctx, list, maxLimit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	before, err := seqPosition(pg)
	if err == nil && !ids.Valid(convID) {
		err = kiterr.Absent("conversation")
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.MessagesReply](s, actors.KindConversation, convID, &kitpb.ListMessages{
		Caller: p.Caller, ThreadParentId: parentID, BeforeSeq: before, Limit: int32(pg.limit),
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	last := ""
	if n := len(r.Messages); n > 0 {
		last = strconv.FormatUint(r.Messages[n-1].Seq, 10)
	}
	s.writeBuffer(ctx, fasthttp.StatusOK, appendMessagesPage(bodyBuffer(ctx), r.Messages, cursorFor(list, last, r.More)))
}

func (s *Server) getMessage(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "messages:read", limits.Read)
	if p == nil {
		return
	}
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.GetMessage{Caller: p.Caller, MessageId: id})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeBuffer(ctx, fasthttp.StatusOK, appendMessageBody(bodyBuffer(ctx), r.Message))
}

type postBody struct {
	ConversationID *string         `json:"conversationId"`
	Text           *string         `json:"text"`
	Blocks         json.RawMessage `json:"blocks"`
	ThreadParentID *string         `json:"threadParentId"`
}

func (s *Server) postMessage(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "messages:write", limits.Write)
	if p == nil {
		return
	}
	var body postBody
	key, err := idempotencyKey(ctx)
	if err == nil {
		err = s.decode(ctx, &body, maxJSONBody, false)
	}
	if err == nil {
		err = firstError(
			requireUUID("conversationId", body.ConversationID),
			messageText(body.Text),
		)
	}
	if err == nil && body.ThreadParentID != nil && !ids.Valid(*body.ThreadParentID) {
		err = kiterr.Invalid("threadParentId", "must be a live top-level message of this conversation")
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	msg := &kitpb.PostMessage{
		Caller: p.Caller, Text: *body.Text,
		Blocks: rawBlocks(body.Blocks), IdempotencyKey: key,
	}
	if body.ThreadParentID != nil {
		msg.ThreadParentId = *body.ThreadParentID
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, *body.ConversationID, msg)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	status := fasthttp.StatusCreated
	if r.Replayed {
		status = fasthttp.StatusOK
	}
	s.writeBuffer(ctx, status, appendMessageBody(bodyBuffer(ctx), r.Message))
}

type editBody struct {
	Text   *string         `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

func (s *Server) editMessage(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "messages:write", limits.Write)
	if p == nil {
		return
	}
	var body editBody
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = messageText(body.Text)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.EditMessage{
		Caller: p.Caller, MessageId: id, Text: *body.Text, Blocks: rawBlocks(body.Blocks),
		KeepBlocks: body.Blocks == nil,
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeBuffer(ctx, fasthttp.StatusOK, appendMessageBody(bodyBuffer(ctx), r.Message))
}

func (s *Server) deleteMessage(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "messages:write", limits.Write)
	if p == nil {
		return
	}
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.DeleteMessage{Caller: p.Caller, MessageId: id})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeBuffer(ctx, fasthttp.StatusOK, appendMessageBody(bodyBuffer(ctx), r.Message))
}

func messageText(text *string) error {
	if err := requireString("text", text, 1, maxTextLen); err != nil {
		return err
	}
	return notBlank("text", *text)
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

func (s *Server) listUsers(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "users:read", limits.Read)
	if p == nil {
		return
	}
	pg, err := parsePage(ctx, "users", maxLimit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.UsersReply](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.ListUsers{AfterId: pg.position, Limit: int32(pg.limit)})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	withEmail := p.HasScope("users:read.email")
	out := make([]userView, len(r.Users))
	last := ""
	for i, u := range r.Users {
		out[i] = viewUser(u, withEmail)
		last = u.Id
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Users      []userView `json:"users"`
		NextCursor *string    `json:"nextCursor"`
	}{out, cursorFor("users", last, r.More)})
}

func (s *Server) usersMe(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "", limits.Read)
	if p == nil {
		return
	}
	type botView struct {
		ID          string `json:"id"`
		DisplayName string `json:"displayName"`
	}
	out := struct {
		User *userView `json:"user"`
		Bot  *botView  `json:"bot"`
	}{}
	if p.TokenType == actors.CallerBot {
		inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, p.Caller.InstallationId, &kitpb.GetInstallation{})
		if err != nil {
			s.fail(ctx, err)
			return
		}
		out.Bot = &botView{inst.Installation.BotId, inst.Installation.BotDisplayName}
	} else {
		u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.GetUser{UserId: p.Caller.UserId})
		if err != nil {
			s.fail(ctx, err)
			return
		}
		v := viewUser(u.User, p.HasScope("users:read.email"))
		out.User = &v
	}
	s.writeJSON(ctx, fasthttp.StatusOK, out)
}

func (s *Server) getUser(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "users:read", limits.Read)
	if p == nil {
		return
	}
	if !ids.Valid(id) {
		s.fail(ctx, kiterr.Absent("user"))
		return
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.GetUser{UserId: id})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		User userView `json:"user"`
	}{viewUser(u.User, p.HasScope("users:read.email"))})
}

func (s *Server) getInstallation(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, botOrUser, "", limits.Read)
	if p == nil {
		return
	}
	inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, p.Caller.InstallationId, &kitpb.GetInstallation{})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Installation installationView `json:"installation"`
	}{viewInstallation(inst.Installation)})
}
