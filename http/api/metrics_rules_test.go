package api

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/ids"
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

// docs/decisions.md "Metrics": `status` is "one of a fixed list of the
// statuses kitd answers, else `other`". A status a route answers on
// success is one of them: the 202 of the routes that queue work was
// counted as "other", out of sight of a query for status="202".
func TestEveryStatusARouteAnswersHasItsOwnLabel(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		method string
		path   string
		status int
	}{
		{"a test event queued (202) counts as 202", "POST", "/api/v1/dev/kits/" + ids.New() + "/test-events", 202},
		{"a redelivery queued (202) counts as 202", "POST", "/api/v1/dev/installations/" + ids.New() + "/deliveries/redeliver", 202},
		{"a tool run started (202) counts as 202", "POST", "/app/api/tools/invoke", 202},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s := New(Config{Logger: discardLogger()})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI(tc.path)
			ctx.Response.SetStatusCode(tc.status)
			r := served{t: resolve(&ctx)}
			if r.t.route == nil {
				t.Fatalf("%s %s: no route", tc.method, tc.path)
			}
			s.record(&ctx, &r)
			var w metrics.Writer
			s.collect(&w)
			mfs := metricstest.Parse(t, w.Bytes())
			if v := metricstest.Value(mfs, "kitd_http_requests_total", "route", routeName(r.t.route), "status", strconv.Itoa(tc.status)); v != 1 {
				t.Fatalf("status=%q moved by %v, want 1 (status=\"other\": %v)", strconv.Itoa(tc.status), v,
					metricstest.Value(mfs, "kitd_http_requests_total", "route", routeName(r.t.route), "status", "other"))
			}
		})
	}
}
