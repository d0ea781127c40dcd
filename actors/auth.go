package actors

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Principal is what an authenticated bearer token acts as.
type Principal struct {
	Caller    *kitpb.Caller
	TokenType string   // bot, user or developer
	Scopes    []string // effective: granted at issue ∩ requested by the installed version ∩ by the Kit's latest
	KitID     string   // bot and user tokens
	KitSlug   string
	TokenID   string // developer tokens; bot tokens issued since their listing (API access page)
	SessionID string // user tokens: the web session that authorized them
	ExpiresAt int64  // unix nanoseconds; 0: no expiry
	// KitSuspended: the token's Kit is suspended (kit_state.go); the
	// token is valid, but the Web API refuses it.
	KitSuspended bool
	hash         [32]byte
	// lastTouch is when this node last recorded a use of the developer or
	// bot token (unix nanoseconds).
	lastTouch atomic.Int64
}

// TouchDue reports whether a use of the developer or bot token at now should be
// recorded: true at most once per LastUsedGranularity per cached principal,
// and only for the caller that claims the slot.
func (p *Principal) TouchDue(now int64) bool {
	last := p.lastTouch.Load()
	return now-last >= int64(LastUsedGranularity) && p.lastTouch.CompareAndSwap(last, now)
}

// HasScope reports whether the principal holds scope.
func (p *Principal) HasScope(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Authenticator turns bearer tokens into principals. Hits are served from a
// node-local cache without a hop or an allocation; a miss reads the
// credential record and asks the installation for its current scopes.
// Owners call InstallationChanged and CredentialRevoked after committing a
// change, so revocation and uninstall take effect at once.
type Authenticator struct {
	env *Env

	mu    sync.RWMutex
	cache map[[32]byte]*Principal
	epoch uint64 // bumped by every invalidation; a load that saw an older epoch is not cached
	// changed holds the credentials ("c" + hash) and web sessions ("s" +
	// id) that were revoked, rotated or ended lately, with when. In a
	// cluster the change reaches every node before it is answered
	// (server/clusternode), but a node's replica of the credential may apply
	// it a moment later: a load of one of them first catches the replica
	// up with its leader (Env.Reads). Kept for changedTTL.
	changed map[string]int64
}

// changedTTL outlasts any replica's lag behind its leader: a replica
// further behind has lost its lease and answers nothing.
const changedTTL = int64(time.Minute)

// NewAuthenticator returns an empty authenticator over env.
func NewAuthenticator(env *Env) *Authenticator {
	return &Authenticator{env: env, cache: make(map[[32]byte]*Principal), changed: make(map[string]int64)}
}

// errInvalidToken is the one answer for every token that does not work.
var errInvalidToken = kiterr.New(kiterr.InvalidToken, "the token is missing, malformed, expired or revoked")

// maxCached bounds the cache; past it the cache starts over (cheap, and
// tokens are re-read on their next use).
const maxCached = 1 << 20

// Authenticate returns the principal of token.
func (a *Authenticator) Authenticate(token []byte) (*Principal, error) {
	hash := sha256.Sum256(token)
	now := nanos(a.env.Clock.Now())
	a.mu.RLock()
	p, ok := a.cache[hash]
	epoch := a.epoch
	a.mu.RUnlock()
	if ok {
		if p.ExpiresAt != 0 && now >= p.ExpiresAt {
			return nil, errInvalidToken
		}
		return p, nil
	}
	p, err := a.load(token, hash, now)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.epoch == epoch {
		if len(a.cache) >= maxCached {
			a.cache = make(map[[32]byte]*Principal)
		}
		a.cache[hash] = p
	}
	a.mu.Unlock()
	return p, nil
}

func (a *Authenticator) load(token []byte, hash [32]byte, now int64) (*Principal, error) {
	s := string(token)
	if !ids.WellFormed(s, ids.BotToken) && !ids.WellFormed(s, ids.UserToken) && !strings.HasPrefix(s, ids.DeveloperToken) {
		return nil, errInvalidToken
	}
	cred, found, err := a.credential(hash, now)
	if err != nil {
		return nil, err
	}
	if !found || cred.RevokedAt != 0 || (cred.ExpiresAt != 0 && now >= cred.ExpiresAt) {
		return nil, errInvalidToken
	}
	if cred.SessionId != "" && a.env.Reads != nil && a.changedLately("s"+cred.SessionId, now) {
		if err := a.env.catchUpFor(sessionKey(cred.WorkspaceId, cred.SessionId)); err != nil {
			return nil, fmt.Errorf("load session: %w", err)
		}
	}
	p := &Principal{TokenType: cred.Kind, ExpiresAt: cred.ExpiresAt, TokenID: cred.TokenId, SessionID: cred.SessionId, hash: hash}
	switch cred.Kind {
	case CallerDeveloper:
		// A developer token acts as its member: it ends with the member.
		u, err := cluster.Call[*kitpb.UserReply](a.env.Host, KindWorkspace, cred.WorkspaceId, &kitpb.GetUser{UserId: cred.UserId})
		if kiterr.CodeOf(err) == kiterr.NotFound || (err == nil && !u.User.Active) {
			return nil, errInvalidToken
		}
		if err != nil {
			return nil, fmt.Errorf("load member %s: %w", cred.UserId, err)
		}
		p.Caller = &kitpb.Caller{Kind: CallerDeveloper, WorkspaceId: cred.WorkspaceId, UserId: cred.UserId}
		return p, nil
	case CallerUser:
		// A user token ends with the web session that authorized it (and
		// with its member); SessionEnded drops cached ones at once.
		ends, ok, err := memberSignedIn(a.env, cred, now, a.changedLately("u"+cred.UserId, now))
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", cred.SessionId, err)
		}
		if !ok {
			return nil, errInvalidToken
		}
		if p.ExpiresAt == 0 || (ends != 0 && ends < p.ExpiresAt) {
			p.ExpiresAt = ends // 0 means "no expiry", so min would lose the session's end
		}
	case CallerBot:
	default:
		return nil, errInvalidToken
	}
	inst, err := cluster.Call[*kitpb.InstallationReply](a.env.Host, KindInstallation, cred.InstallationId, &kitpb.GetInstallation{})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, errInvalidToken
	}
	if err != nil {
		return nil, fmt.Errorf("load installation %s: %w", cred.InstallationId, err)
	}
	in := inst.Installation
	if in.Uninstalled || (cred.Kind == CallerBot && !HasBot(in)) || (cred.Kind == CallerUser && !offersUserTokens(in)) {
		// A bot token acts as the Kit bot, a user token as the member for
		// the Kit's user scopes: each works while the installed version
		// has one, as a scope works while the version requests it.
		return nil, errInvalidToken
	}
	if p.Scopes, err = effectiveScopes(a.env, in, cred.Kind, cred.Scopes); err != nil {
		return nil, err
	}
	if p.KitSuspended, err = a.env.KitSuspended(in.KitId); err != nil {
		return nil, err
	}
	p.KitID, p.KitSlug = in.KitId, in.KitSlug
	p.Caller = &kitpb.Caller{
		Kind: cred.Kind, WorkspaceId: in.WorkspaceId, InstallationId: in.Id,
		BotId: cred.BotId, UserId: cred.UserId, Interactive: in.Interactive,
	}
	return p, nil
}

// credential loads the credential record of the secret whose hash is
// hash, caught up with its leader if it changed lately: this node's
// replica may not have applied the change yet.
func (a *Authenticator) credential(hash [32]byte, now int64) (*kitpb.Credential, bool, error) {
	cred := &kitpb.Credential{}
	found, err := a.env.loadIndex(credentialKey(hash[:]), cred)
	if err != nil {
		return nil, false, fmt.Errorf("load credential: %w", err)
	}
	if found && a.env.Reads != nil && a.changedLately("c"+string(hash[:]), now) {
		if err := a.env.catchUpFor(credentialKey(hash[:])); err != nil {
			return nil, false, fmt.Errorf("load credential: %w", err)
		}
		if found, err = a.env.loadIndex(credentialKey(hash[:]), cred); err != nil {
			return nil, false, fmt.Errorf("load credential: %w", err)
		}
	}
	return cred, found, nil
}

// memberActive reports whether the member is an active user of the
// workspace, caught up with its leader if the member changed lately.
func (a *Authenticator) memberActive(workspaceID, userID string, now int64) (bool, error) {
	if a.env.Reads != nil && a.changedLately("u"+userID, now) {
		if err := a.env.catchUpFor(userKey(workspaceID, userID)); err != nil {
			return false, fmt.Errorf("load member %s: %w", userID, err)
		}
	}
	u := &kitpb.User{}
	found, err := a.env.loadIndex(userKey(workspaceID, userID), u)
	if err != nil {
		return false, fmt.Errorf("load member %s: %w", userID, err)
	}
	return found && u.Active, nil
}

// effectiveScopes are the scopes granted that the installed version of
// in and the Kit's latest version both request, for a token of kind (bot
// or user): a version that drops a scope takes it from every token at
// once, one that adds a scope gives it to none before an update.
func effectiveScopes(env *Env, in *kitpb.Installation, kind string, granted []string) ([]string, error) {
	latest, err := latestScopes(env, in.KitId)
	if err != nil {
		return nil, fmt.Errorf("load the latest scopes of kit %s: %w", in.KitId, err)
	}
	installed, newest := in.BotScopes, latest.BotScopes
	if kind == CallerUser {
		installed, newest = in.UserScopes, latest.UserScopes
	}
	scopes := []string{}
	for _, s := range granted {
		if slices.Contains(installed, s) && slices.Contains(newest, s) {
			scopes = append(scopes, s)
		}
	}
	return scopes, nil
}

// latestScopes asks the Kit's actor for the scopes of its latest version.
// A leader of a build before GetLatestScopes (in a rolling upgrade)
// refuses a message type it does not know, which had failed every
// request of the Kit's tokens through an upgraded node: they are then
// worked out here from the Kit and its versions, which every build
// answers (docs/cluster.md "A rolling upgrade across the thirty-third
// session").
func latestScopes(env *Env, kitID string) (*kitpb.LatestScopesReply, error) {
	return LatestScopes(env.Host, kitID)
}

// LatestScopes is latestScopes for a node's other parts: the sender
// gives events as the Kit bot reads them (docs/deliveries.md "User
// events").
func LatestScopes(host *cluster.Host, kitID string) (*kitpb.LatestScopesReply, error) {
	latest, err := cluster.Call[*kitpb.LatestScopesReply](host, KindKit, kitID, &kitpb.GetLatestScopes{})
	if !errors.Is(err, peer.ErrRefused) {
		return latest, err
	}
	k, err := cluster.Call[*kitpb.KitReply](host, KindKit, kitID, &kitpb.GetKit{})
	if err != nil {
		return nil, err
	}
	return scopesOfLatest(k.Kit, k.Versions)
}

// KitVersionsChanged drops every cached principal of the Kit's
// installations: the Kit's latest version limits their scopes.
func (a *Authenticator) KitVersionsChanged(kitID string) {
	a.dropWhere(func(p *Principal) bool { return p.KitID != "" && p.KitID == kitID })
}

// KitStateChanged drops the node's word on the Kit's state, then every
// cached principal of its installations: a suspension refuses their
// tokens at once, a resume has them work again.
func (a *Authenticator) KitStateChanged(kitID string) {
	a.env.kitStates.forget(kitID)
	a.KitVersionsChanged(kitID)
}

// InstallationChanged drops every cached principal of the installation.
func (a *Authenticator) InstallationChanged(installationID string) {
	a.dropWhere(func(p *Principal) bool { return p.Caller.InstallationId == installationID })
}

// UserChanged drops every cached principal acting as the member.
func (a *Authenticator) UserChanged(userID string) {
	a.mu.Lock()
	a.change("u" + userID) // the next load reads the member caught up
	a.mu.Unlock()
	a.dropWhere(func(p *Principal) bool { return p.Caller.UserId == userID })
}

// changedLately reports whether key changed within changedTTL of now.
func (a *Authenticator) changedLately(key string, now int64) bool {
	a.mu.RLock()
	at, ok := a.changed[key]
	a.mu.RUnlock()
	return ok && now-at < changedTTL
}

// change records that key changed now, forgetting changes past
// changedTTL; a.mu is held.
func (a *Authenticator) change(key string) {
	now := nanos(a.env.Clock.Now())
	for k, at := range a.changed {
		if now-at >= changedTTL {
			delete(a.changed, k)
		}
	}
	a.changed[key] = now
}

// SessionEnded drops every cached principal authorized in the web session.
func (a *Authenticator) SessionEnded(sessionID string) {
	a.mu.Lock()
	a.change("s" + sessionID)
	a.mu.Unlock()
	a.dropWhere(func(p *Principal) bool { return p.SessionID == sessionID })
}

// dropWhere drops the cached principals that match. Invalidations are rare
// next to lookups, so a scan of the cache is cheaper than keeping indexes
// on every lookup path.
func (a *Authenticator) dropWhere(match func(*Principal) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.epoch++
	for h, p := range a.cache {
		if match(p) {
			delete(a.cache, h)
		}
	}
}

// CredentialRevoked drops the cached principal of one credential.
func (a *Authenticator) CredentialRevoked(hash []byte) {
	var h [32]byte
	copy(h[:], hash)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.epoch++
	delete(a.cache, h)
	a.change("c" + string(h[:]))
}

// Revoke revokes any bearer credential by its secret: the owner of the
// credential records the revocation.
func (a *Authenticator) Revoke(token string) error {
	hash := sha256.Sum256([]byte(token))
	cred := &kitpb.Credential{}
	found, err := a.env.loadIndex(credentialKey(hash[:]), cred)
	if err != nil {
		return fmt.Errorf("load credential: %w", err)
	}
	if !found {
		return kiterr.Absent("token")
	}
	switch cred.Kind {
	case CallerBot, CallerUser, credRefresh, credCode:
		_, err = cluster.Call[*kitpb.Ok](a.env.Host, KindInstallation, cred.InstallationId, &kitpb.RevokeCredential{SecretHash: hash[:]})
	case CallerDeveloper:
		_, err = cluster.Call[*kitpb.Ok](a.env.Host, KindWorkspace, cred.WorkspaceId, &kitpb.RevokeCredential{SecretHash: hash[:]})
	case credSession:
		_, err = cluster.Call[*kitpb.Ok](a.env.Host, KindWorkspace, cred.WorkspaceId, &kitpb.EndSession{SessionId: cred.TokenId})
	default:
		return kiterr.Absent("token")
	}
	return err
}
