package api

import (
	"net/netip"

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

// peerLimit is a per-source-address bucket: the answers that spend it,
// and the table that counts them.
type peerLimit struct {
	table *peerlimit.Table
	fails func(status int) bool
}

// peerFailures says which answers spend each per-address bucket that a
// route row may name (routes.go, the peers column).
var peerFailures = map[limits.Name]func(status int) bool{
	// Every URL of the hooks host that is not a live webhook's.
	limits.WebhookNotFound: func(status int) bool { return status == fasthttp.StatusNotFound },
	// Every refused exchange; a 429 is the bucket's own answer.
	limits.KitAccessFailure: func(status int) bool {
		return status >= 400 && status < 500 && status != fasthttp.StatusTooManyRequests
	},
	// Every failed sign-in (a wrong email, password or choice).
	limits.SignInFailure: func(status int) bool { return status == fasthttp.StatusUnauthorized },
}

// newPeerLimits makes a table for each per-address bucket of t; with limits
// off (t nil) there are none.
func newPeerLimits(t limits.Table) map[limits.Name]*peerLimit {
	if t == nil {
		return nil
	}
	peers := make(map[limits.Name]*peerLimit, len(peerFailures))
	for name, fails := range peerFailures {
		peers[name] = &peerLimit{peerlimit.New(t[name], peerEntries), fails}
	}
	return peers
}

// peerLimitOf is the per-source-address bucket a request to t spends when it
// fails, or nil: its row's. A path of the hooks host that matches no row is
// a webhook URL that names nothing (hookPost answers it alike), so it
// spends the webhook row's.
func (s *Server) peerLimitOf(t *target) *peerLimit {
	rt := t.route
	if rt == nil && t.host == hostHooks {
		rt = s.hookRoute
	}
	if rt == nil || rt.peers == "" {
		return nil
	}
	return s.peers[rt.peers]
}

// clientOf is the address a request comes from (http/clientaddr): the
// TCP peer's, or behind a trusted proxy the client's its X-Forwarded-For
// names. The one place the front end derives it: the per-address buckets
// and the request line take it from here. It allocates nothing.
func (s *Server) clientOf(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !s.proxies.Contains(peer) {
		return peer // the headers are not even looked up
	}
	return s.proxies.Client(peer, ctx.Request.Header.PeekAll("X-Forwarded-For"))
}

// peerRefused answers 429 when client's bucket of l is empty: the address
// is refused, whatever it asks, until a token is back, so that a scanner
// cannot go on at full speed with requests that look valid. It reads one
// atomic value unless an address near this one was refused lately; it
// allocates nothing. With page (the app host's routes) the 429 is an
// error page, with the headers an API answer would carry.
func (s *Server) peerRefused(ctx *fasthttp.RequestCtx, l *peerLimit, client netip.Addr, page bool) (peerlimit.Key, bool) {
	k := peerlimit.KeyOf(client)
	d, ok := l.table.Check(k, s.env.Clock.Now())
	switch {
	case ok:
	case page:
		e := kiterr.OverLimit(d)
		s.limitHeaders(ctx, e)
		s.app.Fail(ctx, e)
	default:
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
