package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/http/internal/peerlimit"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
)

// peerEntries is how many source addresses each per-address table counts
// at once (about 44 bytes each, 700 KiB a table, allocated at start). An
// address that fails takes an entry; when a table is full, the address
// that failed longest ago is forgotten (docs/decisions.md, "Rate limits").
const peerEntries = 1 << 14

// peerLimit is the per-source-address bucket of an unauthenticated route
// (issue 17): the answers that spend it, and the table that counts them.
type peerLimit struct {
	table *peerlimit.Table
	fails func(status int) bool
}

// newPeerLimits makes the tables of t's per-address rows; with limits off
// (t nil) there are none.
func newPeerLimits(t limits.Table) (hooks, kitAccess peerLimit) {
	if t == nil {
		return
	}
	hooks = peerLimit{peerlimit.New(t[limits.WebhookNotFound], peerEntries), func(status int) bool {
		return status == fasthttp.StatusNotFound // every URL that is not a live webhook's
	}}
	kitAccess = peerLimit{peerlimit.New(t[limits.KitAccessFailure], peerEntries), func(status int) bool {
		return status >= 400 && status < 500 && status != fasthttp.StatusTooManyRequests
	}}
	return
}

// kitAccessPath is the one Web API route without a token whose failures
// are counted per source address.
const kitAccessPath = "/api/v1/oauth/kit.access"

// peerLimitOf is the per-source-address bucket a request to t spends when it
// fails, or nil.
func (s *Server) peerLimitOf(t *target) *peerLimit {
	switch {
	case t.host == hostHooks:
		return &s.hookPeers
	case t.host == hostAPI && t.route != nil && t.route.path == kitAccessPath:
		return &s.kitAccessPeers
	}
	return nil
}

// peerRefused answers 429 when the TCP peer's bucket of l is empty: the
// address is refused, whatever it asks, until a token is back, so that a
// scanner cannot go on at full speed with requests that look valid. The
// address is the connection's, never a header's (no X-Forwarded-For: kitd
// has no trusted-proxy setting). It reads one atomic value unless an
// address near this one was refused lately; it allocates nothing.
func (s *Server) peerRefused(ctx *fasthttp.RequestCtx, l *peerLimit) (peerlimit.Key, bool) {
	k := peerlimit.KeyOf(ctx.RemoteIP())
	d, ok := l.table.Check(k, s.env.Clock.Now())
	if !ok {
		s.fail(ctx, kiterr.OverLimit(d))
	}
	return k, !ok
}

// peerAnswered spends a token of the peer's bucket if the answer was a
// failure; a success never does.
func (s *Server) peerAnswered(ctx *fasthttp.RequestCtx, l *peerLimit, k peerlimit.Key) {
	if l.fails(ctx.Response.StatusCode()) {
		l.table.Fail(k, s.env.Clock.Now())
	}
}
