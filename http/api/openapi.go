package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/docs/openapi"
)

// webAPIDocument: GET /openapi.json, the OpenAPI document of the Web API.
func (s *Server) webAPIDocument(in call) (reply, error) {
	return documentReply(in, openapi.WebAPI)
}

// devAPIDocument: GET /dev/openapi.json, the OpenAPI document of the
// developer API.
func (s *Server) devAPIDocument(in call) (reply, error) {
	return documentReply(in, openapi.DevAPI)
}

// documentReply answers with a copy of doc in the response's own buffer:
// fasthttp reuses that buffer for later responses, so the embedded bytes
// themselves are never handed to it.
func documentReply(in call, doc []byte) (reply, error) {
	return rawReply(fasthttp.StatusOK, append(bodyBuffer(in.ctx), doc...))
}
