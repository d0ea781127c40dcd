package actors

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Lifetimes of docs/api.md "Credentials" and "Field and size limits".
const (
	BotRotationOverlap = 24 * time.Hour   // a rotated bot token keeps working this long
	UserTokenLifetime  = time.Hour        // kusr_
	CodeLifetime       = 10 * time.Minute // kcode_
)

// Kinds of credential records beyond the callers (bot, user, developer).
const (
	credCode    = "code"
	credRefresh = "refresh"
	credSession = "session"
)

// handleGrants answers the installation's authorization requests (codes,
// user tokens, refresh tokens, bot token rotation); ok is false for any
// other request. Every credential it issues is stored under its
// credentialKey and, when it belongs to an authorization, indexed under
// its grantCredentialKey, so that a replayed refresh token revokes the
// whole grant without a scan of other keys.
func (a *installationActor) handleGrants(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.RotateBotToken:
		reply, err = a.rotateBotToken(m)
	case *kitpb.IssueCode:
		reply, err = a.issueCode(m)
	case *kitpb.ExchangeCode:
		reply, err = a.exchangeCode(m)
	case *kitpb.RefreshGrant:
		reply, err = a.refresh(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// audit adds a developer log entry of the installation's Kit to b: token
// issues and refusals are the Kit developer's business (docs/api.md
// "Developer log entry"). status is the credential kind; errorCode says
// why a request was refused.
func (a *installationActor) audit(b batch, event, level, status, errorCode string) {
	e := newLogEntry(a.env, LogSourceAudit, level, event, a.id)
	e.Status, e.ErrorCode = status, errorCode
	a.env.putLog(b, partition.Of(a.id), a.inst.KitId, e)
}

// refuse logs a refused token request and returns err, the refusal.
func (a *installationActor) refuse(status, reason string, err error) (proto.Message, error) {
	b := a.env.newBatch()
	a.audit(b, "token.refused", LogLevelError, status, reason)
	if cerr := b.Commit(); cerr != nil {
		return nil, fmt.Errorf("log refused %s of %s: %w", status, a.id, cerr)
	}
	return nil, err
}

// rotateBotToken replaces a bot token: the old one keeps working for 24
// hours; a token can be rotated once (docs/api.md "Bot token").
func (a *installationActor) rotateBotToken(m *kitpb.RotateBotToken) (proto.Message, error) {
	old := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(m.OldHash), old)
	if err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	if !found || old.Kind != CallerBot || old.InstallationId != a.id || old.RevokedAt != 0 ||
		(old.ExpiresAt != 0 && nanos(now) >= old.ExpiresAt) {
		return nil, errInvalidToken
	}
	if old.RotatedAt != 0 {
		return nil, kiterr.New(kiterr.Conflict, "this bot token was already rotated; rotate with the new token")
	}
	old.RotatedAt = nanos(now)
	old.ExpiresAt = nanos(now.Add(BotRotationOverlap))
	next := &kitpb.Credential{
		Kind: CallerBot, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, BotId: a.inst.BotId,
		Scopes: slices.Clone(a.inst.BotScopes), CreatedAt: nanos(now),
	}
	// The new token first, the old one's expiry last: a kill between
	// leaves a token nobody holds, and an old one the retry rotates.
	swept, fresh, expire := a.env.newBatch(), a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepBotTokens(swept, fresh, nanos(now))
	if err != nil {
		closeAll([]batch{swept, fresh, expire})
		return nil, err
	}
	a.putBotToken(fresh, m.NewHash, next)
	put(expire, credentialKey(m.OldHash), old)
	a.audit(expire, "token.rotated", LogLevelInfo, CallerBot, "")
	if err := a.env.commitInSteps(swept, fresh, expire); err != nil {
		return nil, fmt.Errorf("rotate bot token of %s: %w", a.id, err)
	}
	a.botTokenSweep = sweep
	a.env.Invalidator.CredentialRevoked(m.OldHash)
	return &kitpb.RotateBotTokenReply{PreviousExpiresAt: old.ExpiresAt}, nil
}

// issueCode records an approved authorization as a code valid 10 minutes.
// The workspace has checked the member, the role and the redirect URI; the
// code carries the scopes the installation requests now.
func (a *installationActor) issueCode(m *kitpb.IssueCode) (proto.Message, error) {
	now := a.env.Clock.Now()
	scopes := a.inst.BotScopes
	if m.TokenType == CallerUser {
		scopes = a.inst.UserScopes
	}
	cred := &kitpb.Credential{
		Kind: credCode, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, UserId: m.UserId,
		Scopes: slices.Clone(scopes), CreatedAt: nanos(now), ExpiresAt: nanos(now.Add(CodeLifetime)),
		SessionId: m.SessionId, GrantId: m.GrantId, RedirectUri: m.RedirectUri,
		CodeChallenge: m.CodeChallenge, TokenType: m.TokenType,
	}
	swept, b := a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepGrants(swept, b, nanos(now))
	if err != nil {
		closeAll([]batch{swept, b})
		return nil, err
	}
	put(b, credentialKey(m.CodeHash), cred)
	b.Set(grantCredentialKey(a.id, m.GrantId, m.CodeHash), nil)
	if err := a.env.commitInSteps(swept, b); err != nil {
		return nil, fmt.Errorf("issue code of %s: %w", a.id, err)
	}
	a.grantSweep = sweep
	return &kitpb.Ok{}, nil
}

// BadGrantReason is the one reason given for a code or refresh token that
// does not work, whether unknown (the front end) or known but expired,
// spent, revoked or of another Kit (the installation): the answers must
// not tell which.
const BadGrantReason = "is not valid: unknown, expired, revoked or already used"

var (
	errBadCode    = kiterr.Invalid("code", BadGrantReason)
	errBadRefresh = kiterr.Invalid("refreshToken", BadGrantReason)
)

// exchangeCode spends a code once and issues what it was approved for.
func (a *installationActor) exchangeCode(m *kitpb.ExchangeCode) (proto.Message, error) {
	code := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(m.CodeHash), code)
	if err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	if !found || code.Kind != credCode || code.InstallationId != a.id || a.inst.KitId != m.KitId ||
		code.SpentAt != 0 || code.RevokedAt != 0 || nanos(now) >= code.ExpiresAt ||
		(code.TokenType == CallerBot && !HasBot(a.inst)) || // a version since dropped the bot
		(code.TokenType == CallerUser && !offersUserTokens(a.inst)) { // or oauth.userScopes
		return a.refuse("code", "invalid_code", errBadCode)
	}
	if m.RedirectUri != code.RedirectUri {
		return a.refuse("code", "redirect_uri_mismatch", kiterr.Invalid("redirectUri", "must equal the redirect_uri of the authorization"))
	}
	if code.CodeChallenge != "" {
		if m.CodeVerifier == "" {
			return a.refuse("code", "code_verifier_missing", kiterr.Invalid("codeVerifier", "is required for this authorization"))
		}
		sum := sha256.Sum256([]byte(m.CodeVerifier))
		if !ids.Equal([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(code.CodeChallenge)) {
			return a.refuse("code", "code_verifier_mismatch", kiterr.Invalid("codeVerifier", "does not match the code_challenge of the authorization"))
		}
	} else if m.CodeVerifier != "" {
		// RFC 9700 4.8.2: a verifier without a challenge is a PKCE downgrade.
		return a.refuse("code", "code_verifier_unexpected", kiterr.Invalid("codeVerifier", "was not expected: the authorization carried no code_challenge"))
	}
	// Every code was approved in a web session (a bot code by an admin):
	// it ends with that session and with its member.
	if code.TokenType == CallerUser || code.SessionId != "" {
		if _, ok, err := memberSignedIn(a.env, code, nanos(now), true); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			return a.refuse("code", "session_ended", errBadCode)
		}
	}
	code.SpentAt = nanos(now)
	// The tokens and the grant first, the code spent last: a kill between
	// leaves tokens nobody holds, and a code the retry exchanges.
	reply, err := a.grantReply(code.TokenType, code.UserId, code.Scopes)
	if err != nil {
		return nil, err
	}
	swept, b, spend := a.env.newBatch(), a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepGrants(swept, b, nanos(now))
	botSweep := a.botTokenSweep
	if err == nil && code.TokenType == CallerBot {
		botSweep, err = a.sweepBotTokens(swept, b, nanos(now))
	}
	if err != nil {
		closeAll([]batch{swept, b, spend})
		return nil, err
	}
	put(spend, credentialKey(m.CodeHash), code)
	if code.TokenType == CallerBot {
		// Tokens are stored as hashes only, so the installation's bot token
		// cannot be handed out again: each bot grant issues a new one.
		a.putBotToken(b, m.BotHash, &kitpb.Credential{
			Kind: CallerBot, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, BotId: a.inst.BotId,
			Scopes: slices.Clone(code.Scopes), CreatedAt: nanos(now), GrantId: code.GrantId,
		})
		b.Set(grantCredentialKey(a.id, code.GrantId, m.BotHash), nil)
	} else {
		a.putUserTokens(b, code, m.AccessHash, m.RefreshHash, now)
		put(b, userGrantKey(a.id, code.UserId, code.GrantId), &kitpb.UserGrant{
			GrantId: code.GrantId, UserId: code.UserId, SessionId: code.SessionId,
			CreatedAt: nanos(now), Scopes: slices.Clone(code.Scopes),
		})
		reply.ExpiresIn = int64(UserTokenLifetime / time.Second)
	}
	a.audit(spend, "token.issued", LogLevelInfo, code.TokenType, "")
	if err := a.env.commitInSteps(swept, b, spend); err != nil {
		return nil, fmt.Errorf("exchange code of %s: %w", a.id, err)
	}
	a.grantSweep, a.botTokenSweep = sweep, botSweep
	return reply, nil
}

// putUserTokens adds a user token and its refresh token of the grant of
// from (a code or a refresh token) to the batch.
func (a *installationActor) putUserTokens(b batch, from *kitpb.Credential, access, refresh []byte, now time.Time) {
	user := &kitpb.Credential{
		Kind: CallerUser, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, UserId: from.UserId,
		Scopes: slices.Clone(from.Scopes), CreatedAt: nanos(now), ExpiresAt: nanos(now.Add(UserTokenLifetime)),
		SessionId: from.SessionId, GrantId: from.GrantId,
	}
	ref := &kitpb.Credential{
		Kind: credRefresh, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, UserId: from.UserId,
		Scopes: slices.Clone(from.Scopes), CreatedAt: nanos(now), SessionId: from.SessionId, GrantId: from.GrantId,
	}
	put(b, credentialKey(access), user)
	put(b, credentialKey(refresh), ref)
	b.Set(grantCredentialKey(a.id, from.GrantId, access), nil)
	b.Set(grantCredentialKey(a.id, from.GrantId, refresh), nil)
}

// grantReply answers an exchange or a refresh with the tokens' effective
// scopes, those GET /auth/test answers (effectiveScopes).
func (a *installationActor) grantReply(tokenType, userID string, granted []string) (*kitpb.GrantReply, error) {
	scopes, err := effectiveScopes(a.env, a.inst, tokenType, granted)
	if err != nil {
		return nil, err
	}
	r := &kitpb.GrantReply{
		TokenType: tokenType, InstallationId: a.id, WorkspaceId: a.inst.WorkspaceId,
		WorkspaceName: a.inst.WorkspaceName, Scopes: scopes,
	}
	if tokenType == CallerBot {
		r.BotId = a.inst.BotId
	} else {
		r.UserId = userID
	}
	return r, nil
}

// refresh spends a refresh token once for a new user token and refresh
// token. A spent refresh token used again revokes the whole grant: every
// access and refresh token of that authorization (docs/api.md "User token and refresh token"). The
// actor answers one request at a time, so of concurrent refreshes with one
// token exactly one wins; the others are replays.
func (a *installationActor) refresh(m *kitpb.RefreshGrant) (proto.Message, error) {
	ref := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(m.RefreshHash), ref)
	if err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	if !found || ref.Kind != credRefresh || ref.InstallationId != a.id || a.inst.KitId != m.KitId {
		return a.refuse("refresh", "invalid_refresh_token", errBadRefresh)
	}
	if ref.RevokedAt != 0 {
		// A replay revoked it; a kill may have parted that revocation from
		// the grant's other credentials, which this one revokes again.
		if ref.SpentAt != 0 {
			if err := a.revokeGrant(ref.GrantId); err != nil {
				return nil, err
			}
		}
		return a.refuse("refresh", "invalid_refresh_token", errBadRefresh)
	}
	if ref.SpentAt != 0 {
		if err := a.revokeGrant(ref.GrantId); err != nil {
			return nil, err
		}
		return a.refuse("refresh", "refresh_token_replayed", errBadRefresh)
	}
	if !offersUserTokens(a.inst) {
		// Refused unspent: a version that requests user scopes again
		// brings the grant back, as authentication does its user token.
		return a.refuse("refresh", "no_user_scopes", errBadRefresh)
	}
	if _, ok, err := memberSignedIn(a.env, ref, nanos(now), true); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return a.refuse("refresh", "session_ended", errBadRefresh)
	}
	// The answer before the write: once the refresh token is spent, the
	// new tokens must reach the client.
	reply, err := a.grantReply(CallerUser, ref.UserId, ref.Scopes)
	if err != nil {
		return nil, err
	}
	reply.ExpiresIn = int64(UserTokenLifetime / time.Second)
	ref.SpentAt = nanos(now)
	// The new tokens first, the old one spent last: a kill between leaves
	// tokens nobody holds, and a retry that refreshes again.
	swept, tokens, spend := a.env.newBatch(), a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepGrants(swept, tokens, nanos(now))
	if err != nil {
		closeAll([]batch{swept, tokens, spend})
		return nil, err
	}
	a.putUserTokens(tokens, ref, m.AccessHash, m.NewRefreshHash, now)
	put(spend, credentialKey(m.RefreshHash), ref)
	a.audit(spend, "token.refreshed", LogLevelInfo, CallerUser, "")
	if err := a.env.commitInSteps(swept, tokens, spend); err != nil {
		return nil, fmt.Errorf("refresh a grant of %s: %w", a.id, err)
	}
	a.grantSweep = sweep
	return reply, nil
}

// revokeGrant revokes every credential of the grant, then tells the
// authenticators.
func (a *installationActor) revokeGrant(grantID string) error {
	prefix := grantPrefix(a.id, grantID)
	var hashes [][]byte
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		hashes = append(hashes, slices.Clone(k[len(prefix):]))
		return true
	})
	if err != nil {
		return fmt.Errorf("scan grant %s: %w", grantID, err)
	}
	now := nanos(a.env.Clock.Now())
	// The credentials first, the grant's record last (commitInSteps): a
	// revocation that a kill parted is a grant still listed, which a retry
	// revokes again, never one gone from the member's page with tokens
	// that still work.
	creds, grant := a.env.newBatch(), a.env.newBatch()
	user := "" // the member of a user grant
	for _, h := range hashes {
		cred := &kitpb.Credential{}
		found, err := a.env.loadOwn(credentialKey(h), cred)
		if err != nil {
			closeAll([]batch{creds, grant})
			return err
		}
		if found && cred.RevokedAt == 0 {
			cred.RevokedAt = now
			put(creds, credentialKey(h), cred)
		}
		if found && cred.UserId != "" {
			user = cred.UserId
		}
	}
	// The member's home page no longer lists the authorization.
	if g := (&kitpb.UserGrant{}); user != "" {
		found, err := load(a.env.Store, userGrantKey(a.id, user, grantID), g)
		if err != nil {
			closeAll([]batch{creds, grant})
			return err
		}
		if found && g.RevokedAt == 0 {
			g.RevokedAt = now
			put(grant, userGrantKey(a.id, user, grantID), g)
		}
	}
	if err := a.env.commitInSteps(creds, grant); err != nil {
		return fmt.Errorf("revoke grant %s: %w", grantID, err)
	}
	for _, h := range hashes {
		a.env.Invalidator.CredentialRevoked(h)
	}
	return nil
}
