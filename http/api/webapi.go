package api

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// ---- conversations ----

func (s *Server) listConversations(in call) (reply, error) {
	pg, err := parsePage(in.ctx, "conversations", maxLimit)
	owner := conversationsOwner(in.p)
	if err == nil {
		pg.position, err = ownedPosition(pg.position, owner)
	}
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
		// The cursor is a position in the member's index, shown or not: a
		// page of entries that lead nowhere had answered an empty cursor
		// with more to come, which started the listing over.
		last = id
		c, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: in.p.Caller})
		if kiterr.CodeOf(err) == kiterr.NotFound {
			continue // left the conversation since the page was read, or an entry a kill left
		}
		if err != nil {
			return reply{}, err
		}
		out = append(out, viewConversation(c.Conversation))
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Conversations []conversationView `json:"conversations"`
		NextCursor    *string            `json:"nextCursor"`
	}{out, cursorFor("conversations", last+"|"+owner, more)})
}

// conversationsOwner names whose list GET /conversations pages: the Kit
// bot's channels (one per installation) or the member's conversations.
// Its cursor carries it, so that another caller's cursor is refused as
// one made for another list (docs/decisions.md "cursor") rather than
// starting a page at a position of someone else's list.
func conversationsOwner(p *actors.Principal) string {
	if p.TokenType == actors.CallerBot {
		return "bot:" + p.Caller.InstallationId
	}
	return "user:" + p.Caller.UserId
}

// ownedPosition is the id a cursor's position (`id|owner`) continues
// after, for a list that is its owner's (GET /conversations, GET /users).
// A position without an owner is a cursor of a build before cursors named
// it, taken as it was during a rolling upgrade; such a build reads
// `id|owner` as a position right after id, which is where the page goes on.
func ownedPosition(position, owner string) (string, error) {
	after, bound, found := strings.Cut(position, "|")
	if found && bound != owner {
		return "", errNotThisList()
	}
	return after, idPosition(after)
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
	if err == nil {
		err = idPosition(pg.position)
	}
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

// ---- users ----

func (s *Server) listUsers(in call) (reply, error) {
	// A workspace's users are its own list: another workspace's cursor is
	// refused (docs/decisions.md "cursor").
	pg, err := parsePage(in.ctx, "users", maxLimit)
	owner := in.p.Caller.WorkspaceId
	if err == nil {
		pg.position, err = ownedPosition(pg.position, owner)
	}
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
	}{out, cursorFor("users", last+"|"+owner, r.More)})
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
