package api

import (
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The operator API of OPERATIONS.md section 2: people and places (workspaces,
// users, conversations, sessions, developer tokens) and the test clock. Kits
// and installations are in operator_kits.go.

// maxClockAdvance bounds one test-clock step (ten years).
const maxClockAdvance = 10 * 365 * 24 * 60 * 60

// validID answers 404 for a path id that cannot exist.
func validID(what string, id ...string) error {
	for _, v := range id {
		if !ids.Valid(v) {
			return kiterr.Absent(what)
		}
	}
	return nil
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

// okFromOwner asks the workspace that owns id (ownerOf) for msg and
// answers {"ok":true}.
func (s *Server) okFromOwner(id, what string, msg proto.Message) (reply, error) {
	ws, err := s.ownerOf(id, what)
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, ws, msg)
	}
	return okOr(err)
}

func (s *Server) opCreateWorkspace(in call) (reply, error) {
	var body struct {
		Name    *string `json:"name"`
		Sandbox *bool   `json:"sandbox"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(input.RequireString("name", body.Name, 1, 80), plainName("name", body.Name))
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.WorkspaceReply](s, actors.KindWorkspace, ids.New(), &kitpb.CreateWorkspace{Name: *body.Name, Sandbox: body.Sandbox != nil && *body.Sandbox})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusCreated, struct {
		Workspace workspaceView `json:"workspace"`
	}{workspaceView{r.Workspace.Id, r.Workspace.Name, r.Workspace.Sandbox}})
}

// plainName checks a name given (v may be nil: its presence is checked
// apart): not blank, no control characters.
func plainName(path string, v *string) error {
	if v == nil {
		return nil
	}
	return input.FirstError(input.Plain(path, *v), input.NotBlank(path, *v))
}

func (s *Server) opCreateUser(in call) (reply, error) {
	wsID := in.param("wsId")
	if err := validID("workspace", wsID); err != nil {
		return reply{}, err
	}
	var body struct {
		DisplayName *string `json:"displayName"`
		Email       *string `json:"email"`
		Role        *string `json:"role"`
		Password    *string `json:"password"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(
			input.RequireString("displayName", body.DisplayName, 1, 80), plainName("displayName", body.DisplayName),
			optionalEmail(body.Email),
			input.RequireString("role", body.Role, 1, 20),
		)
	}
	if err == nil {
		err = input.OneOf("role", *body.Role, "owner", "admin", "member", "guest")
	}
	if err == nil && body.Password != nil {
		// bcrypt reads at most 72 bytes; longer would silently be cut.
		if n := len(*body.Password); n < 8 || n > 72 {
			err = kiterr.Invalid("password", "must be 8 to 72 bytes")
		}
	}
	if err != nil {
		return reply{}, err
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
			return reply{}, fmt.Errorf("hash password: %w", err)
		}
		req.PasswordHash = h
	}
	r, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusCreated, struct {
		User userView `json:"user"`
	}{viewUser(r.User, true)})
}

func optionalEmail(v *string) error {
	if v == nil {
		return nil
	}
	if err := input.StringLen("email", *v, 3, 254); err != nil {
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

func (s *Server) opDeactivateUser(in call) (reply, error) {
	userID := in.param("userId")
	return s.okFromOwner(userID, "user", &kitpb.DeactivateUser{UserId: userID})
}

func (s *Server) opCreateConversation(in call) (reply, error) {
	wsID := in.param("wsId")
	if err := validID("workspace", wsID); err != nil {
		return reply{}, err
	}
	var body struct {
		Kind       *string   `json:"kind"`
		Visibility *string   `json:"visibility"`
		Name       *string   `json:"name"`
		Topic      *string   `json:"topic"`
		MemberIDs  *[]string `json:"memberIds"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(input.RequireString("kind", body.Kind, 1, 20), input.RequireString("visibility", body.Visibility, 1, 20))
	}
	if err == nil {
		err = input.FirstError(input.OneOf("kind", *body.Kind, "channel", "dm", "group"), input.OneOf("visibility", *body.Visibility, "public", "private"))
	}
	if err == nil {
		err = conversationShape(*body.Kind, *body.Visibility, body.Name, body.Topic, body.MemberIDs)
	}
	if err != nil {
		return reply{}, err
	}
	req := &kitpb.CreateConversation{
		ConversationId: ids.New(), Kind: *body.Kind, Visibility: *body.Visibility,
		Name: body.Name, Topic: body.Topic, MemberIds: *body.MemberIDs,
	}
	r, err := ask[*kitpb.ConversationReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusCreated, conversationBody{viewConversation(r.Conversation)})
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
		if err := input.UUID(path, m); err != nil {
			return err
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
		if err := input.FirstError(input.StringLen("name", *name, 1, 80), plainName("name", name)); err != nil {
			return err
		}
	}
	if topic != nil {
		return input.FirstError(input.StringLen("topic", *topic, 0, 250), input.Plain("topic", *topic))
	}
	return nil
}

func (s *Server) opAddMember(in call) (reply, error) {
	convID := in.param("id")
	if err := validID("conversation", convID); err != nil {
		return reply{}, err
	}
	var body struct {
		UserID *string `json:"userId"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireUUID("userId", body.UserID)
	}
	if err != nil {
		return reply{}, err
	}
	ws, err := s.ownerOf(*body.UserID, "user")
	if err == nil {
		// Only an active user may join, as on creation (memberIds).
		var u *kitpb.UserReply
		if u, err = ask[*kitpb.UserReply](s, actors.KindWorkspace, ws, &kitpb.GetUser{UserId: *body.UserID}); err == nil && !u.User.Active {
			err = kiterr.Absent("user")
		}
	}
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindConversation, convID, &kitpb.AddMember{UserId: *body.UserID, UserWorkspaceId: ws})
	}
	return okOr(err)
}

func (s *Server) opRemoveMember(in call) (reply, error) {
	convID, userID := in.param("id"), in.param("userId")
	if err := validID("member", convID, userID); err != nil {
		return reply{}, err
	}
	_, err := ask[*kitpb.Ok](s, actors.KindConversation, convID, &kitpb.RemoveMember{UserId: userID})
	return okOr(err)
}

func (s *Server) opArchive(in call) (reply, error) {
	convID := in.param("id")
	if err := validID("conversation", convID); err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, convID, &kitpb.ArchiveConversation{})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, conversationBody{viewConversation(r.Conversation)})
}

func (s *Server) opCreateSession(in call) (reply, error) {
	userID := in.param("userId")
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	ws, err := s.ownerOf(userID, "user")
	if err != nil {
		return reply{}, err
	}
	secret := ids.NewSecret(ids.SessionCookie)
	hash := ids.Hash(secret)
	r, err := ask[*kitpb.SessionReply](s, actors.KindWorkspace, ws, &kitpb.CreateSession{UserId: userID, SessionId: ids.New(), SecretHash: hash[:]})
	if err != nil {
		return reply{}, err
	}
	in.carriesSecret()
	return jsonReply(fasthttp.StatusCreated, struct {
		SessionID string `json:"sessionId"`
		Cookie    string `json:"cookie"`
	}{r.Session.Id, app.SessionCookie + "=" + secret})
}

func (s *Server) opEndSession(in call) (reply, error) {
	sessionID := in.param("sessionId")
	return s.okFromOwner(sessionID, "session", &kitpb.EndSession{SessionId: sessionID})
}

func (s *Server) opCreateDeveloperToken(in call) (reply, error) {
	userID := in.param("userId")
	var body struct {
		Name       *string `json:"name"`
		TTLSeconds *int64  `json:"ttlSeconds"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(input.RequireString("name", body.Name, 1, 80), plainName("name", body.Name))
	}
	if err == nil && body.TTLSeconds != nil && (*body.TTLSeconds < 60 || *body.TTLSeconds > 365*24*3600) {
		err = kiterr.Invalid("ttlSeconds", "must be from 60 to 31536000")
	}
	if err != nil {
		return reply{}, err
	}
	ws, err := s.ownerOf(userID, "user")
	if err != nil {
		return reply{}, err
	}
	secret := ids.NewSecret(ids.DeveloperToken)
	hash := ids.Hash(secret)
	req := &kitpb.CreateDeveloperToken{UserId: userID, TokenId: ids.New(), Name: *body.Name, SecretHash: hash[:]}
	if body.TTLSeconds != nil {
		req.TtlSeconds = *body.TTLSeconds
	}
	r, err := ask[*kitpb.CredentialReply](s, actors.KindWorkspace, ws, req)
	if err != nil {
		return reply{}, err
	}
	in.carriesSecret()
	return jsonReply(fasthttp.StatusCreated, struct {
		Token     string `json:"token"`
		ID        string `json:"id"`
		ExpiresAt string `json:"expiresAt"`
	}{secret, r.Credential.TokenId, isoTime(r.Credential.ExpiresAt)})
}

func (s *Server) opRevokeDeveloperToken(in call) (reply, error) {
	tokenID := in.param("id")
	return s.okFromOwner(tokenID, "developer token", &kitpb.RevokeCredential{TokenId: tokenID})
}

func (s *Server) opAdvanceClock(in call) (reply, error) {
	if s.testClock == nil {
		return reply{}, kiterr.Absent("route")
	}
	var body struct {
		Seconds *float64 `json:"seconds"`
	}
	err := in.decode(&body)
	if err == nil && (body.Seconds == nil || *body.Seconds < 0 || *body.Seconds > maxClockAdvance) {
		err = kiterr.Invalid("seconds", "must be a number from 0 to 315360000")
	}
	if err != nil {
		return reply{}, err
	}
	now := s.testClock.Advance(time.Duration(*body.Seconds * float64(time.Second)))
	return jsonReply(fasthttp.StatusOK, struct {
		Now string `json:"now"`
	}{now.UTC().Format(timeFormat)})
}
