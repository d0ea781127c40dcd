package api

import (
	"crypto/sha256"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// SessionCookie is the name of the web session cookie.
const SessionCookie = "kit_session"

// maxClockAdvance bounds one test-clock step (ten years).
const maxClockAdvance = 10 * 365 * 24 * 60 * 60

// operator serves the operator API of OPERATIONS.md section 2.
func (s *Server) operator(ctx *fasthttp.RequestCtx, seg []string) {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return
	}
	if h := sha256.Sum256(token); !ids.Equal(h[:], s.operatorHash[:]) {
		s.fail(ctx, kiterr.New(kiterr.InvalidToken, "the operator token is not valid"))
		return
	}
	method := string(ctx.Method())
	switch {
	case method == "POST" && route(seg, "workspaces"):
		s.opCreateWorkspace(ctx)
	case method == "POST" && route(seg, "workspaces", "*", "users"):
		s.opCreateUser(ctx, seg[1])
	case method == "DELETE" && route(seg, "users", "*"):
		s.opDeactivateUser(ctx, seg[1])
	case method == "POST" && route(seg, "workspaces", "*", "conversations"):
		s.opCreateConversation(ctx, seg[1])
	case method == "POST" && route(seg, "conversations", "*", "members"):
		s.opAddMember(ctx, seg[1])
	case method == "DELETE" && route(seg, "conversations", "*", "members", "*"):
		s.opRemoveMember(ctx, seg[1], seg[3])
	case method == "POST" && route(seg, "conversations", "*", "archive"):
		s.opArchive(ctx, seg[1])
	case method == "POST" && route(seg, "users", "*", "sessions"):
		s.opCreateSession(ctx, seg[1])
	case method == "DELETE" && route(seg, "sessions", "*"):
		s.opEndSession(ctx, seg[1])
	case method == "POST" && route(seg, "users", "*", "developer-tokens"):
		s.opCreateDeveloperToken(ctx, seg[1])
	case method == "DELETE" && route(seg, "developer-tokens", "*"):
		s.opRevokeDeveloperToken(ctx, seg[1])
	case method == "POST" && route(seg, "workspaces", "*", "installations"):
		s.opInstall(ctx, seg[1])
	case method == "DELETE" && route(seg, "installations", "*"):
		s.opUninstall(ctx, seg[1])
	case method == "POST" && route(seg, "installations", "*", "channels"):
		s.opAddChannel(ctx, seg[1])
	case method == "DELETE" && route(seg, "installations", "*", "channels", "*"):
		s.opRemoveChannel(ctx, seg[1], seg[3])
	case method == "POST" && route(seg, "installations", "*", "bot-tokens"):
		s.opCreateBotToken(ctx, seg[1])
	case method == "POST" && route(seg, "tokens", "revoke"):
		s.opRevoke(ctx)
	case method == "POST" && route(seg, "clock", "advance"):
		s.opAdvanceClock(ctx)
	case s.opWebhooks(ctx, method, seg), s.opCredentials(ctx, method, seg):
	default:
		s.fail(ctx, kiterr.Absent("route"))
	}
}

var okBody = struct {
	OK bool `json:"ok"`
}{true}

// validID answers 404 for a path id that cannot exist.
func (s *Server) validID(ctx *fasthttp.RequestCtx, what string, id ...string) bool {
	for _, v := range id {
		if !ids.Valid(v) {
			s.fail(ctx, kiterr.Absent(what))
			return false
		}
	}
	return true
}

// ownerOf finds the workspace that owns a user, session or token id.
func (s *Server) ownerOf(id, what string) (string, error) {
	if !ids.Valid(id) {
		return "", kiterr.Absent(what)
	}
	kind, owner, err := actors.Locate(s.env, id)
	if kiterr.CodeOf(err) == kiterr.NotFound || (err == nil && kind != actors.KindWorkspace) {
		return "", kiterr.Absent(what)
	}
	return owner, err
}

func (s *Server) opCreateWorkspace(ctx *fasthttp.RequestCtx) {
	var body struct {
		Name    *string `json:"name"`
		Sandbox *bool   `json:"sandbox"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = firstError(requireString("name", body.Name, 1, 80), notBlankPtr("name", body.Name))
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.WorkspaceReply](s, actors.KindWorkspace, ids.New(), &kitpb.CreateWorkspace{Name: *body.Name, Sandbox: body.Sandbox != nil && *body.Sandbox})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Workspace workspaceView `json:"workspace"`
	}{workspaceView{r.Workspace.Id, r.Workspace.Name, r.Workspace.Sandbox}})
}

func notBlankPtr(path string, v *string) error {
	if v == nil {
		return nil
	}
	return notBlank(path, *v)
}

func (s *Server) opCreateUser(ctx *fasthttp.RequestCtx, wsID string) {
	if !s.validID(ctx, "workspace", wsID) {
		return
	}
	var body struct {
		DisplayName *string `json:"displayName"`
		Email       *string `json:"email"`
		Role        *string `json:"role"`
		Password    *string `json:"password"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = firstError(
			requireString("displayName", body.DisplayName, 1, 80), notBlankPtr("displayName", body.DisplayName),
			optionalEmail(body.Email),
			requireString("role", body.Role, 1, 20),
		)
	}
	if err == nil {
		err = oneOf("role", *body.Role, "owner", "admin", "member", "guest")
	}
	if err == nil && body.Password != nil {
		// bcrypt reads at most 72 bytes; longer would silently be cut.
		if n := len(*body.Password); n < 8 || n > 72 {
			err = kiterr.Invalid("password", "must be 8 to 72 bytes")
		}
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	req := &kitpb.CreateUser{UserId: ids.New(), DisplayName: *body.DisplayName, Role: *body.Role}
	if body.Email != nil {
		req.Email = *body.Email
	}
	if body.Password != nil {
		// bcrypt is slow on purpose; it runs here, not in the workspace's
		// mailbox, so one signup does not hold up the workspace.
		h, err := bcrypt.GenerateFromPassword([]byte(*body.Password), bcrypt.DefaultCost)
		if err != nil {
			s.fail(ctx, fmt.Errorf("hash password: %w", err))
			return
		}
		req.PasswordHash = h
	}
	r, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		User userView `json:"user"`
	}{viewUser(r.User, true)})
}

func optionalEmail(v *string) error {
	if v == nil {
		return nil
	}
	if err := stringLen("email", *v, 3, 254); err != nil {
		return err
	}
	at := -1
	for i, c := range *v {
		if c == '@' {
			if at >= 0 {
				at = -2
				break
			}
			at = i
		}
		if c <= ' ' || c == 0x7f {
			return kiterr.Invalid("email", "must be an email address")
		}
	}
	if at <= 0 || at == len(*v)-1 {
		return kiterr.Invalid("email", "must be an email address")
	}
	return nil
}

func (s *Server) opDeactivateUser(ctx *fasthttp.RequestCtx, userID string) {
	ws, err := s.ownerOf(userID, "user")
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, ws, &kitpb.DeactivateUser{UserId: userID})
	}
	s.okOr(ctx, err)
}

func (s *Server) okOr(ctx *fasthttp.RequestCtx, err error) {
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, okBody)
}

func (s *Server) opCreateConversation(ctx *fasthttp.RequestCtx, wsID string) {
	if !s.validID(ctx, "workspace", wsID) {
		return
	}
	var body struct {
		Kind       *string   `json:"kind"`
		Visibility *string   `json:"visibility"`
		Name       *string   `json:"name"`
		Topic      *string   `json:"topic"`
		MemberIDs  *[]string `json:"memberIds"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = firstError(requireString("kind", body.Kind, 1, 20), requireString("visibility", body.Visibility, 1, 20))
	}
	if err == nil {
		err = firstError(oneOf("kind", *body.Kind, "channel", "dm", "group"), oneOf("visibility", *body.Visibility, "public", "private"))
	}
	if err == nil {
		err = conversationShape(*body.Kind, *body.Visibility, body.Name, body.Topic, body.MemberIDs)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	req := &kitpb.CreateConversation{
		ConversationId: ids.New(), Kind: *body.Kind, Visibility: *body.Visibility,
		Name: body.Name, Topic: body.Topic, MemberIds: *body.MemberIDs,
	}
	r, err := ask[*kitpb.ConversationReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Conversation conversationView `json:"conversation"`
	}{viewConversation(r.Conversation)})
}

// conversationShape: channels have a name; direct messages are private
// between exactly two people; groups are private. Members are unique UUIDs.
func conversationShape(kind, visibility string, name, topic *string, members *[]string) error {
	if members == nil {
		return kiterr.Invalid("memberIds", "is required")
	}
	if len(*members) > 1000 {
		return kiterr.Invalid("memberIds", "must have at most 1000 items")
	}
	seen := make(map[string]bool, len(*members))
	for i, m := range *members {
		path := "memberIds[" + itoa(i) + "]"
		if !ids.Valid(m) {
			return kiterr.Invalid(path, "must be a UUID")
		}
		if seen[m] {
			return kiterr.Invalid(path, "is listed twice")
		}
		seen[m] = true
	}
	switch kind {
	case "dm":
		if visibility != "private" {
			return kiterr.Invalid("visibility", "must be private for a dm")
		}
		if len(*members) != 2 {
			return kiterr.Invalid("memberIds", "must have exactly 2 items for a dm")
		}
	case "group":
		if visibility != "private" {
			return kiterr.Invalid("visibility", "must be private for a group")
		}
	}
	if name != nil {
		if err := firstError(stringLen("name", *name, 1, 80), notBlank("name", *name)); err != nil {
			return err
		}
	}
	if topic != nil {
		return stringLen("topic", *topic, 0, 250)
	}
	return nil
}

func (s *Server) opAddMember(ctx *fasthttp.RequestCtx, convID string) {
	if !s.validID(ctx, "conversation", convID) {
		return
	}
	var body struct {
		UserID *string `json:"userId"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = requireUUID("userId", body.UserID)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ws, err := s.ownerOf(*body.UserID, "user")
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindConversation, convID, &kitpb.AddMember{UserId: *body.UserID, UserWorkspaceId: ws})
	}
	s.okOr(ctx, err)
}

func (s *Server) opRemoveMember(ctx *fasthttp.RequestCtx, convID, userID string) {
	if !s.validID(ctx, "member", convID, userID) {
		return
	}
	_, err := ask[*kitpb.Ok](s, actors.KindConversation, convID, &kitpb.RemoveMember{UserId: userID})
	s.okOr(ctx, err)
}

func (s *Server) opArchive(ctx *fasthttp.RequestCtx, convID string) {
	if !s.validID(ctx, "conversation", convID) {
		return
	}
	if err := s.decode(ctx, &struct{}{}, maxJSONBody, true); err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, convID, &kitpb.ArchiveConversation{})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Conversation conversationView `json:"conversation"`
	}{viewConversation(r.Conversation)})
}

func (s *Server) opCreateSession(ctx *fasthttp.RequestCtx, userID string) {
	ws, err := s.ownerOf(userID, "user")
	if err != nil {
		s.fail(ctx, err)
		return
	}
	secret := ids.NewSecret(ids.SessionCookie)
	hash := ids.Hash(secret)
	r, err := ask[*kitpb.SessionReply](s, actors.KindWorkspace, ws, &kitpb.CreateSession{UserId: userID, SessionId: ids.New(), SecretHash: hash[:]})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		SessionID string `json:"sessionId"`
		Cookie    string `json:"cookie"`
	}{r.Session.Id, SessionCookie + "=" + secret})
}

func (s *Server) opEndSession(ctx *fasthttp.RequestCtx, sessionID string) {
	ws, err := s.ownerOf(sessionID, "session")
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, ws, &kitpb.EndSession{SessionId: sessionID})
	}
	s.okOr(ctx, err)
}

func (s *Server) opCreateDeveloperToken(ctx *fasthttp.RequestCtx, userID string) {
	var body struct {
		Name       *string `json:"name"`
		TTLSeconds *int64  `json:"ttlSeconds"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = firstError(requireString("name", body.Name, 1, 80), notBlankPtr("name", body.Name))
	}
	if err == nil && body.TTLSeconds != nil && (*body.TTLSeconds < 60 || *body.TTLSeconds > 365*24*3600) {
		err = kiterr.Invalid("ttlSeconds", "must be from 60 to 31536000")
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ws, err := s.ownerOf(userID, "user")
	if err != nil {
		s.fail(ctx, err)
		return
	}
	secret := ids.NewSecret(ids.DeveloperToken)
	hash := ids.Hash(secret)
	req := &kitpb.CreateDeveloperToken{UserId: userID, TokenId: ids.New(), Name: *body.Name, SecretHash: hash[:]}
	if body.TTLSeconds != nil {
		req.TtlSeconds = *body.TTLSeconds
	}
	r, err := ask[*kitpb.CredentialReply](s, actors.KindWorkspace, ws, req)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Token     string `json:"token"`
		ID        string `json:"id"`
		ExpiresAt string `json:"expiresAt"`
	}{secret, r.Credential.TokenId, isoTime(r.Credential.ExpiresAt)})
}

func (s *Server) opRevokeDeveloperToken(ctx *fasthttp.RequestCtx, tokenID string) {
	ws, err := s.ownerOf(tokenID, "developer token")
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, ws, &kitpb.RevokeCredential{TokenId: tokenID})
	}
	s.okOr(ctx, err)
}

func (s *Server) opInstall(ctx *fasthttp.RequestCtx, wsID string) {
	if !s.validID(ctx, "workspace", wsID) {
		return
	}
	var body struct {
		KitID   *string `json:"kitId"`
		Version *string `json:"version"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = requireUUID("kitId", body.KitID)
	}
	if err == nil && body.Version != nil {
		err = versionShape("version", *body.Version)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	req := &kitpb.Install{KitId: *body.KitID}
	if body.Version != nil {
		req.Version = *body.Version
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Installation installationView `json:"installation"`
	}{viewInstallation(r.Installation)})
}

func (s *Server) opUninstall(ctx *fasthttp.RequestCtx, instID string) {
	if !s.validID(ctx, "installation", instID) {
		return
	}
	_, err := ask[*kitpb.Ok](s, actors.KindInstallation, instID, &kitpb.Uninstall{})
	s.okOr(ctx, err)
}

func (s *Server) installationReply(ctx *fasthttp.RequestCtx, r *kitpb.InstallationReply, err error) {
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Installation installationView `json:"installation"`
	}{viewInstallation(r.Installation)})
}

func (s *Server) opAddChannel(ctx *fasthttp.RequestCtx, instID string) {
	if !s.validID(ctx, "installation", instID) {
		return
	}
	var body struct {
		ConversationID *string `json:"conversationId"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = requireUUID("conversationId", body.ConversationID)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.AddChannel{ConversationId: *body.ConversationID})
	s.installationReply(ctx, r, err)
}

func (s *Server) opRemoveChannel(ctx *fasthttp.RequestCtx, instID, convID string) {
	if !s.validID(ctx, "channel", instID, convID) {
		return
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.RemoveChannel{ConversationId: convID})
	s.installationReply(ctx, r, err)
}

func (s *Server) opCreateBotToken(ctx *fasthttp.RequestCtx, instID string) {
	if !s.validID(ctx, "installation", instID) {
		return
	}
	secret := ids.NewSecret(ids.BotToken)
	hash := ids.Hash(secret)
	if _, err := ask[*kitpb.CredentialReply](s, actors.KindInstallation, instID, &kitpb.CreateBotToken{SecretHash: hash[:]}); err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Token string `json:"token"`
	}{secret})
}

func (s *Server) opRevoke(ctx *fasthttp.RequestCtx) {
	var body struct {
		Token *string `json:"token"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = requireString("token", body.Token, 1, 512)
	}
	if err == nil {
		err = s.auth.Revoke(*body.Token)
	}
	s.okOr(ctx, err)
}

func (s *Server) opAdvanceClock(ctx *fasthttp.RequestCtx) {
	if s.testClock == nil {
		s.fail(ctx, kiterr.Absent("route"))
		return
	}
	var body struct {
		Seconds *float64 `json:"seconds"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil && (body.Seconds == nil || *body.Seconds < 0 || *body.Seconds > maxClockAdvance) {
		err = kiterr.Invalid("seconds", "must be a number from 0 to 315360000")
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	now := s.testClock.Advance(time.Duration(*body.Seconds * float64(time.Second)))
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Now string `json:"now"`
	}{now.UTC().Format(timeFormat)})
}
