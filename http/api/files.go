package api

import "github.com/valyala/fasthttp"

// filesAPI serves reactions and files (SPEC.md 4.4, 4.5); it reports
// whether it owned the route.
func (s *Server) filesAPI(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	return false
}
