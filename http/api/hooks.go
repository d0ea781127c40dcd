package api

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Field limits of docs/api.md "Incoming webhooks" and "Field and size limits".
const maxHookText = 4000

// hookDrainLimit is how much of an oversized webhook body is still read
// before the 413. Answering and closing while the client is still sending
// makes many clients report a broken pipe instead of the 413 (the
// "lingering close" problem); reading a body a little over 64 KiB costs
// little. Above this, the 413 comes from the Content-Length alone and the
// body is never read.
const hookDrainLimit = 256 << 10

// hookRequestConfig lowers the body limit of the hooks host before fasthttp
// reads the body: a Content-Length over hookDrainLimit is answered 413 at
// once, without reading the body; a body up to it is read, and the handler
// answers 413 above 64 KiB.
func hookRequestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if bytes.HasPrefix(h.RequestURI(), []byte("/hooks/")) {
		return fasthttp.RequestConfig{MaxRequestBodySize: hookDrainLimit}
	}
	return fasthttp.RequestConfig{}
}

// hookPost serves incoming webhooks: POST {hooks_url}/v1/{installationId}/{webhookId}/{secret}.
//
// The body's shape is checked here, but a problem is answered by the
// webhook actor, after the URL proved to be a live webhook's: a 400 never
// tells an unproven URL anything, and every not-found cause costs the same
// work (parse, hash, one request to an active webhook actor:
// actors.WebhookTargets).
func (s *Server) hookPost(in call) (reply, error) {
	instID, webhookID, secret := in.param("installationId"), in.param("webhookId"), in.param("secret")
	if !ids.Valid(instID) || !ids.Valid(webhookID) || secret == "" {
		return reply{}, actors.ErrHookNotFound
	}
	body := in.ctx.PostBody()
	if len(body) > in.body {
		return reply{}, kiterr.New(kiterr.PayloadTooLarge, "request body is larger than 65536 bytes")
	}
	req := &kitpb.HookPost{InstallationId: instID, SecretHash: actors.HookSecretHash(secret), PostId: ids.Nonce()}
	text, blocks, err := hookBody(body)
	var e *kiterr.Error
	if errors.As(err, &e) {
		req.Invalid = kiterr.ToFailure(e)
	} else if err != nil {
		return reply{}, err
	} else {
		req.Text, req.Blocks = text, blocks
	}
	target, err := s.hookTargets.Of(webhookID)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.HookPostReply](s, actors.KindWebhook, target, req)
	if err != nil {
		return reply{}, err
	}
	if r.Limit != nil {
		setRateHeaders(in.ctx, limits.FromWire(r.Limit, s.limits))
	}
	return rawReply(fasthttp.StatusOK, append(bodyBuffer(in.ctx), `{"ok":true}`...))
}

// hookPostBody is the body of an incoming webhook post; other keys are
// ignored.
type hookPostBody struct {
	Text   *string         `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

// hookBody checks the shape of a webhook body: a JSON object with text
// (1-4,000 characters, not blank) and optional blocks, which the
// conversation validates. Other keys (channel, username, icon, ...) are
// ignored. The Content-Type is not looked at: webhook senders are often
// shell scripts, and the body must be a JSON object whatever it says.
func hookBody(body []byte) (text string, blocks []byte, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil, kiterr.Invalid("", "request body is required")
	}
	var b hookPostBody
	if !b.decodeFast(body) {
		if err := input.DecodeJSON(body, &b); err != nil {
			return "", nil, err
		}
	}
	if err := input.RequireString("text", b.Text, 1, maxHookText); err != nil {
		return "", nil, err
	}
	if err := input.NotBlank("text", *b.Text); err != nil {
		return "", nil, err
	}
	return *b.Text, rawBlocks(b.Blocks), nil
}
