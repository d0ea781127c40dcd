package actors

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// What the API access page and the member's home page list
// (docs/decisions.md "Home and API access pages"):
// the installation's bot tokens, its webhooks and the member's own
// authorizations. Credentials are stored under the hash of their secret
// only, which nothing can list, so the installation keeps two indexes of
// its own: botTokenKey (token id → hash) for every bot token it issues,
// and userGrantKey for every user authorization exchanged. Tokens issued
// before these indexes existed keep working but are not listed.

// handleAPIAccess answers the listing requests of the app host; ok is false
// for any other request.
func (a *installationActor) handleAPIAccess(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.ListBotTokens:
		reply, err = a.listBotTokens()
	case *kitpb.TouchBotToken:
		reply, err = a.touchBotToken(m)
	case *kitpb.ListWebhooks:
		reply, err = a.listWebhooks()
	case *kitpb.ListUserGrants:
		reply, err = a.listUserGrants(m)
	case *kitpb.RevokeUserGrant:
		reply, err = a.revokeUserGrant(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// putBotToken adds a new bot token to b: its credential, under a fresh
// token id that the API access page names it by.
func (a *installationActor) putBotToken(b batch, hash []byte, cred *kitpb.Credential) {
	cred.TokenId = ids.New()
	put(b, credentialKey(hash), cred)
	b.Set(botTokenKey(a.id, cred.TokenId), hash)
}

func (a *installationActor) botTokenHash(tokenID string) ([]byte, error) {
	if !ids.Valid(tokenID) {
		return nil, kiterr.Absent("token")
	}
	hash, err := a.env.Store.Get(botTokenKey(a.id, tokenID))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, kiterr.Absent("token")
	}
	if err != nil {
		return nil, fmt.Errorf("load bot token %s of %s: %w", tokenID, a.id, err)
	}
	return hash, nil
}

// listBotTokens lists the bot tokens that still work, oldest first (token
// ids are UUIDv7). A rotated token is listed until its overlap ends.
func (a *installationActor) listBotTokens() (proto.Message, error) {
	prefix := botTokensPrefix(a.id)
	var hashes [][]byte
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
		hashes = append(hashes, append([]byte(nil), v...))
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("list bot tokens of %s: %w", a.id, err)
	}
	now := nanos(a.env.Clock.Now())
	reply := &kitpb.BotTokensReply{}
	caughtUp := map[partition.ID]bool{}
	for _, h := range hashes {
		// A record found is not caught up by itself, and this node's
		// replica of its partition may not have applied a revocation or a
		// rotation its leader answered: the page listed a revoked token
		// (TestClusterRevokedBotTokenLeavesTheAccessPage).
		if p, _ := partition.OfKey(credentialKey(h)); !caughtUp[p] {
			if err := a.env.catchUpFor(credentialKey(h)); err != nil {
				return nil, fmt.Errorf("list bot tokens of %s: %w", a.id, err)
			}
			caughtUp[p] = true
		}
		cred := &kitpb.Credential{}
		found, err := a.env.loadIndex(credentialKey(h), cred)
		if err != nil {
			return nil, err
		}
		if !found || cred.RevokedAt != 0 || (cred.ExpiresAt != 0 && now >= cred.ExpiresAt) {
			continue
		}
		reply.Tokens = append(reply.Tokens, &kitpb.BotToken{
			Id: cred.TokenId, CreatedAt: cred.CreatedAt, LastUsedAt: cred.LastUsedAt, ExpiresAt: cred.ExpiresAt,
		})
	}
	return reply, nil
}

// touchBotToken records a use of a bot token; the front end sends it at
// most once per LastUsedGranularity per token and node.
func (a *installationActor) touchBotToken(m *kitpb.TouchBotToken) (proto.Message, error) {
	hash, err := a.botTokenHash(m.TokenId)
	if err != nil {
		return nil, err
	}
	cred := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(hash), cred)
	if err != nil {
		return nil, err
	}
	if !found {
		return &kitpb.Ok{}, nil
	}
	if err := recordUse(a.env, hash, cred, m.At); err != nil {
		return nil, fmt.Errorf("record use of bot token %s: %w", m.TokenId, err)
	}
	return &kitpb.Ok{}, nil
}

// listWebhooks lists the installation's webhooks with the state their
// actors hold, oldest first.
func (a *installationActor) listWebhooks() (proto.Message, error) {
	refs, err := a.webhookRefs()
	if err != nil {
		return nil, err
	}
	reply := &kitpb.WebhooksReply{}
	for _, r := range refs {
		h, err := a.webhookNow(r)
		if err != nil {
			return nil, err
		}
		if h == nil {
			continue // stored by no webhook actor: a crash before its URL was shown
		}
		w := proto.Clone(h).(*kitpb.Webhook)
		w.SecretHash = nil
		reply.Webhooks = append(reply.Webhooks, w)
	}
	return reply, nil
}

// listUserGrants lists the member's authorizations that still work: not
// revoked, and given in a web session that has not ended (user tokens end
// with it).
func (a *installationActor) listUserGrants(m *kitpb.ListUserGrants) (proto.Message, error) {
	var grants []*kitpb.UserGrant
	err := scanRecords(a.env.Store, userGrantsPrefix(a.id, m.UserId), func() proto.Message { return &kitpb.UserGrant{} }, func(g proto.Message) {
		grants = append(grants, g.(*kitpb.UserGrant))
	})
	if err != nil {
		return nil, fmt.Errorf("list grants of %s: %w", a.id, err)
	}
	now := nanos(a.env.Clock.Now())
	reply := &kitpb.UserGrantsReply{}
	caughtUp := false // one catch-up of the workspace's partition serves every grant
	for _, g := range grants {
		if g.RevokedAt != 0 {
			continue
		}
		_, live, err := memberSignedIn(a.env, &kitpb.Credential{WorkspaceId: a.inst.WorkspaceId, UserId: g.UserId, SessionId: g.SessionId}, now, !caughtUp)
		caughtUp = true
		if err != nil {
			return nil, err
		}
		if live {
			reply.Grants = append(reply.Grants, g)
		}
	}
	return reply, nil
}

// revokeUserGrant revokes one of the member's authorizations: every access
// and refresh token of it, at once.
func (a *installationActor) revokeUserGrant(m *kitpb.RevokeUserGrant) (proto.Message, error) {
	g := &kitpb.UserGrant{}
	if err := loadExisting(a.env.Store, userGrantKey(a.id, m.UserId, m.GrantId), g, "authorization"); err != nil {
		return nil, err
	}
	// revokeGrant marks the grant revoked too (it is how a replayed
	// refresh token ends it). A grant revoked already is revoked again,
	// which writes nothing: it tells the authenticators again, which a
	// kill of the node that revoked it may have kept from hearing.
	if err := a.revokeGrant(m.GrantId); err != nil {
		return nil, err
	}
	if g.RevokedAt != 0 {
		return &kitpb.Ok{}, nil
	}
	b := a.env.newBatch()
	a.audit(b, "grant.revoked", LogLevelInfo, CallerUser, "")
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("log revoked grant %s of %s: %w", m.GrantId, a.id, err)
	}
	return &kitpb.Ok{}, nil
}
