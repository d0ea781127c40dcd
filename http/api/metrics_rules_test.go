package api

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// docs/decisions.md "Metrics": kitd_webhook_posts_total{outcome} are "the
// webhook row's statuses, summed at scrape time", and a counter never
// goes down. Posts answered while a scrape runs must not make outcome
// "error" (no 500 was ever answered here) read anything but 0.
func TestWebhookErrorOutcomeIsNotMovedByPostsDuringAScrape(t *testing.T) {
	s := New(Config{})
	hook := &s.stats.rows[s.hookRow]
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			hook.status[statusIndex(200)].Inc() // a webhook post answered 200
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for i := 0; i < 2000; i++ {
		var w metrics.Writer
		s.collect(&w)
		mfs := metricstest.Parse(t, w.Bytes())
		if v := metricstest.Value(mfs, "kitd_webhook_posts_total", "outcome", "error"); v != 0 {
			t.Fatalf("scrape %d: kitd_webhook_posts_total{outcome=\"error\"} = %v with no 500 ever answered", i, v)
		}
	}
}

// docs/decisions.md "Metrics": "A path no row takes counts as
// route="none", except a path of the hooks host, which counts as the
// webhook row (it answers its 404)"; kitd_webhook_posts_total{outcome}
// are the webhook row's statuses, too_large among them (414 included:
// webhookOutcomes). A webhook URL too long to read is a post refused as
// too large, not a request of no route.
func TestAWebhookURLTooLongCountsAsTheWebhookRow(t *testing.T) {
	h := ts
	before := h.scrape(t)
	long := "/hooks/v1/" + strings.Repeat("a", 9<<10) + "/b/c"
	r := h.do(t, request{method: "POST", path: long, json: map[string]any{"text": "hi"}})
	want(t, r, 414)
	after := h.scrape(t)
	const hookRoute = "POST /hooks/v1/{installationId}/{webhookId}/{secret}"
	d := metricstest.Value(after, "kitd_http_requests_total", "route", hookRoute, "status", "414") -
		metricstest.Value(before, "kitd_http_requests_total", "route", hookRoute, "status", "414")
	o := metricstest.Value(after, "kitd_webhook_posts_total", "outcome", "too_large") -
		metricstest.Value(before, "kitd_webhook_posts_total", "outcome", "too_large")
	if d != 1 || o != 1 {
		t.Fatalf("a 414 to a hooks path moved the webhook row's 414 by %v and too_large by %v, want 1 and 1", d, o)
	}
}
