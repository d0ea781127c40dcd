package api

import (
	"bytes"
	"crypto/sha256"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// operatorToken checks the operator token of an /ops request, before its
// route is looked up. It writes the error and returns false when the
// request may not go on.
func (s *Server) operatorToken(ctx *fasthttp.RequestCtx) bool {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return false
	}
	if h := sha256.Sum256(token); !ids.Equal(h[:], s.operatorHash[:]) {
		s.fail(ctx, kiterr.New(kiterr.InvalidToken, "the operator token is not valid"))
		return false
	}
	return true
}

// metricsToken reports whether the request carries the --metrics-token,
// which reads /metrics and nothing else (OPERATIONS.md section 8): a
// scraper needs no token that can create workspaces. Compared as the
// operator token is, by hash and in constant time.
func (s *Server) metricsToken(ctx *fasthttp.RequestCtx) bool {
	if !s.hasMetricsToken {
		return false
	}
	token, ok := bearer(ctx)
	if !ok {
		return false
	}
	h := sha256.Sum256(token)
	return ids.Equal(h[:], s.metricsHash[:])
}

// authorize authenticates the bearer token, checks its type and the scope
// of rt, and spends one token of rt's family bucket of the installation (of
// the developer token's workspace). It writes the error and returns nil
// when the request may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, rt *route) *actors.Principal {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return nil
	}
	p, err := s.auth.Authenticate(token)
	if err != nil {
		s.failRoute(ctx, rt, err)
		return nil
	}
	if p.KitSuspended {
		// The token stays valid (a resume restores it): 403, but on the
		// no-scope routes, which answer no 403 (docs/api.md "Kit state").
		if rt.scope == "" && rt.tokens == botOrUser {
			s.fail(ctx, kiterr.New(kiterr.InvalidToken, "the token's Kit is suspended"))
			return nil
		}
		s.fail(ctx, actors.ErrKitSuspended)
		return nil
	}
	if rt.tokens&tokenOf(p) == 0 {
		if rt.scope == "" && rt.tokens == botOrUser {
			// The Web API's no-scope routes answer no 403 (docs/api.md
			// "Errors"): a token of no type the Web API takes is not a
			// valid token there.
			s.fail(ctx, kiterr.New(kiterr.InvalidToken, "the Web API takes bot and user tokens"))
			return nil
		}
		s.fail(ctx, kiterr.New(kiterr.Forbidden, "this token type cannot call this method"))
		return nil
	}
	if p.TokenID != "" && (p.TokenType == actors.CallerDeveloper || p.TokenType == actors.CallerBot) {
		// lastUsedAt (GET /dev/me, the API access page): one atomic load per
		// request, one write per token and node and minute.
		if now := s.env.Clock.Now().UnixNano(); p.TouchDue(now) {
			var err error
			if p.TokenType == actors.CallerBot {
				_, err = ask[*kitpb.Ok](s, actors.KindInstallation, p.Caller.InstallationId, &kitpb.TouchBotToken{TokenId: p.TokenID, At: now})
			} else {
				_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.TouchDeveloperToken{TokenId: p.TokenID, At: now})
			}
			// lastUsedAt is the token's bookkeeping, not the request's: a
			// touch that failed (a leader change under way) fails nothing,
			// and the next is due a minute later.
			if err != nil && s.log != nil {
				s.log.Debug("record token use", "err", err)
			}
		}
	}
	if rt.scope != "" && !p.HasScope(rt.scope) {
		ctx.Response.Header.Set("X-Service-Required-Scope", rt.scope)
		s.fail(ctx, kiterr.New(kiterr.MissingScope, "the token lacks scope "+rt.scope))
		return nil
	}
	if rt.family != "" && s.limits != nil {
		owner, identity, key := familyBucket(p)
		d, err := ask[*kitpb.Decision](s, owner, identity, &kitpb.TakeToken{Bucket: string(rt.family), Key: key})
		if err != nil {
			s.failRoute(ctx, rt, err)
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

// familyBucket says where p's family buckets are kept: the installation's,
// or the developer token's in its workspace.
func familyBucket(p *actors.Principal) (owner, identity, key string) {
	if p.TokenType == actors.CallerDeveloper {
		return actors.KindWorkspace, p.Caller.WorkspaceId, p.TokenID
	}
	return actors.KindInstallation, p.Caller.InstallationId, ""
}

// giveBackFamilyToken returns the token authorize took of rt's family
// bucket when another bucket refused the request (err, a 429 of
// post_message for POST /messages): a refused request spends no bucket's
// token (docs/decisions.md "Rate limits"). Only refusals pay for it.
func (s *Server) giveBackFamilyToken(rt *route, p *actors.Principal, err error) {
	var e *kiterr.Error
	if rt.family == "" || s.limits == nil || !errors.As(err, &e) || e.Limit == nil || e.Limit.Policy == rt.family {
		return
	}
	owner, identity, key := familyBucket(p)
	if _, err := ask[*kitpb.Ok](s, owner, identity, &kitpb.ReturnToken{Bucket: string(rt.family), Key: key}); err != nil {
		// The request is refused either way; the token comes back with
		// the bucket's refill.
		s.log.Warn("return a rate-limit token", "route", routeName(rt), "err", err)
	}
}

// tokenOf is the token type of p as a member of tokens.
func tokenOf(p *actors.Principal) tokens {
	switch p.TokenType {
	case actors.CallerBot:
		return bot
	case actors.CallerUser:
		return user
	case actors.CallerDeveloper:
		return developer
	}
	return 0
}

func setRateHeaders(ctx *fasthttp.RequestCtx, d limits.Decision) {
	if d.Policy == "" {
		return
	}
	ctx.Response.Header.Set("RateLimit-Policy", d.PolicyHeader())
	ctx.Response.Header.Set("RateLimit", d.LimitHeader())
}

// bearer returns the token of an `Authorization: Bearer` header. RFC 6750
// section 2.1 separates the scheme and the token by one or more spaces.
func bearer(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	h := ctx.Request.Header.Peek("Authorization")
	if len(h) == 0 {
		return nil, false
	}
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) ||
		// Two credentials: which one is meant (a proxy may have read the
		// other) is not kitd's to guess. The first Peek's value stays valid.
		len(ctx.Request.Header.PeekAll(fasthttp.HeaderAuthorization)) > 1 {
		return []byte{}, true // a credential was sent, and it is malformed
	}
	return bytes.TrimLeft(h[len(prefix):], " "), true
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
