package kitclient

import (
	"context"
	"net/http"
)

// Webhook posts to one incoming webhook (docs/api.md "Incoming webhooks"). Its URL is its
// credential: it never appears in an error. Safe for concurrent use.
type Webhook struct {
	url string
	c   *Client
}

// NewWebhook returns a poster to the webhook URL
// ({hooks_url}/v1/{installationId}/{webhookId}/{secret}). The options are
// [New]'s; a token is never sent.
func NewWebhook(url string, opts ...Option) *Webhook {
	return &Webhook{url: url, c: New("", "", opts...)}
}

// Post posts m into the webhook's channel as the Kit bot. A webhook post
// takes no Idempotency-Key, so it is retried only after a 429 (the server
// did nothing) and never after a failure that may have posted it. A
// disabled webhook answers an *Error with code gone (permanent); a revoked
// or unknown one not_found.
func (w *Webhook) Post(ctx context.Context, m WebhookMessage) error {
	cl := call{method: http.MethodPost, url: w.url, shown: "{hooks_url}/v1/…", family: familyWebhook, body: m, noAuth: true}
	_, err := w.c.do(ctx, cl)
	return err
}
