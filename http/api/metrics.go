package api

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/metrics"
)

// What the front end counts, and its line of each request in the log
// (docs/decisions.md "Metrics" and "Logs"). Every series a request touches
// is made at startup with its labels rendered: a row of routes owns its
// counters (rowStats, at the row's index), so counting a request is two
// table lookups and three atomic adds.

// statuses are the answers counted by their own status label; any other
// is counted as "other". They are every status kitd answers (kiterr's
// table, the 202 of routes that queue work, the redirects of the app
// host, 503 of a draining node).
var statuses = [...]int{200, 201, 202, 204, 302, 303, 304, 400, 401, 403, 404, 405, 409, 410, 413, 414, 415, 429, 431, 500, 502, 503}

// statusIndex is the index of code in statuses, or len(statuses).
func statusIndex(code int) int {
	if code >= 0 && code < len(statusIndexes) {
		return int(statusIndexes[code])
	}
	return len(statuses)
}

// statusIndexes maps a status code to statusIndex's answer.
var statusIndexes = func() (t [600]uint8) {
	for i := range t {
		t[i] = uint8(len(statuses))
	}
	for i, code := range statuses {
		t[code] = uint8(i)
	}
	return t
}()

// rowStats are the counters of one route row (or of the requests no row
// takes).
type rowStats struct {
	name    string         // the route's pattern, for the log
	labels  metrics.Labels // route and family
	status  [len(statuses) + 1]metrics.Counter
	latency *metrics.Histogram
}

// Rows of frontStats.rows after those of routes.
const (
	rowNone  = len(routes) // a path no row takes
	rowCount = len(routes) + 1
)

// frontStats is what the front end counts.
type frontStats struct {
	rows []rowStats // rowCount
	// limited counts 429s by the bucket that refused (a request to
	// POST /messages may be refused by write or by post_message).
	limited map[limits.Name]*metrics.Counter
}

func newFrontStats() *frontStats {
	fs := &frontStats{rows: make([]rowStats, rowCount), limited: make(map[limits.Name]*metrics.Counter)}
	for i := range fs.rows {
		route, family := "none", ""
		if i != rowNone {
			route, family = routeName(&routes[i]), string(routes[i].family)
		}
		fs.rows[i].name = route
		fs.rows[i].labels = metrics.Label("route", route).With(metrics.Label("family", family))
		fs.rows[i].latency = metrics.NewHistogram(metrics.LatencyBuckets)
	}
	for _, name := range limits.Names() {
		fs.limited[name] = new(metrics.Counter)
	}
	return fs
}

// rowOf is the index in frontStats.rows of a request to t. A path of the
// hooks host no row takes is a webhook URL that names nothing: it counts
// as the webhook row, whose 404 it answers.
func (s *Server) rowOf(t *target) int {
	switch {
	case t.route != nil:
		return t.row
	case t.host == hostHooks:
		return s.hookRow
	}
	return rowNone
}

// overLimit counts a 429 of bucket name.
func (fs *frontStats) overLimit(name limits.Name) {
	if c := fs.limited[name]; c != nil {
		c.Inc()
	}
}

// record counts an answered request and logs its line. It allocates
// nothing, but for the copy of a webhook URL's installation id when its
// line goes through slog.
func (s *Server) record(ctx *fasthttp.RequestCtx, r *served) {
	row := &s.stats.rows[s.rowOf(&r.t)]
	status := ctx.Response.StatusCode()
	row.status[statusIndex(status)].Inc()
	now := time.Now()
	var took time.Duration
	if !r.unread {
		took = now.Sub(ctx.Time())
		row.latency.ObserveDuration(took)
	}
	if s.requests == nil && !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	line := requestLine{route: row.name, status: status, took: took, client: r.client, correlationID: correlationOf(ctx)}
	// The route's pattern, never the path as sent (routeName): a webhook
	// URL's last segment is its secret.
	switch {
	case r.p != nil:
		line.installation = r.p.Caller.InstallationId
	case r.t.host == hostHooks && r.t.route != nil:
		// As the client sent it: at most a UUID's length of it, so that a
		// made-up URL cannot fill the log.
		a := r.t.at[0]
		id := r.t.rest[a.from:min(a.to, a.from+len("00000000-0000-0000-0000-000000000000"))]
		if s.requests != nil {
			line.installation = unsafe.String(unsafe.SliceData(id), len(id)) // read before record returns
		} else {
			line.installation = string(id)
		}
	}
	if s.requests != nil {
		s.requests.write(now, &line)
		return
	}
	s.logRequest(&line)
}

// logRequest writes a request's line through slog: for a server given a
// logger but no RequestLog (tests, tools). RequestLog's lines are the same.
func (s *Server) logRequest(r *requestLine) {
	attrs := [...]slog.Attr{
		slog.String("route", r.route),
		slog.Int("status", r.status),
		// An integer: slog writes a float in JSON through encoding/json.
		slog.Int64("durationUs", r.took.Microseconds()),
		slog.String("installation", r.installation),
		slog.String("client", clientText(r.client)),
		{},
	}
	n := len(attrs) - 1
	if r.correlationID != "" {
		attrs[n] = slog.String("correlationId", r.correlationID)
		n++
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs[:n]...)
}

// clientText is a's text for a line, "" for no address. It allocates:
// the lines of RequestLog, which every kitd process writes, do not.
func clientText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// collect writes the front end's families.
func (s *Server) collect(w *metrics.Writer) {
	fs := s.stats
	w.Family("kitd_http_requests_total", "Requests answered, by route pattern, its rate-limit family and status.", metrics.TypeCounter)
	for i := range fs.rows {
		row := &fs.rows[i]
		for j := range row.status {
			if n := row.status[j].Load(); n > 0 {
				w.Uint("kitd_http_requests_total", row.labels.With(statusLabels[j]), n)
			}
		}
	}
	w.Family("kitd_http_request_duration_seconds", "Time from the request's head read to its answer, by route pattern.", metrics.TypeHistogram)
	for i := range fs.rows {
		row := &fs.rows[i]
		if snap := row.latency.Snapshot(); snap.Count() > 0 {
			w.Histogram("kitd_http_request_duration_seconds", row.labels, snap)
		}
	}
	w.Family("kitd_rate_limited_total", "Requests refused with 429, by the rate-limit family (bucket) that refused them.", metrics.TypeCounter)
	for _, name := range limits.Names() {
		w.Uint("kitd_rate_limited_total", metrics.Label("family", string(name)), fs.limited[name].Load())
	}
	w.Family("kitd_webhook_posts_total", "Incoming webhook posts by outcome.", metrics.TypeCounter)
	// Each status is read once: outcomes and "error" are sums of the same
	// reading, so a post answered meanwhile cannot make "error" wrap.
	hook := &fs.rows[s.hookRow]
	var counts [len(statuses) + 1]uint64
	var all uint64
	for j := range hook.status {
		counts[j] = hook.status[j].Load()
		all += counts[j]
	}
	for _, o := range webhookOutcomes {
		var n uint64
		for _, code := range o.statuses {
			n += counts[statusIndex(code)]
		}
		all -= n
		w.Uint("kitd_webhook_posts_total", metrics.Label("outcome", o.name), n)
	}
	w.Uint("kitd_webhook_posts_total", metrics.Label("outcome", "error"), all)
}

// statusLabels are the status labels, in the order of statuses, then
// "other".
var statusLabels = func() (l [len(statuses) + 1]metrics.Labels) {
	for i, code := range statuses {
		l[i] = metrics.Label("status", strconv.Itoa(code))
	}
	l[len(statuses)] = metrics.Label("status", "other")
	return l
}()

// webhookOutcomes name the answers of docs/api.md "Incoming webhooks" (and of the front end's
// limits: 414, 431); outcome "error" counts every other (500).
var webhookOutcomes = [...]struct {
	name     string
	statuses []int
}{
	{"posted", []int{200}},
	{"invalid", []int{400, 415}},
	{"not_found", []int{404, 405}},
	{"gone", []int{410}},
	{"too_large", []int{413, 414, 431}},
	{"rate_limited", []int{429}},
}

// metricsPage answers GET /metrics.
func (s *Server) metricsPage(in call) (reply, error) {
	in.ctx.SetContentType(metrics.ContentType)
	in.ctx.SetBody(s.metrics.Gather())
	return answered()
}
