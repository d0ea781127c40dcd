package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/kitd/kitd/docs/openapi"
)

// OpenAPI conformance: every exchange of this suite whose path is under
// /api/v1 or /hooks is checked against docs/openapi (webapi.json; devapi.json
// for /api/v1/dev), so the documents cannot drift from what kitd answers.
// (*Server).request records each exchange (conformance.check), do reports a
// failing one through the test that made it (conformance.report), and
// TestMain fails the run for any failure no test reported (requests made
// with request directly) and prints how many exchanges were validated.
//
// The rule, per exchange:
//
//  1. The path and method pick the operation. A path or method the document
//     does not list must be answered 404 with the document's generic
//     NotFound error (components.responses.NotFound): the suite probes
//     unknown routes on purpose, and an undocumented route that answers
//     anything else is a route the document lacks.
//  2. The answer is always validated against the operation's responses:
//     its status must be listed (no `default`), its body must match the
//     schema of its Content-Type, and the headers the document marks
//     required must be there and match. Plus one rule OpenAPI cannot say:
//     a 403 `missing_scope` carries `X-Service-Required-Scope`.
//  3. The request is validated too, but only to learn whether the document
//     accepts it: many tests send bad input on purpose (wrong types,
//     malformed JSON, oversized bodies, bad ids), and those are answered
//     with a documented error, which rule 2 checks. A request the document
//     refuses that kitd answered with anything but a 4xx is a failure,
//     though: a 2xx means the document is stricter than the server (this
//     is what catches a limit written wrong, as the suite probes limits
//     from both sides), a 5xx that kitd failed on bad input. The converse
//     (a request the document accepts, answered 400) is not a failure:
//     many rules cannot be said in a schema (an unknown threadParentId,
//     a duplicate actionId, a PNG without its magic number, a cursor of
//     another list).
//
// Deviations of kitd from docs/api.md that the document does not follow are
// listed in knownDeviations, one entry each with its reason; nothing else
// is excused.

// exchangeDeviation excuses one failure of rule 1-3, matched by method,
// document path (or the request path for an undocumented route), status
// and a substring of the failure.
type exchangeDeviation struct {
	method, path string
	status       int
	contains     string
	why          string
}

// knownDeviations: empty while kitd answers as the documents say.
var knownDeviations = []exchangeDeviation{}

// routeDeviations are documented operations kitd does not serve (it answers
// 404 "route not found"); TestOpenAPIRoutesServed skips them.
var routeDeviations = map[string]string{}

type openapiDoc struct {
	name   string
	doc    *openapi3.T
	router routers.Router
	bodies *bodySchemas // its JSON bodies' schemas, compiled once each
}

type conformanceChecker struct {
	once     sync.Once
	err      error
	web, dev openapiDoc

	mu      sync.Mutex
	checked int
	failed  map[*Resp]string // failures no test has reported yet
	total   int              // failures in all
	excused map[int]int      // knownDeviations index → exchanges it excused
	seen    map[string]bool  // "doc operationId status" answered at least once
}

var conformance conformanceChecker

func (c *conformanceChecker) load() error {
	c.once.Do(func() {
		c.failed = make(map[*Resp]string)
		c.excused = make(map[int]int)
		c.seen = make(map[string]bool)
		var err error
		if c.web, err = loadDoc("webapi.json", openapi.WebAPI); err != nil {
			c.err = err
			return
		}
		c.dev, c.err = loadDoc("devapi.json", openapi.DevAPI)
	})
	return c.err
}

// loadDoc loads a document and routes it on relative server URLs, so that
// the suite's servers (127.0.0.1 on any port) match the documented origin.
func loadDoc(name string, data []byte) (openapiDoc, error) {
	d := openapiDoc{name: name}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err == nil {
		err = doc.Validate(context.Background())
	}
	if err != nil {
		return d, fmt.Errorf("docs/openapi/%s: %w", name, err)
	}
	relative := func(servers openapi3.Servers) openapi3.Servers {
		out := make(openapi3.Servers, len(servers))
		for i, s := range servers {
			u := *s
			u.URL = strings.TrimPrefix(s.URL, "{origin}")
			u.Variables = nil
			out[i] = &u
		}
		return out
	}
	doc.Servers = relative(doc.Servers)
	for _, item := range doc.Paths.Map() {
		if len(item.Servers) > 0 {
			item.Servers = relative(item.Servers)
		}
	}
	d.doc = doc
	if d.router, err = gorillamux.NewRouter(doc); err != nil {
		return d, fmt.Errorf("docs/openapi/%s: router: %w", name, err)
	}
	if d.bodies, err = newBodySchemas(name, doc); err != nil {
		return d, fmt.Errorf("docs/openapi/%s: schemas: %w", name, err)
	}
	return d, nil
}

// described reports whether an exchange's path is one the documents cover.
func described(path string) bool {
	return strings.HasPrefix(path, "/api/v1/") || path == "/api/v1" || strings.HasPrefix(path, "/hooks/") || path == "/hooks"
}

// check validates one exchange and keeps its failure for report.
func (c *conformanceChecker) check(r *Resp) {
	if !described(strings.SplitN(r.Path, "?", 2)[0]) {
		return
	}
	var msg string
	if err := c.load(); err != nil {
		msg = err.Error()
	} else {
		msg = c.validate(r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked++
	if msg != "" {
		c.total++
		c.failed[r] = msg
	}
}

// report fails t when r did not conform.
func (c *conformanceChecker) report(t testing.TB, r *Resp) {
	t.Helper()
	c.mu.Lock()
	msg, ok := c.failed[r]
	delete(c.failed, r)
	c.mu.Unlock()
	if ok {
		t.Errorf("OpenAPI conformance (docs/openapi, e2e/openapi_test.go): %s%s", msg, r)
	}
}

// finish prints the tally and every failure no test reported; it returns
// false when there were any.
func (c *conformanceChecker) finish() bool {
	_ = c.load() // the maps, when nothing was checked
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(os.Stderr, "e2e: OpenAPI conformance: %d exchanges under /api/v1 and /hooks validated against docs/openapi, %d failed\n", c.checked, c.total)
	c.coverage()
	for i, k := range knownDeviations {
		if n := c.excused[i]; n > 0 {
			fmt.Fprintf(os.Stderr, "e2e: OpenAPI conformance: %d exchanges excused as %s %s %d: %s\n", n, k.method, k.path, k.status, k.why)
		}
	}
	if len(c.failed) == 0 {
		return true
	}
	lines := make([]string, 0, len(c.failed))
	for r, msg := range c.failed {
		lines = append(lines, msg+r.String())
	}
	sort.Strings(lines)
	fmt.Fprintf(os.Stderr, "e2e: %d exchanges made without a test to report them do not conform to docs/openapi:\n", len(lines))
	for _, l := range lines {
		fmt.Fprintf(os.Stderr, "--- %s\n", l)
	}
	return false
}

// coverage prints how many documented operations and answers the run
// exchanged, and with KITD_OPENAPI_COVERAGE=1 each answer it did not.
func (c *conformanceChecker) coverage() {
	if c.err != nil {
		return
	}
	var ops, opsSeen, answers, answersSeen int
	var missing []string
	for _, d := range []openapiDoc{c.web, c.dev} {
		for _, path := range d.doc.Paths.InMatchingOrder() {
			for method, o := range d.doc.Paths.Value(path).Operations() {
				ops++
				any := false
				for status := range o.Responses.Map() {
					answers++
					if c.seen[d.name+" "+o.OperationID+" "+status] {
						answersSeen++
						any = true
					} else {
						missing = append(missing, fmt.Sprintf("%s %s %s %s", d.name, method, path, status))
					}
				}
				if any {
					opsSeen++
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: OpenAPI conformance: %d of %d documented operations and %d of %d documented answers (operation, status) exchanged\n",
		opsSeen, ops, answersSeen, answers)
	if os.Getenv("KITD_OPENAPI_COVERAGE") == "1" {
		sort.Strings(missing)
		for _, m := range missing {
			fmt.Fprintf(os.Stderr, "e2e: OpenAPI answer not exchanged: %s\n", m)
		}
	}
}

// validate applies the rule above to r; "" means it conforms.
func (c *conformanceChecker) validate(r *Resp) string {
	d := c.web
	rawPath := strings.SplitN(r.Path, "?", 2)[0]
	if rawPath == "/api/v1/dev" || strings.HasPrefix(rawPath, "/api/v1/dev/") {
		d = c.dev
	}
	u, err := url.Parse("http://kitd.test" + r.Path)
	if err != nil {
		return fmt.Sprintf("request path does not parse: %v", err)
	}
	req, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(r.ReqBody))
	if err != nil {
		return fmt.Sprintf("request: %v", err)
	}
	req.Header = r.ReqHeader.Clone()
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		if !errors.Is(err, routers.ErrPathNotFound) && !errors.Is(err, routers.ErrMethodNotAllowed) {
			return fmt.Sprintf("%s: finding the operation: %v", d.name, err)
		}
		return c.excuse(r, r.Method, rawPath, undocumentedRoute(d, r))
	}
	if rb := route.Operation.RequestBody; rb != nil && rb.Value != nil && rb.Value.Content["*/*"] != nil {
		// A `*/*` body is JSON whatever its Content-Type says (incoming
		// webhooks, docs/webhooks.md): judge it as JSON.
		req.Header.Set("Content-Type", "application/json")
	}
	ctx := context.Background()
	jsonIn := isJSON(req.Header.Get("Content-Type"))
	reqIn := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true, ExcludeRequestBody: jsonIn},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, reqIn)
	if reqErr == nil && jsonIn {
		if msg := d.bodies.requestBody(route.Operation.RequestBody, req.Header, r.ReqBody); msg != "" {
			reqErr = errors.New(msg)
		}
	}
	where := fmt.Sprintf("%s %s %s (%s)", d.name, r.Method, route.Path, route.Operation.OperationID)
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", d.name, route.Operation.OperationID, r.Status)] = true
	c.mu.Unlock()
	jsonOut := isJSON(r.Header.Get("Content-Type")) && r.Method != http.MethodHead
	respIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 r.Status,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: jsonOut},
	}
	var problems []string
	if err := openapi3filter.ValidateResponse(ctx, respIn); err != nil {
		problems = append(problems, fmt.Sprintf("the answer does not match %s: %v", where, err))
	} else if jsonOut {
		if msg := d.bodies.responseBody(route.Operation, r.Status, r.Header, r.Body); msg != "" {
			problems = append(problems, fmt.Sprintf("the answer does not match %s: %s", where, msg))
		}
	}
	var errBody struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Body, &errBody)
	if r.Status == http.StatusForbidden && errBody.Code == "missing_scope" && r.Header.Get("X-Service-Required-Scope") == "" {
		problems = append(problems, fmt.Sprintf("%s: 403 missing_scope without X-Service-Required-Scope", where))
	}
	if reqErr != nil && (r.Status < 400 || r.Status >= 500) {
		problems = append(problems, fmt.Sprintf("kitd answered %d to a request %s refuses (want a 4xx): %v", r.Status, where, reqErr))
	}
	return c.excuse(r, r.Method, route.Path, strings.Join(problems, "\n  "))
}

// undocumentedRoute checks the answer to a path or method the document does
// not list: the generic 404 of components.responses.NotFound.
func undocumentedRoute(d openapiDoc, r *Resp) string {
	what := fmt.Sprintf("%s documents no operation %s %s", d.name, r.Method, strings.SplitN(r.Path, "?", 2)[0])
	if r.Status != http.StatusNotFound {
		return fmt.Sprintf("%s, and kitd answered %d (an undocumented route answers only 404 not_found)", what, r.Status)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Sprintf("%s; its 404 has Content-Type %q, not application/json", what, ct)
	}
	var body any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Sprintf("%s; its 404 body is not JSON: %v", what, err)
	}
	nf := d.doc.Components.Responses["NotFound"]
	if nf == nil || nf.Value == nil || nf.Value.Content.Get("application/json") == nil {
		return d.name + ": components.responses.NotFound with an application/json body is missing"
	}
	schema := nf.Value.Content.Get("application/json").Schema.Value
	if err := schema.VisitJSON(body, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Sprintf("%s; its 404 does not match components.responses.NotFound: %v", what, err)
	}
	return ""
}

// excuse drops a failure that knownDeviations lists.
func (c *conformanceChecker) excuse(r *Resp, method, path, msg string) string {
	if msg == "" {
		return ""
	}
	for i, k := range knownDeviations {
		if k.method == method && k.path == path && k.status == r.Status && strings.Contains(msg, k.contains) {
			c.mu.Lock()
			c.excused[i]++
			c.mu.Unlock()
			return ""
		}
	}
	return msg
}

// TestOpenAPIRoutesServed asks kitd for every operation the documents list,
// without a credential, and checks that it is a route kitd serves (anything
// but the 404 "route not found" of an unknown route). Together with the
// conformance check, which fails on every route the suite calls that the
// documents lack, this keeps the documents' path list and kitd's routes
// equal, whatever the router looks like.
func TestOpenAPIRoutesServed(t *testing.T) {
	t.Parallel()
	if err := conformance.load(); err != nil {
		t.Fatal(err)
	}
	s := sharedServer(t)
	values := map[string]string{"version": "1.0.0", "domain": "example.com", "secret": randToken()}
	for _, d := range []openapiDoc{conformance.web, conformance.dev} {
		for _, path := range d.doc.Paths.InMatchingOrder() {
			item := d.doc.Paths.Value(path)
			base := "/api/v1"
			if len(item.Servers) > 0 {
				base = item.Servers[0].URL
			}
			if base == "/hooks" {
				// Every unknown /hooks path answers the same 404 as an
				// unknown webhook, by design (docs/webhooks.md), so this
				// probe cannot tell them apart; webhooks_test posts through
				// real webhooks, and rule 1 checks those answers.
				continue
			}
			for method := range item.Operations() {
				name := method + " " + path
				if _, ok := routeDeviations[name]; ok {
					continue
				}
				concrete := path
				for _, seg := range strings.Split(path, "/") {
					if strings.HasPrefix(seg, "{") {
						v, ok := values[strings.Trim(seg, "{}")]
						if !ok {
							v = newUUID()
						}
						concrete = strings.Replace(concrete, seg, v, 1)
					}
				}
				var body any
				if method == http.MethodPost || method == http.MethodPatch {
					body = map[string]any{}
				}
				r := s.do(t, method, base+concrete, "", body, nil)
				if r.Status == http.StatusNotFound && r.Str("message") == "route not found" {
					t.Errorf("%s: %s documents %s but kitd does not serve it%s", d.name, name, base+path, r)
				}
			}
		}
	}
}

// The descriptions are served by every node as built, without a token.
func TestOpenAPIDocumentsServed(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, tc := range []struct {
		path string
		doc  []byte
	}{
		{"/api/v1/openapi.json", openapi.WebAPI},
		{"/api/v1/dev/openapi.json", openapi.DevAPI},
	} {
		t.Run(tc.path, func(t *testing.T) {
			for i := range 2 { // the second answer proves the first left the document intact
				r := s.do(t, "GET", tc.path, "", nil, nil)
				want(t, r, 200)
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("answer %d: Content-Type %q, want application/json", i, ct)
				}
				if !bytes.Equal(r.Body, tc.doc) {
					t.Fatalf("answer %d: the served document differs from docs/openapi (%d bytes, want %d)", i, len(r.Body), len(tc.doc))
				}
			}
		})
	}
}

// A path is matched as the documents spell it: a trailing slash makes
// another path, which no document lists, so it answers the generic 404 of
// an undocumented route (rule 1), never the route without the slash. The
// conformance check validates each answer's body too.
func TestOpenAPITrailingSlashIsNoRoute(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s, "users:read", "messages:read", "messages:write", "conversations:read")
	dev, _ := env.W.devToken(t, env.W.Owner.ID)
	for _, tc := range []struct {
		rule, token, method, path string
		body                      any
	}{
		{"GET /users/ is not GET /users", env.In.Token, "GET", "/api/v1/users/", nil},
		{"GET /users/me/ is not GET /users/me", env.In.Token, "GET", "/api/v1/users/me/", nil},
		{"GET /installation/ is not GET /installation", env.In.Token, "GET", "/api/v1/installation/", nil},
		{"GET /auth/test/ is not GET /auth/test", env.In.Token, "GET", "/api/v1/auth/test/", nil},
		{"GET /conversations/{id}/ is not GET /conversations/{id}", env.In.Token, "GET", "/api/v1/conversations/" + env.Chan.ID + "/", nil},
		{"POST /messages/ is not POST /messages", env.In.Token, "POST", "/api/v1/messages/", map[string]any{"conversationId": env.Chan.ID, "text": "slash"}},
		{"GET /dev/me/ is not GET /dev/me", dev, "GET", "/api/v1/dev/me/", nil},
		{"GET /openapi.json/ is not the document", "", "GET", "/api/v1/openapi.json/", nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			wantError(t, s.do(t, tc.method, tc.path, tc.token, tc.body, nil), 404, "not_found")
		})
	}
	// Nothing was posted by the refused POST.
	r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages", nil)
	want(t, r, 200)
	if n := len(r.Get("messages").([]any)); n != 0 {
		t.Errorf("POST /messages/ posted: %d messages%s", n, r)
	}
}

// Every route that reads a body answers 415 to one that is not JSON and
// 413 to one over its limit (docs/decisions.md "Web API"), so its document
// lists both; and request bodies ignore keys they do not know
// (docs/decisions.md "Request bodies"), so no request schema refuses them.
// The conformance check fails any answer its document does not list, and a
// 2xx to a body its schema refuses.
func TestOpenAPIBodyAnswersAreDocumented(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	sb := newSandbox(t, s)
	r := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", map[string]any{"manifest": manifestString(manifest(newSlug(), "1.0.0", baseScopes)), "url": "https://t.example.com"}, nil)
	want(t, r, 201)
	kitID, inst := r.Str("kitId"), r.Str("installationId")
	routes := []struct {
		name, method, path, token string
		limit                     int // the route's body limit
	}{
		{"publish", "POST", "/api/v1/dev/kits/" + kitID + "/versions/1.0.0/publish", sb.Dev, 1 << 20},
		{"redeliver", "POST", "/api/v1/dev/installations/" + inst + "/deliveries/redeliver", sb.Dev, 1 << 20},
		{"test-events", "POST", "/api/v1/dev/kits/" + kitID + "/test-events", sb.Dev, 1 << 20},
		{"responseUrl", "POST", "/hooks/v1/responses/" + inst + "/kresp_" + strings.Repeat("A", 43), "", 64 << 10},
	}
	for _, rt := range routes {
		t.Run(rt.name+" answers 415 to a body that is not JSON", func(t *testing.T) {
			wantError(t, s.do(t, rt.method, rt.path, rt.token, raw(`{"text":"x"}`), map[string]string{"Content-Type": "text/plain"}), 415, "unsupported_media_type")
		})
		t.Run(rt.name+" answers 413 to a body over its limit", func(t *testing.T) {
			big := raw(`{"text":"` + strings.Repeat("a", rt.limit) + `"}`)
			wantError(t, s.do(t, rt.method, rt.path, rt.token, big, nil), 413, "payload_too_large")
		})
	}
	t.Run("test-events ignores a key it does not know", func(t *testing.T) {
		want(t, s.api(t, sb.Dev, "POST", "/dev/kits/"+kitID+"/test-events", map[string]any{"type": "installation.updated", "note": "x"}, nil), 202)
	})
	t.Run("redeliver ignores a key it does not know", func(t *testing.T) {
		want(t, s.api(t, sb.Dev, "POST", "/dev/installations/"+inst+"/deliveries/redeliver", map[string]any{"deadSince": "2020-01-01T00:00:00Z", "note": "x"}, nil), 202)
	})
}
