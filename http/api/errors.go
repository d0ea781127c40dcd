package api

import (
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/kitclient"
)

// errorBody is the error body of docs/api.md "Errors", the public client's
// type.
type errorBody = kitclient.ErrorBody

// fail writes err as the error body of docs/api.md "Errors". Errors that are not domain
// errors are logged with their correlation id and answered as 500 without
// detail.
func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) { s.failRoute(ctx, nil, err) }

// failRoute is fail for a request of route rt, which names it in the log.
func (s *Server) failRoute(ctx *fasthttp.RequestCtx, rt *route, err error) {
	corr := s.correlate(ctx)
	var e *kiterr.Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "correlationId", corr, "route", routeName(rt), "err", err)
		e = kiterr.New(kiterr.Internal, "internal error; retry reads later, writes only with an Idempotency-Key")
	} else if kiterr.Unexplained(err) {
		// The answer says only "retry"; the operator learns from the
		// chain which group, leader or peer would not take the request.
		s.log.Warn("request unavailable", "correlationId", corr, "route", routeName(rt), "err", err)
	}
	s.limitHeaders(ctx, e)
	if r := e.RetryAfter(); r > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(r))
	}
	if e.Code == kiterr.InvalidToken {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="kit", error="invalid_token"`)
	}
	s.writeJSON(ctx, e.Code.Status(), errorBody{Code: string(e.Code), Message: e.Message, CorrelationID: corr})
}

// limitHeaders counts a refusal over a limit and sets its RateLimit
// headers; an error answered after a bucket's token was spent (e.Spent)
// gets that bucket's headers, and is not counted: only a 429 is a
// refusal. Nothing for another error.
func (s *Server) limitHeaders(ctx *fasthttp.RequestCtx, e *kiterr.Error) {
	l := e.Limit
	if l != nil {
		s.stats.overLimit(l.Policy)
	} else if l = e.Spent; l == nil {
		return
	}
	d := *l
	d.Rate = s.limits[d.Policy]
	setRateHeaders(ctx, d)
}

// routeName names a request in the log by its route's pattern, never by
// the path as sent: a webhook URL carries its secret, and an unknown path
// may carry anything a client typed.
func routeName(rt *route) string {
	if rt == nil {
		return "no route"
	}
	if rt.method == anyMethod {
		return rt.path // a probe: /healthz, as it was named before it was a row
	}
	return rt.method + " " + rt.path
}

// unauthenticated answers a request that carried no credential at all
// (RFC 6750 section 3: no error attribute then).
func (s *Server) unauthenticated(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="kit"`)
	s.writeJSON(ctx, kiterr.InvalidToken.Status(), errorBody{Code: string(kiterr.InvalidToken), Message: "a bearer token is required", CorrelationID: s.correlate(ctx)})
}

// correlate mints the correlation id of a request's error body and keeps
// it with the request, for its line in the log (correlationOf). Only
// failures pay for one.
func (s *Server) correlate(ctx *fasthttp.RequestCtx) string {
	corr := s.correlationID()
	ctx.SetUserValue(correlationKey{}, corr)
	return corr
}

// correlationOf is the correlation id of the request's error body, or ""
// when it had none.
func correlationOf(ctx *fasthttp.RequestCtx) string {
	corr, _ := ctx.UserValue(correlationKey{}).(string)
	return corr
}

type correlationKey struct{}
