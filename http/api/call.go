package api

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
)

// call is what a handler gets: the call, the principal of its bearer
// token (nil on routes without one) and the path parameters, which it
// reads by name (param).
type call struct {
	ctx    *fasthttp.RequestCtx
	p      *actors.Principal
	member *actors.WebSession // member actions: the signed-in member
	names  *[maxParams]string // the parameters' names, of the route's pattern
	params [maxParams]string  // their values, in the same order
	body   int                // the route's body limit
}

// param is the value of the path parameter {name} of the route's pattern,
// as net/http's Request.PathValue reads one. A name the pattern lacks is a
// mistake in the code, not in the request: it panics rather than read as
// "", and TestHandlersReadTheirRoutesParameters finds it before a request
// can.
func (in call) param(name string) string {
	if in.names != nil {
		for i, n := range in.names {
			if n == name && n != "" {
				return in.params[i]
			}
		}
	}
	panic("api: the route has no path parameter {" + name + "}")
}

// decode reads the route's JSON object body into v (decode).
func (in call) decode(v any) error { return decode(in.ctx, v, in.body, false) }

// carriesSecret marks the answer as one that carries a secret (a token, a
// signing or client secret, a webhook URL, a session's CSRF token): no
// cache may keep it. RFC 6749 5.1 asks it of token answers; the other
// secrets are worth as much.
func (in call) carriesSecret() { in.ctx.Response.Header.Set("Cache-Control", "no-store") }

// decodeOptional is decode that takes an empty body as {}.
func (in call) decodeOptional(v any) error { return decode(in.ctx, v, in.body, true) }

// reply is a handler's answer: a value encoded as JSON, or a JSON body the
// handler built in the response's own buffer (bodyBuffer), the hot answers'
// way. It is ignored when the handler returns an error.
type reply struct {
	status int
	json   any
	raw    []byte
}

// answered is the return of a handler that wrote the response itself (a
// stream of bytes, a refused body).
func answered() (reply, error) { return reply{}, nil }

func jsonReply(status int, v any) (reply, error) { return reply{status: status, json: v}, nil }

func rawReply(status int, body []byte) (reply, error) { return reply{status: status, raw: body}, nil }

var okBody = struct {
	OK bool `json:"ok"`
}{true}

// okOr answers {"ok":true} unless err.
func okOr(err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, okBody)
}

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	body, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode response", "err", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		body = []byte(`{"code":"internal_error","message":"internal error","correlationId":""}`)
	}
	ctx.SetBody(body)
}

// bodyBuffer lends the response's own pooled body buffer, empty, for a JSON
// body to be appended to; writeBuffer hands it back as the answer. The hot
// answers (messages) are built so, without allocating or copying a body.
func bodyBuffer(ctx *fasthttp.RequestCtx) []byte {
	return ctx.Response.SwapBody(nil)[:0]
}

// writeBuffer answers with a JSON body built in the buffer of bodyBuffer.
func (s *Server) writeBuffer(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SwapBody(body)
}
