package api

import (
	"bytes"
	"net/netip"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/kiterr"
)

// handle is the server's handler: it serves the request, then counts it
// and logs its line (record).
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	r := served{client: s.clientOf(ctx)}
	s.dispatch(ctx, &r)
	s.record(ctx, &r)
}

// served is what record needs to know of a request once it is answered.
type served struct {
	t      target
	p      *actors.Principal // nil unless a bearer token was authenticated
	client netip.Addr        // who sent it (clientOf)
	// unread: fasthttp could not read the head (unreadable); there is
	// no route, and no time the head was read to measure from.
	unread bool
}

// dispatch finds the route, reads the body the way the route takes it,
// then serves the route on its host.
func (s *Server) dispatch(ctx *fasthttp.RequestCtx, r *served) {
	if len(ctx.Request.Header.RequestURI()) > maxURL {
		// A path of the hooks host counts as the webhook row (rowOf), as
		// every webhook URL that names nothing does.
		if bytes.HasPrefix(ctx.Path(), []byte(hostPrefix[hostHooks])) {
			r.t.host = hostHooks
		}
		// Its body, if any, is not read: the connection closes.
		s.fail(ctx, kiterr.New(kiterr.URITooLong, "request URL is longer than "+strconv.Itoa(maxURL)+" bytes"))
		ctx.SetConnectionClose()
		return
	}
	if ctx.Request.Header.Peek(ambiguousLengthHeader) != nil {
		s.refuseBody(ctx, errAmbiguousLength)
		return
	}
	r.t = resolve(ctx)
	t := &r.t
	if ctx.Request.IsBodyStream() {
		streamed, ok := s.readBody(ctx, t.route)
		if !ok {
			return
		}
		if streamed {
			defer drainBody(ctx)
		}
	}
	if l := s.peerLimitOf(t); l != nil && l.table != nil {
		k, refused := s.peerRefused(ctx, l, r.client, t.host == hostApp)
		if refused {
			return
		}
		defer s.peerAnswered(ctx, l, k)
	}
	switch t.host {
	case hostNone:
		s.fail(ctx, kiterr.Absent("route"))
	case hostApp:
		if t.route == nil {
			s.app.NotFound(ctx)
			return
		}
		if t.n > 0 {
			ctx.SetUserValue(app.PathParam, string(t.rest[t.at[0].from:t.at[0].to]))
		}
		t.route.page(s.app, ctx)
	case hostHooks:
		if t.route == nil {
			// Every way a webhook URL is unknown answers alike (hookPost).
			s.fail(ctx, actors.ErrHookNotFound)
			return
		}
		s.serve(ctx, t, nil)
	case hostMember:
		if t.route == nil {
			s.fail(ctx, kiterr.Absent("route"))
			return
		}
		sess, ok := s.memberOf(ctx)
		if !ok {
			return
		}
		s.serveMember(ctx, t, sess)
	case hostOps, hostMetrics:
		if !(t.host == hostMetrics && s.metricsToken(ctx)) && !s.operatorToken(ctx) {
			return
		}
		fallthrough
	default:
		if t.route == nil {
			s.fail(ctx, kiterr.Absent("route"))
			return
		}
		if t.route.tokens&(bot|user|developer) != 0 {
			if r.p = s.authorize(ctx, t.route); r.p == nil {
				return
			}
		}
		s.serve(ctx, t, r.p)
	}
}

// serve runs the route's handler and writes its reply or its error.
func (s *Server) serve(ctx *fasthttp.RequestCtx, t *target, p *actors.Principal) {
	s.serveCall(ctx, t, call{ctx: ctx, p: p, names: &paramNames[t.row], body: t.route.body})
}

// serveMember is serve for a member action of the session's member.
func (s *Server) serveMember(ctx *fasthttp.RequestCtx, t *target, sess *actors.WebSession) {
	s.serveCall(ctx, t, call{ctx: ctx, member: sess, names: &paramNames[t.row], body: t.route.body})
}

func (s *Server) serveCall(ctx *fasthttp.RequestCtx, t *target, in call) {
	p := in.p
	if t.n > 0 {
		// One copy of the path for all the parameters.
		path := string(t.rest)
		for i, a := range t.at[:t.n] {
			in.params[i] = path[a.from:a.to]
		}
	}
	var rep reply
	var err error
	if t.route.method == fasthttp.MethodDelete {
		// A DELETE takes no body: an empty one or a JSON object is taken,
		// anything else is 400 and nothing is deleted, as on every route
		// that takes none (docs/decisions.md "Request bodies").
		err = in.decodeOptional(&struct{}{})
	}
	if err == nil {
		rep, err = t.route.handle(s, in)
	}
	switch {
	case err != nil:
		if p != nil {
			s.giveBackFamilyToken(t.route, p, err)
		}
		s.failRoute(ctx, t.route, oneNotFound(t.host, err))
	case rep.json != nil:
		s.writeJSON(ctx, rep.status, rep.json)
	case rep.status != 0:
		s.writeBuffer(ctx, rep.status, rep.raw)
	}
}

// oneNotFound is err, or the one 404 of host's routes if err is a 404.
// docs/api.md "Surfaces and conventions": a 404 never tells absent from not visible, and the
// handlers' own messages ("file not found", "conversation not found") came
// from whichever check refused, which told the two apart (another
// workspace's file was found, then hidden; a made-up id was not). Every
// 404 of a route therefore reads the same, whatever answered it. The
// operator sees everything, so its answers keep their message: nothing is
// hidden there.
func oneNotFound(h host, err error) error {
	if kiterr.CodeOf(err) != kiterr.NotFound {
		return err
	}
	switch h {
	case hostAPI, hostDev:
		return errNotVisible
	case hostHooks:
		return actors.ErrHookNotFound
	}
	return err
}

var errNotVisible = kiterr.New(kiterr.NotFound, "not found: it does not exist or this token cannot see it")
