package e2e

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// scrapeMetrics reads GET /metrics with the operator token and parses it
// with Prometheus' own text parser.
func scrapeMetrics(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	r := s.do(t, "GET", "/metrics", s.OpToken, nil, nil)
	want(t, r, 200)
	return metricstest.Parse(t, r.Body)
}

// GET /metrics (docs/decisions.md "Metrics"): the counters move
// by exactly the requests made, under the route's pattern and the status
// answered, and only the operator token may read them.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{})
	env := newBotEnv(t, s)

	t.Run("the counters move by exactly the requests made, by route pattern and status", func(t *testing.T) {
		before := scrapeMetrics(t, s)
		const posts = 3
		for range posts {
			env.In.post(t, env.Chan.ID, "counted")
		}
		wantError(t, env.In.api(t, "GET", "/messages/"+newUUID(), nil), 404, "not_found")
		after := scrapeMetrics(t, s)
		for _, c := range []struct {
			family string
			labels []string
			delta  float64
		}{
			{"kitd_http_requests_total", []string{"route", "POST /api/v1/messages", "family", "write", "status", "201"}, posts},
			{"kitd_http_requests_total", []string{"route", "POST /api/v1/messages"}, posts},
			{"kitd_http_request_duration_seconds", []string{"route", "POST /api/v1/messages"}, posts},
			{"kitd_http_requests_total", []string{"route", "GET /api/v1/messages/{id}", "family", "read", "status", "404"}, 1},
			{"kitd_pebble_commit_duration_seconds", nil, -1}, // moved, by how much is the actors' business
		} {
			got := metricstest.Value(after, c.family, c.labels...) - metricstest.Value(before, c.family, c.labels...)
			if c.delta < 0 && got <= 0 || c.delta >= 0 && got != c.delta {
				t.Errorf("%s%v moved by %v, want %v", c.family, c.labels, got, c.delta)
			}
		}
		for _, family := range []string{"kitd_actors_live", "kitd_pebble_wal_syncs_total", "kitd_pebble_compaction_debt_bytes", "kitd_webhook_posts_total", "kitd_rate_limited_total", "go_goroutines", "process_resident_memory_bytes"} {
			if after[family] == nil {
				t.Errorf("no family %s", family)
			}
		}
		if metricstest.Value(after, "kitd_actors_live", "kind", "conversation") < 1 {
			t.Errorf("no live conversation actor")
		}
	})
	t.Run("metrics without the operator token are 401", func(t *testing.T) {
		for _, token := range []string{"", env.In.Token, "op_" + randToken()} {
			r := s.do(t, "GET", "/metrics", token, nil, nil)
			wantError(t, r, 401, "invalid_token")
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate%s", r)
			}
		}
	})
}
