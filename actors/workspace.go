package actors

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Lifetimes of the credentials a workspace issues.
const (
	SessionLifetime        = 7 * 24 * time.Hour  // OPERATIONS.md section 3
	DeveloperTokenLifetime = 90 * 24 * time.Hour // docs/api.md "Credentials"
)

// workspaceActor owns one workspace: its people and their roles, web
// sessions, developer tokens, the developer API bucket of each token, and
// which installation each installed Kit has here, and what its
// installations get of user.* events (workspace_events.go).
type workspaceActor struct {
	env  *Env
	life lifecycle

	id      string
	ws      *kitpb.Workspace
	users   map[string]*kitpb.User
	emails  map[string]string // lower-case email -> user id
	kits    map[string]string // kit id -> installation id
	buckets bucketSet

	instEvents map[string]*kitpb.InstallationEvents // by installation id
	outbox     outbox                               // user.* events
	// sessionSweep is where and when the next sweep of expired sessions
	// starts (workspace_sessions_sweep.go).
	sessionSweep sweepCursor
	// choiceSweep is where and when the next sweep of expired sign-in
	// choices starts (workspace_signin_sweep.go).
	choiceSweep sweepCursor
}

func (a *workspaceActor) Receive(ctx actorContext) { receive(a, &a.life, a.env, ctx) }

func (a *workspaceActor) exists() bool { return a.ws != nil }

func (a *workspaceActor) activate(identity string) error {
	a.id = identity
	a.buckets.table = a.env.Limits
	a.users = make(map[string]*kitpb.User)
	a.emails = make(map[string]string)
	a.kits = make(map[string]string)
	a.instEvents = make(map[string]*kitpb.InstallationEvents)
	a.outbox.source = a.id
	ws := &kitpb.Workspace{}
	found, err := load(a.env.Store, workspaceKey(a.id), ws)
	if err != nil || !found {
		return err
	}
	a.ws = ws
	if err := scanRecords(a.env.Store, usersPrefix(a.id), func() proto.Message { return &kitpb.User{} }, func(m proto.Message) {
		u := m.(*kitpb.User)
		a.users[u.Id] = u
		if u.Email != "" {
			a.emails[normalEmail(u.Email)] = u.Id
		}
	}); err != nil {
		return err
	}
	lower := installedKitsPrefix(a.id)
	if err := a.env.Store.Scan(lower, persistence.PrefixEnd(lower), false, func(k, v []byte) bool {
		a.kits[string(k[len(lower):])] = string(v)
		return true
	}); err != nil {
		return err
	}
	return a.loadInstallationEvents()
}

func (a *workspaceActor) handle(msg proto.Message) (proto.Message, error) {
	if _, ok := msg.(*kitpb.CreateWorkspace); !ok && a.ws == nil {
		return nil, kiterr.Absent("workspace")
	}
	if reply, ok := a.buckets.answer(msg, a.env.Clock); ok {
		return reply, nil
	}
	switch m := msg.(type) {
	case *kitpb.CreateWorkspace:
		return a.create(m)
	case *kitpb.GetWorkspace:
		return &kitpb.WorkspaceReply{Workspace: a.ws}, nil
	case *kitpb.CreateUser:
		return a.createUser(m)
	case *kitpb.GetUser:
		u, ok := a.users[m.UserId]
		if !ok {
			return nil, kiterr.Absent("user")
		}
		return &kitpb.UserReply{User: u}, nil
	case *kitpb.DeactivateUser:
		return a.deactivate(m)
	case *kitpb.ListUsers:
		return a.listUsers(m)
	case *kitpb.CreateSession:
		return a.createSession(m)
	case *kitpb.EndSession:
		return a.endSession(m)
	case *kitpb.CreateDeveloperToken:
		return a.createDeveloperToken(m)
	case *kitpb.RevokeCredential:
		return a.revokeDeveloperToken(m)
	case *kitpb.Install:
		return a.install(m)
	case *kitpb.ListInstallations:
		return a.listInstallations(), nil
	case *kitpb.CreateConversation:
		return a.createConversation(m)
	case *kitpb.ForgetInstallationEvents:
		return a.forgetInstallationEvents(m)
	}
	return askConcerns(a, KindWorkspace, msg, workspaceConcerns[:])
}

// workspaceConcerns take the requests the switch of handle leaves, one
// concern (and file) each.
var workspaceConcerns = [...]concern[*workspaceActor]{
	(*workspaceActor).handleSignIn,
	(*workspaceActor).handleAuthorize,
	(*workspaceActor).handleDeveloperTokens,
}

func (a *workspaceActor) create(m *kitpb.CreateWorkspace) (proto.Message, error) {
	if a.ws != nil {
		return nil, kiterr.New(kiterr.Conflict, "workspace already exists")
	}
	ws := &kitpb.Workspace{Id: a.id, Name: m.Name, Sandbox: m.Sandbox, CreatedAt: nanos(a.env.Clock.Now())}
	b := a.env.newBatch()
	put(b, workspaceKey(a.id), ws)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("create workspace %s: %w", a.id, err)
	}
	a.ws = ws
	return &kitpb.WorkspaceReply{Workspace: ws}, nil
}

func (a *workspaceActor) createUser(m *kitpb.CreateUser) (proto.Message, error) {
	email := normalEmail(m.Email)
	if email != "" {
		if _, taken := a.emails[email]; taken {
			return nil, &kiterr.Error{Code: kiterr.EmailTaken, Message: "email: already used in this workspace", Path: "email"}
		}
	}
	u := &kitpb.User{
		Id: m.UserId, WorkspaceId: a.id, DisplayName: m.DisplayName, Email: m.Email,
		Role: m.Role, Active: true, CreatedAt: nanos(a.env.Clock.Now()), PasswordHash: m.PasswordHash,
	}
	// The index entries first, the user's record last: a kill between
	// leaves entries that lead to no user, and a workspace that creates it
	// again on a retry.
	index, b := a.env.newBatch(), a.env.newBatch()
	put(index, locatorKey(u.Id), &kitpb.Locator{Kind: KindWorkspace, Owner: a.id})
	if signsIn(u) {
		index.Set(emailUserKey(email, u.Id), []byte(a.id))
	}
	put(b, userKey(a.id, u.Id), u)
	a.emitUser(b, eventUserJoined, u)
	if err := a.commitWithEvents(index, b); err != nil {
		return nil, fmt.Errorf("create user in %s: %w", a.id, err)
	}
	a.users[u.Id] = u
	if email != "" {
		a.emails[email] = u.Id
	}
	return &kitpb.UserReply{User: u}, nil
}

func (a *workspaceActor) deactivate(m *kitpb.DeactivateUser) (proto.Message, error) {
	u, ok := a.users[m.UserId]
	if !ok {
		return nil, kiterr.Absent("user")
	}
	if !u.Active {
		// Told again: a kill of the node that deactivated the member may
		// have kept the caches from hearing, and their tokens cached on
		// another node would keep working.
		a.env.Invalidator.UserChanged(u.Id)
		return &kitpb.Ok{}, nil
	}
	next := proto.Clone(u).(*kitpb.User)
	next.Active = false
	// The sign-in entry first, the record last, as in createUser.
	index, b := a.env.newBatch(), a.env.newBatch()
	if signsIn(u) {
		index.Delete(emailUserKey(normalEmail(u.Email), u.Id))
	}
	put(b, userKey(a.id, u.Id), next)
	a.emitUser(b, eventUserUpdated, next)
	if err := a.commitWithEvents(index, b); err != nil {
		return nil, fmt.Errorf("deactivate user %s: %w", u.Id, err)
	}
	a.users[u.Id] = next
	a.env.Invalidator.UserChanged(u.Id)
	return &kitpb.Ok{}, nil
}

// listUsers lists active users in id (creation) order.
func (a *workspaceActor) listUsers(m *kitpb.ListUsers) (proto.Message, error) {
	prefix := usersPrefix(a.id)
	lower := userKey(a.id, m.AfterId)
	if m.AfterId != "" {
		lower = keyAfter(lower)
	}
	upper := persistence.PrefixEnd(prefix)
	reply := &kitpb.UsersReply{}
	err := a.env.Store.Scan(lower, upper, false, func(k, _ []byte) bool {
		u := a.users[string(k[len(prefix):])]
		if u == nil || !u.Active {
			return true
		}
		if len(reply.Users) == int(m.Limit) {
			reply.More = true
			return false
		}
		reply.Users = append(reply.Users, u)
		return true
	})
	return reply, err
}

// normalEmail is the form in which emails compare: case-insensitively, as
// the per-workspace uniqueness and the sign-in index both need.
func normalEmail(email string) string { return strings.ToLower(email) }

// signsIn reports whether u can sign in with email and password: only
// those users are in the email index (emailUserKey). Emails and passwords
// do not change once set, so creation and deactivation are the only writes
// that move a user in or out of it.
func signsIn(u *kitpb.User) bool { return u.Active && u.Email != "" && len(u.PasswordHash) > 0 }

func (a *workspaceActor) activeUser(id string) (*kitpb.User, error) {
	u, ok := a.users[id]
	if !ok || !u.Active {
		return nil, kiterr.Absent("user")
	}
	return u, nil
}

func (a *workspaceActor) createSession(m *kitpb.CreateSession) (proto.Message, error) {
	if _, err := a.activeUser(m.UserId); err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	s := &kitpb.Session{
		Id: m.SessionId, UserId: m.UserId, WorkspaceId: a.id,
		CreatedAt: nanos(now), ExpiresAt: nanos(now.Add(SessionLifetime)),
	}
	pointers, b := a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepSessions(pointers, b, nanos(now))
	var choices sweepCursor
	if err == nil {
		choices, err = a.sweepSignInChoices(pointers, b, nanos(now))
	}
	if err != nil {
		closeAll([]batch{pointers, b})
		return nil, err
	}
	put(b, sessionKey(a.id, s.Id), s)
	put(b, locatorKey(s.Id), &kitpb.Locator{Kind: KindWorkspace, Owner: a.id})
	put(b, credentialKey(m.SecretHash), &kitpb.Credential{
		Kind: "session", WorkspaceId: a.id, UserId: m.UserId, TokenId: s.Id,
		CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt,
	})
	b.Set(sessionSecretKey(a.id, s.Id), m.SecretHash)
	if err := a.env.commitInSteps(pointers, b); err != nil {
		return nil, fmt.Errorf("create session in %s: %w", a.id, err)
	}
	a.sessionSweep, a.choiceSweep = sweep, choices
	return &kitpb.SessionReply{Session: s}, nil
}

func (a *workspaceActor) endSession(m *kitpb.EndSession) (proto.Message, error) {
	s := &kitpb.Session{}
	if err := loadExisting(a.env.Store, sessionKey(a.id, m.SessionId), s, "session"); err != nil {
		return nil, err
	}
	hash, err := a.env.Store.Get(sessionSecretKey(a.id, s.Id))
	if err != nil {
		return nil, fmt.Errorf("load session secret %s: %w", s.Id, err)
	}
	if s.EndedAt != 0 {
		// Told again: a kill of the node that ended it may have kept the
		// caches from hearing.
		a.env.Invalidator.CredentialRevoked(hash)
		a.env.Invalidator.SessionEnded(s.Id)
		return &kitpb.Ok{}, nil
	}
	s.EndedAt = nanos(a.env.Clock.Now())
	// The cookie's credential goes first: the session's record is what a
	// retry looks at, and the authenticator reads the credential alone.
	revoke, end := a.env.newBatch(), a.env.newBatch()
	revoke.Delete(credentialKey(hash))
	put(end, sessionKey(a.id, s.Id), s)
	if err := a.env.commitInSteps(revoke, end); err != nil {
		return nil, fmt.Errorf("end session %s: %w", s.Id, err)
	}
	a.env.Invalidator.CredentialRevoked(hash)
	a.env.Invalidator.SessionEnded(s.Id)
	return &kitpb.Ok{}, nil
}

// install installs a Kit version here, or updates the existing
// installation to it.
func (a *workspaceActor) install(m *kitpb.Install) (proto.Message, error) {
	kit, err := cluster.Call[*kitpb.KitReply](a.env.Host, KindKit, m.KitId, &kitpb.GetKit{WorkspaceId: a.id})
	if err != nil {
		if kiterr.CodeOf(err) == kiterr.NotFound {
			return nil, kiterr.Absent("kit")
		}
		return nil, err
	}
	version, err := installable(kit, m.Version, a.id)
	if err != nil {
		return nil, err
	}
	if kit.Kit.State == KitSuspended {
		return nil, ErrKitSuspended // nor an update of its installation
	}
	instID, existing := a.kits[m.KitId]
	if existing {
		cur, err := cluster.Call[*kitpb.InstallationReply](a.env.Host, KindInstallation, instID, &kitpb.GetInstallation{})
		if err != nil {
			return nil, err
		}
		if cur.Installation.Uninstalled {
			existing = false
		}
	}
	b := a.env.newBatch()
	if !existing {
		instID = m.InstallationId
		if instID == "" {
			instID = ids.New()
		}
		b.Set(installedKitKey(a.id, m.KitId), []byte(instID))
	}
	// What the version gets of user.* events is known here before the
	// installation applies it (workspace_events.go).
	ie := installationEventsOf(instID, version.Manifest)
	if a.putInstallationEvents(b, instID, ie) || !existing {
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("record installation of %s: %w", m.KitId, err)
		}
		a.kits[m.KitId] = instID
		a.keepInstallationEvents(instID, ie)
	} else {
		b.Close()
	}
	return cluster.Call[*kitpb.InstallationReply](a.env.Host, KindInstallation, instID, &kitpb.ApplyInstall{
		WorkspaceId: a.id, WorkspaceName: a.ws.Name, Kit: kit.Kit, Version: version,
	})
}

// listInstallations lists the installation ids in creation order (they
// are UUIDv7): the installation made first takes a command that two Kits
// declare.
func (a *workspaceActor) listInstallations() *kitpb.InstallationIdsReply {
	r := &kitpb.InstallationIdsReply{InstallationIds: make([]string, 0, len(a.kits))}
	for _, inst := range a.kits {
		r.InstallationIds = append(r.InstallationIds, inst)
	}
	slices.Sort(r.InstallationIds)
	return r
}

// installable picks the version to install: the one asked for, or the
// latest published one; a workspace may install its own private Kit's
// latest version even unpublished.
func installable(kit *kitpb.KitReply, want, workspaceID string) (*kitpb.KitVersion, error) {
	own := kit.Kit.WorkspaceId == workspaceID
	if kit.Kit.Distribution == "private" && !own {
		return nil, kiterr.Absent("kit")
	}
	if want == "" {
		want = kit.Kit.LatestPublishedVersion
		if own && want == "" {
			want = kit.Kit.LatestVersion
		}
	}
	for _, v := range kit.Versions {
		if v.Version == want && (v.Published || own) {
			return v, nil
		}
	}
	return nil, kiterr.Absent("version")
}

// createConversation checks that every member is an active person of this
// workspace, then creates the conversation.
func (a *workspaceActor) createConversation(m *kitpb.CreateConversation) (proto.Message, error) {
	for i, uid := range m.MemberIds {
		if _, err := a.activeUser(uid); err != nil {
			return nil, kiterr.Invalid(fmt.Sprintf("memberIds[%d]", i), "must be an active user of this workspace")
		}
	}
	m.WorkspaceId = a.id
	return cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, m.ConversationId, m)
}
