package api

import "github.com/valyala/fasthttp"

// The probes and the root (OPERATIONS.md sections 1 and 8). They answer
// without an actor, a token or an allocation (TestHandleAllocatesNothing).

// livez answers while the process serves HTTP at all: a liveness probe
// that fails only when the node should be restarted, never because it is
// joining or draining.
func (s *Server) livez(in call) (reply, error) {
	in.ctx.SetContentType("application/json")
	in.ctx.SetBodyString(`{"ok":true}`)
	return answered()
}

// readyz (and /healthz, its older name) says whether the node takes
// requests: 503 while it joins or drains its cluster (section 7), so that
// a load balancer sends them elsewhere.
func (s *Server) readyz(in call) (reply, error) {
	in.ctx.SetContentType("application/json")
	if s.cluster != nil && s.cluster.State() != "alive" {
		in.ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		in.ctx.SetBodyString(`{"ok":false}`)
		return answered()
	}
	in.ctx.SetBodyString(`{"ok":true}`)
	return answered()
}

// rootRedirect sends whoever opens the server's address to the app's home,
// {app_url}/app/. 302, not 301 or 308: a permanent redirect is cached by
// browsers, and the app's address changes with --public-url. Found, not
// 307: this answers GET only, where the two mean the same, and 302 is the
// app host's own redirect (sign-in).
func (s *Server) rootRedirect(in call) (reply, error) {
	in.ctx.Response.Header.Set("Location", s.publicURL+"/app/")
	in.ctx.Response.Header.Set("Cache-Control", "no-store")
	in.ctx.SetStatusCode(fasthttp.StatusFound)
	return answered()
}
