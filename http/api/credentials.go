package api

import "github.com/valyala/fasthttp"

// credentialsAPI serves POST /auth/rotate and POST /oauth/kit.access; it
// reports whether it owned the route.
func (s *Server) credentialsAPI(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	return false
}

// opCredentials serves the operator routes of client and signing secrets;
// it reports whether it owned the route.
func (s *Server) opCredentials(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	return false
}
