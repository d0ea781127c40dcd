package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
)

// app serves the app host of OPERATIONS.md section 3 (sign-in, authorize).
func (s *Server) app(ctx *fasthttp.RequestCtx, seg []string) {
	s.fail(ctx, kiterr.Absent("route"))
}
