package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
)

// hooks serves incoming webhooks: POST {hooks_url}/v1/{installationId}/{webhookId}/{secret}.
func (s *Server) hooks(ctx *fasthttp.RequestCtx, seg []string) {
	s.fail(ctx, kiterr.Absent("route"))
}

// opWebhooks serves the operator routes of webhooks; it reports whether it
// owned the route.
func (s *Server) opWebhooks(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	return false
}
