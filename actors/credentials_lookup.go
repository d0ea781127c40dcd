package actors

import (
	"crypto/sha256"
	"fmt"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Lookups of committed records for the front end, in the manner of Locate:
// they read, never write, and answer which actor to ask.

// WebSession is a signed-in member, from the session cookie.
type WebSession struct {
	ID          string
	WorkspaceID string
	UserID      string
	ExpiresAt   int64
}

// Session returns the web session of a kit_session cookie value. Sessions
// are not cached: the app host is not on the hot path, and ending a session
// deletes its credential record, so this read is always current.
func (a *Authenticator) Session(secret []byte) (*WebSession, error) {
	if !ids.WellFormed(string(secret), ids.SessionCookie) {
		return nil, errInvalidToken
	}
	hash := sha256.Sum256(secret)
	cred := &kitpb.Credential{}
	found, err := load(a.env.Store, credentialKey(hash[:]), cred)
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	if !found || cred.Kind != credSession || cred.RevokedAt != 0 || nanos(a.env.Clock.Now()) >= cred.ExpiresAt {
		return nil, errInvalidToken
	}
	return &WebSession{ID: cred.TokenId, WorkspaceID: cred.WorkspaceId, UserID: cred.UserId, ExpiresAt: cred.ExpiresAt}, nil
}

// GrantOwner returns the installation that owns an authorization code or a
// refresh token, so that kit.access can ask it. A secret of another kind, or
// none, is absent.
func GrantOwner(env *Env, secret string) (installationID string, err error) {
	if !ids.WellFormed(secret, ids.AuthCode) && !ids.WellFormed(secret, ids.RefreshToken) {
		return "", kiterr.Absent("grant")
	}
	hash := ids.Hash(secret)
	cred := &kitpb.Credential{}
	found, err := load(env.Store, credentialKey(hash[:]), cred)
	if err != nil {
		return "", fmt.Errorf("load grant: %w", err)
	}
	if !found || (cred.Kind != credCode && cred.Kind != credRefresh) {
		return "", kiterr.Absent("grant")
	}
	return cred.InstallationId, nil
}

// KitBySlug returns the id of the Kit a slug belongs to (written once by the
// slug actor).
func KitBySlug(env *Env, slug string) (string, error) {
	owner := &kitpb.ClaimSlug{}
	found, err := load(env.Store, slugKey(slug), owner)
	if err != nil {
		return "", fmt.Errorf("load slug: %w", err)
	}
	if !found {
		return "", kiterr.Absent("kit")
	}
	return owner.KitId, nil
}
