package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// docs/decisions.md "Rate limits": every answer subject to a bucket
// carries the RateLimit headers, and a 429 alone has Retry-After. An
// error answered after a bucket's token was taken (a 400 on a live
// webhook's URL, docs/webhooks.md; a responseUrl post the conversation
// refuses, docs/deliveries.md "responseUrl") spent that token: it shows
// the bucket's state, without Retry-After, and is not counted as refused
// (kitd_rate_limited_total counts 429s only).
func TestRateLimit_AnErrorThatSpentATokenCarriesTheHeaders(t *testing.T) {
	rcv := newReceiver(t)
	s := memberServer(t, rcv)
	m := newMemberKit(t, s, rcv, "")
	w, c, in := webhookEnv(t, s, 4)
	badBlocks := []any{map[string]any{"type": "header"}}

	tests := []struct {
		rule   string
		do     func(t *testing.T) *Resp
		status int
		// policy is the bucket whose headers the answer carries; r its
		// tokens left after the answer.
		policy, r string
	}{
		{"a 400 of a live webhook's body spends and shows the webhook bucket", func(t *testing.T) *Resp {
			h := in.hook(t, c.ID)
			return h.post(t, map[string]any{"text": ""})
		}, 400, "webhook", "4"},
		{"a 400 of a live webhook's blocks spends and shows the webhook bucket", func(t *testing.T) *Resp {
			h := in.hook(t, c.ID)
			return h.post(t, map[string]any{"text": "x", "blocks": badBlocks})
		}, 400, "webhook", "4"},
		{"the 410 of the post that finds its webhook's channel archived shows the webhook bucket", func(t *testing.T) *Resp {
			archived := w.channel(t, "public", w.members()...)
			h := in.hook(t, archived.ID)
			want(t, s.ops(t, "POST", "/ops/v1/conversations/"+archived.ID+"/archive", nil), 200)
			return h.post(t, map[string]any{"text": "x"})
		}, 410, "webhook", "4"},
		{"a 400 of a responseUrl post the conversation refuses shows the response_url bucket", func(t *testing.T) *Resp {
			m.advance(t, 0)
			want(t, m.command(t, "/deploy", ""), 200)
			return respond(t, s, m.last(t), map[string]any{"text": "x", "blocks": badBlocks})
		}, 400, "response_url", "49"},
		{"a Web API 404 shows the read bucket", func(t *testing.T) *Resp {
			return in.api(t, "GET", "/messages/"+newUUID(), nil)
		}, 404, "read", ""},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			before := scrapeMetrics(t, s)
			r := tt.do(t)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d%s", r.Status, tt.status, r)
			}
			checkRateHeaders(t, r)
			if p := r.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"`+tt.policy+`";`) {
				t.Errorf("RateLimit-Policy %q, want the %s bucket%s", p, tt.policy, r)
			}
			if l := r.Header.Get("RateLimit"); tt.r != "" && !strings.HasPrefix(l, `"`+tt.policy+`";r=`+tt.r+`;`) {
				t.Errorf("RateLimit %q, want %s with r=%s: the token was spent%s", l, tt.policy, tt.r, r)
			}
			if ra := r.Header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After %q on a %d: only a 429 has one%s", ra, r.Status, r)
			}
			after := scrapeMetrics(t, s)
			if d := metricstest.Value(after, "kitd_rate_limited_total", "family", tt.policy) -
				metricstest.Value(before, "kitd_rate_limited_total", "family", tt.policy); d != 0 {
				t.Errorf("kitd_rate_limited_total{family=%q} moved by %v on a %d", tt.policy, d, r.Status)
			}
		})
	}
}

// docs/deliveries.md "Tools": a tool call spends the member's
// interactions bucket, taken by the installation before the tool, the
// conversation and the membership are checked. Its 202, and every
// refusal after the take, spent a token and carry the bucket's RateLimit
// headers (docs/decisions.md "Rate limits"); the 429 spends nothing.
func TestRateLimit_AToolCallCarriesTheInteractionsBucket(t *testing.T) {
	tk := newToolKit(t)
	e := newToolsSetupLimits(t, tk, "spec")
	tests := []struct {
		rule   string
		body   map[string]any
		status int
		r      string // interactions tokens left after it
	}{
		{"a call accepted shows the bucket it spent", e.call(e.conv, "lookup", map[string]any{}), 202, "29"},
		{"an unknown tool's 404 shows the bucket it spent", e.call(e.conv, "nothing_here", map[string]any{}), 404, "28"},
		{"a conversation the Kit bot is not in: its 404 shows the bucket", e.call(e.noBot, "lookup", map[string]any{}), 404, "27"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			r := e.invoke(t, tt.body)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d%s", r.Status, tt.status, r)
			}
			if p := r.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"interactions";q=30;`) {
				t.Errorf("RateLimit-Policy %q, want the interactions bucket%s", p, r)
			}
			if l := r.Header.Get("RateLimit"); !strings.HasPrefix(l, `"interactions";r=`+tt.r+`;`) {
				t.Errorf("RateLimit %q, want interactions with r=%s%s", l, tt.r, r)
			}
			if ra := r.Header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After %q on a %d%s", ra, r.Status, r)
			}
		})
	}
	t.Run("a 429 spends nothing: the bucket's next token comes back in its time", func(t *testing.T) {
		var last *Resp
		for range 30 {
			if last = e.invoke(t, e.call(e.conv, "nothing_here", map[string]any{})); last.Status == 429 {
				break
			}
		}
		checkRetryAfter(t, last, 60)
		for range 3 {
			checkRetryAfter(t, e.invoke(t, e.call(e.conv, "nothing_here", map[string]any{})), 60)
		}
		advance(t, e.s, 2*time.Second) // 30/minute: one token
		r := e.invoke(t, e.call(e.conv, "nothing_here", map[string]any{}))
		wantError(t, r, 404, "not_found")
		// r=1 if a refill of real time came in meanwhile.
		if l := r.Header.Get("RateLimit"); !strings.HasPrefix(l, `"interactions";r=0;`) && !strings.HasPrefix(l, `"interactions";r=1;`) {
			t.Errorf("RateLimit %q after refusals and one refill, want r=0: the refusals took nothing%s", l, r)
		}
	})
}
