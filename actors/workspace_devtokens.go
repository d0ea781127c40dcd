package actors

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Developer tokens (docs/api.md "Credentials"): a workspace issues them to its
// members and keeps each token's hash by token id (developerTokenKey); the
// credential record says the rest.

func (a *workspaceActor) createDeveloperToken(m *kitpb.CreateDeveloperToken) (proto.Message, error) {
	if _, err := a.activeUser(m.UserId); err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	ttl := DeveloperTokenLifetime
	if m.TtlSeconds > 0 {
		ttl = time.Duration(m.TtlSeconds) * time.Second
	}
	cred := &kitpb.Credential{
		Kind: CallerDeveloper, WorkspaceId: a.id, UserId: m.UserId, TokenId: m.TokenId, Name: m.Name,
		CreatedAt: nanos(now), ExpiresAt: nanos(now.Add(ttl)),
	}
	b := a.env.newBatch()
	put(b, credentialKey(m.SecretHash), cred)
	b.Set(developerTokenKey(a.id, m.TokenId), m.SecretHash)
	put(b, locatorKey(m.TokenId), &kitpb.Locator{Kind: KindWorkspace, Owner: a.id})
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("create developer token in %s: %w", a.id, err)
	}
	return &kitpb.CredentialReply{Credential: cred}, nil
}

func (a *workspaceActor) revokeDeveloperToken(m *kitpb.RevokeCredential) (proto.Message, error) {
	hash := m.SecretHash
	if m.TokenId != "" {
		h, err := a.env.Store.Get(developerTokenKey(a.id, m.TokenId))
		if err != nil {
			return nil, kiterr.Absent("developer token")
		}
		hash = h
	}
	cred := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(hash), cred)
	if err != nil {
		return nil, err
	}
	if !found || cred.WorkspaceId != a.id {
		return nil, kiterr.Absent("token")
	}
	if cred.RevokedAt == 0 {
		cred.RevokedAt = nanos(a.env.Clock.Now())
		b := a.env.newBatch()
		put(b, credentialKey(hash), cred)
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("revoke developer token: %w", err)
		}
	}
	a.env.Invalidator.CredentialRevoked(hash)
	return &kitpb.Ok{}, nil
}

// handleDeveloperTokens answers the workspace's requests about its
// developer tokens beyond issue and revocation; ok is false for any other
// request.
func (a *workspaceActor) handleDeveloperTokens(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.GetDeveloperToken:
		r, err := a.developerToken(m.TokenId)
		return r, true, err
	case *kitpb.TouchDeveloperToken:
		r, err := a.touchDeveloperToken(m)
		return r, true, err
	}
	return nil, false, nil
}

func (a *workspaceActor) developerToken(tokenID string) (*kitpb.DeveloperTokenReply, error) {
	_, cred, err := a.loadDeveloperToken(tokenID)
	if err != nil {
		return nil, err
	}
	return &kitpb.DeveloperTokenReply{Credential: cred, Sandbox: a.ws.Sandbox}, nil
}

// LastUsedGranularity is how stale a developer token's lastUsedAt may be:
// each node records a use at most this often per token, so tracking costs
// one small write per token and minute, not one per request.
const LastUsedGranularity = time.Minute

func (a *workspaceActor) touchDeveloperToken(m *kitpb.TouchDeveloperToken) (proto.Message, error) {
	hash, cred, err := a.loadDeveloperToken(m.TokenId)
	if err != nil {
		return nil, err
	}
	if err := recordUse(a.env, hash, cred, m.At); err != nil {
		return nil, fmt.Errorf("record use of developer token %s: %w", m.TokenId, err)
	}
	return &kitpb.Ok{}, nil
}

// recordUse sets the last use of the credential stored under hash to at,
// unless a later use is recorded already (touches from several nodes
// arrive in any order).
func recordUse(env *Env, hash []byte, cred *kitpb.Credential, at int64) error {
	if at <= cred.LastUsedAt {
		return nil
	}
	cred.LastUsedAt = at
	b := env.newBatch()
	put(b, credentialKey(hash), cred)
	return b.Commit()
}

func (a *workspaceActor) loadDeveloperToken(tokenID string) (hash []byte, cred *kitpb.Credential, err error) {
	hash, err = a.env.Store.Get(developerTokenKey(a.id, tokenID))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil, kiterr.Absent("developer token")
	}
	if err != nil {
		return nil, nil, err
	}
	cred = &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(hash), cred)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, kiterr.Absent("developer token")
	}
	return hash, cred, nil
}
