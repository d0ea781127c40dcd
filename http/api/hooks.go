package api

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Field limits of SPEC.md sections 4.9 and 8.
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

// hooks serves incoming webhooks: POST {hooks_url}/v1/{installationId}/{webhookId}/{secret}.
//
// The body's shape is checked here, but a problem is answered by the
// webhook actor, after the URL proved to be a live webhook's: a 400 never
// tells an unproven URL anything, and every not-found cause costs the same
// work (parse, hash, one request to a webhook actor).
func (s *Server) hooks(ctx *fasthttp.RequestCtx, seg []string) {
	if string(ctx.Method()) != "POST" || !route(seg, "v1", "*", "*", "*") || !ids.Valid(seg[1]) || !ids.Valid(seg[2]) || seg[3] == "" {
		s.fail(ctx, actors.ErrHookNotFound)
		return
	}
	body := ctx.PostBody()
	if len(body) > maxHookBody {
		s.fail(ctx, kiterr.New(kiterr.PayloadTooLarge, "request body is larger than 65536 bytes"))
		return
	}
	req := &kitpb.HookPost{InstallationId: seg[1], SecretHash: actors.HookSecretHash(seg[3]), PostId: ids.Nonce()}
	text, blocks, err := hookBody(body)
	var e *kiterr.Error
	if errors.As(err, &e) {
		req.Invalid = kiterr.ToFailure(e)
	} else if err != nil {
		s.fail(ctx, err)
		return
	} else {
		req.Text, req.Blocks = text, blocks
	}
	r, err := ask[*kitpb.HookPostReply](s, actors.KindWebhook, seg[2], req)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if r.Limit != nil {
		setRateHeaders(ctx, limits.FromWire(r.Limit, s.limits))
	}
	s.writeBuffer(ctx, fasthttp.StatusOK, append(bodyBuffer(ctx), `{"ok":true}`...))
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
		if err := decodeJSON(body, &b); err != nil {
			return "", nil, err
		}
	}
	if err := requireString("text", b.Text, 1, maxHookText); err != nil {
		return "", nil, err
	}
	if err := notBlank("text", *b.Text); err != nil {
		return "", nil, err
	}
	return *b.Text, rawBlocks(b.Blocks), nil
}

// opWebhooks serves the operator routes of webhooks; it reports whether it
// owned the route.
func (s *Server) opWebhooks(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	switch {
	case method == "POST" && route(seg, "installations", "*", "webhooks"):
		s.opCreateWebhook(ctx, seg[1])
	case method == "DELETE" && route(seg, "webhooks", "*"):
		s.opRevokeWebhook(ctx, seg[1])
	default:
		return false
	}
	return true
}

// opCreateWebhook: POST /ops/v1/installations/{id}/webhooks
// {conversationId, createdByUserId} → 201 {webhook, url}. The URL carries
// the only copy of the secret; the installation stores its hash.
func (s *Server) opCreateWebhook(ctx *fasthttp.RequestCtx, instID string) {
	if !s.validID(ctx, "installation", instID) {
		return
	}
	var body struct {
		ConversationID  *string `json:"conversationId"`
		CreatedByUserID *string `json:"createdByUserId"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = firstError(requireUUID("conversationId", body.ConversationID), requireUUID("createdByUserId", body.CreatedByUserID))
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ws, err := s.ownerOf(*body.CreatedByUserID, "user")
	if err != nil {
		s.fail(ctx, err)
		return
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, ws, &kitpb.GetUser{UserId: *body.CreatedByUserID})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	secret := ids.NewSecret("")
	webhookID := ids.New()
	r, err := ask[*kitpb.WebhookReply](s, actors.KindInstallation, instID, &kitpb.CreateWebhook{
		WebhookId: webhookID, ConversationId: *body.ConversationID, Creator: u.User,
		SecretHash: actors.HookSecretHash(secret),
	})
	if err != nil {
		if kiterr.CodeOf(err) == kiterr.MissingScope {
			ctx.Response.Header.Set("X-Service-Required-Scope", actors.WebhookScope)
		}
		s.fail(ctx, err)
		return
	}
	type webhookView struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversationId"`
		CreatedAt      string `json:"createdAt"`
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, struct {
		Webhook webhookView `json:"webhook"`
		URL     string      `json:"url"`
	}{
		webhookView{r.Webhook.Id, r.Webhook.ConversationId, isoTime(r.Webhook.CreatedAt)},
		s.publicURL + "/hooks/v1/" + instID + "/" + webhookID + "/" + secret,
	})
}

// opRevokeWebhook: DELETE /ops/v1/webhooks/{id}. The installation that
// created the webhook is found through its locator record.
func (s *Server) opRevokeWebhook(ctx *fasthttp.RequestCtx, webhookID string) {
	if !s.validID(ctx, "webhook", webhookID) {
		return
	}
	kind, instID, err := actors.Locate(s.env, webhookID)
	if err == nil && kind != actors.KindInstallation {
		err = kiterr.Absent("webhook")
	}
	if kiterr.CodeOf(err) == kiterr.NotFound {
		err = kiterr.Absent("webhook")
	}
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindInstallation, instID, &kitpb.RevokeWebhook{WebhookId: webhookID})
	}
	s.okOr(ctx, err)
}
