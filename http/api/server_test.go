package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
)

// The handler tests run a real Server, wired as package server wires it,
// on a real single-node cluster over an in-memory Pebble store, and talk
// to it through fasthttp's in-memory listener. One server serves the whole
// test binary; tests keep apart by creating their own workspaces.

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

type testServer struct {
	env     *actors.Env
	auth    *actors.Authenticator
	clk     *clock.Test
	node    *cluster.Host
	store   *persistence.Store
	srv     *Server
	ln      *fasthttputil.InmemoryListener
	client  *fasthttp.Client
	opToken string
	// metricsToken reads /metrics only (--metrics-token).
	metricsToken string
	served       chan error
}

var ts *testServer

func startServer() (*testServer, error) {
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	h := &testServer{store: store, clk: clock.NewTest(), opToken: ids.NewSecret(ids.OperatorToken), metricsToken: "scrape-" + ids.New()}
	table := limits.Spec()
	h.env = &actors.Env{Store: store, Clock: h.clk, Logger: discardLogger(), Limits: table,
		Fatal: func(err error) { panic(fmt.Sprintf("api test: storage failed: %v", err)) }}
	h.auth = actors.NewAuthenticator(h.env)
	h.env.Invalidator = &actors.Caches{Auth: h.auth}
	h.node, err = cluster.Start(cluster.Config{}, actors.Kinds(h.env)...)
	if err != nil {
		store.Close()
		return nil, err
	}
	h.env.Host = h.node
	h.srv = New(Config{
		Node: h.node, Env: h.env, Auth: h.auth, Limits: table, OperatorToken: h.opToken, MetricsToken: h.metricsToken,
		TestClock: h.clk, PublicURL: "http://kit.test", Logger: discardLogger(),
	})
	h.ln = fasthttputil.NewInmemoryListener()
	h.served = make(chan error, 1)
	go func() { h.served <- h.srv.Serve(h.ln) }()
	h.client = &fasthttp.Client{
		Dial:                     func(string) (net.Conn, error) { return h.ln.Dial() },
		MaxResponseBodySize:      1 << 20,
		ReadTimeout:              20 * time.Second,
		WriteTimeout:             20 * time.Second,
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
	}
	return h, nil
}

func (h *testServer) stop() {
	h.srv.Shutdown(context.Background())
	h.ln.Close()
	h.node.Stop()
	h.store.Close()
}

func TestMain(m *testing.M) {
	h, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		os.Exit(1)
	}
	ts = h
	code := m.Run()
	h.stop()
	os.Exit(code)
}

// ---- requests ----

type request struct {
	method, path string
	token        string            // Authorization: Bearer <token>; "" for none
	auth         string            // a raw Authorization header, instead of token
	auth2        string            // a second Authorization header
	contentType  string            // "" with a body: application/json; "-": none at all
	body         []byte            // raw body
	json         any               // body to marshal, instead of body
	header       map[string]string // more request headers
}

type response struct {
	status int
	header map[string]string // lower-case names
	body   []byte
}

// field returns a top-level JSON field of the body, or a dotted path.
func (r *response) field(path string) any {
	var v any
	if json.Unmarshal(r.body, &v) != nil {
		return nil
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (r *response) str(path string) string {
	s, _ := r.field(path).(string)
	return s
}

// hdr returns a response header by name, in any case.
func (r *response) hdr(name string) string { return r.header[strings.ToLower(name)] }

func (r *response) String() string {
	return fmt.Sprintf("%d %s", r.status, r.body)
}

func (h *testServer) do(t testing.TB, rq request) *response {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(rq.method)
	req.SetRequestURI("http://kit.test" + rq.path)
	switch {
	case rq.auth != "":
		req.Header.Set("Authorization", rq.auth)
	case rq.token != "":
		req.Header.Set("Authorization", "Bearer "+rq.token)
	}
	body := rq.body
	if rq.json != nil {
		b, err := json.Marshal(rq.json)
		if err != nil {
			t.Fatal(err)
		}
		body = b
	}
	switch rq.contentType {
	case "-":
		req.Header.SetNoDefaultContentType(true)
	case "":
		if body != nil {
			req.Header.SetContentType("application/json")
		} else {
			req.Header.SetNoDefaultContentType(true)
		}
	default:
		req.Header.SetContentType(rq.contentType)
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	if rq.auth2 != "" {
		req.Header.Add("Authorization", rq.auth2)
	}
	if body != nil {
		req.SetBodyRaw(body)
	}
	if err := h.client.DoTimeout(req, resp, 30*time.Second); err != nil {
		t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	out := &response{status: resp.StatusCode(), header: map[string]string{}, body: append([]byte(nil), resp.Body()...)}
	for k, v := range resp.Header.All() {
		out.header[strings.ToLower(string(k))] = string(v)
	}
	return out
}

// want checks the status of r.
func want(t testing.TB, r *response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want status %d", r, status)
	}
}

// wantError checks status and that the body is exactly the docs/api.md "Errors"
// body with code.
func wantError(t testing.TB, r *response, status int, code string) {
	t.Helper()
	want(t, r, status)
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body is not JSON: %s", r)
	}
	if len(body) != 3 || body["code"] != code {
		t.Fatalf("got %s, want an error body {code: %s, message, correlationId}", r, code)
	}
	if m, _ := body["message"].(string); m == "" {
		t.Fatalf("error without message: %s", r)
	}
	if c, _ := body["correlationId"].(string); c == "" {
		t.Fatalf("error without correlationId: %s", r)
	}
	if ct := r.hdr("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
}

func (h *testServer) ops(t testing.TB, method, path string, body any) *response {
	t.Helper()
	return h.do(t, request{method: method, path: "/ops/v1" + path, token: h.opToken, json: body})
}

// ---- fixtures ----

type fixture struct {
	ws      string
	member  string // a member of conv
	outside string // a member of the workspace, not of conv
	dev     string // developer token of member
	conv    string // a channel the bot was added to
	other   string // a channel the bot was not added to, member is in it
	kitID   string
	inst    string
	bot     string // bot token
}

func manifestText(slug, version string, botScopes []string, userScopes []string) string {
	m := map[string]any{
		"schemaVersion":    1,
		"slug":             slug,
		"version":          version,
		"displayName":      map[string]any{"en": "Kit " + slug},
		"description":      map[string]any{"en": "Handler test Kit"},
		"developer":        map[string]any{"name": "Test", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot":              map[string]any{"displayName": map[string]any{"en": "Bot"}, "scopes": botScopes},
		"distribution":     "private",
	}
	if len(userScopes) > 0 {
		m["oauth"] = map[string]any{"redirectUrls": []string{"https://example.com/cb"}, "userScopes": userScopes}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var defaultBotScopes = []string{"conversations:read", "messages:read", "messages:write", "users:read"}

// newFixture creates a workspace with two people, a developer token, two
// channels and a private Kit installed with a bot in the first channel.
func (h *testServer) newFixture(t testing.TB, botScopes ...string) *fixture {
	t.Helper()
	if botScopes == nil {
		botScopes = defaultBotScopes
	}
	f := &fixture{}
	r := h.ops(t, "POST", "/workspaces", map[string]any{"name": "handler test"})
	want(t, r, 201)
	f.ws = r.str("workspace.id")
	for _, u := range []*string{&f.member, &f.outside} {
		r = h.ops(t, "POST", "/workspaces/"+f.ws+"/users", map[string]any{"displayName": "Person", "role": "admin"})
		want(t, r, 201)
		*u = r.str("user.id")
	}
	r = h.ops(t, "POST", "/users/"+f.member+"/developer-tokens", map[string]any{"name": "test"})
	want(t, r, 201)
	f.dev = r.str("token")
	for _, c := range []*string{&f.conv, &f.other} {
		r = h.ops(t, "POST", "/workspaces/"+f.ws+"/conversations", map[string]any{
			"kind": "channel", "visibility": "public", "name": "general", "memberIds": []string{f.member},
		})
		want(t, r, 201)
		*c = r.str("conversation.id")
	}
	slug := "h" + strings.ReplaceAll(ids.New()[24:], "-", "")
	r = h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": manifestText(slug, "1.0.0", botScopes, []string{"conversations:read", "messages:read"}),
	}})
	want(t, r, 201)
	f.kitID = r.str("kitId")
	r = h.ops(t, "POST", "/workspaces/"+f.ws+"/installations", map[string]any{"kitId": f.kitID})
	want(t, r, 201)
	f.inst = r.str("installation.id")
	want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": f.conv}), 200)
	r = h.ops(t, "POST", "/installations/"+f.inst+"/bot-tokens", nil)
	want(t, r, 201)
	f.bot = r.str("token")
	return f
}

// sandboxDeveloper is a developer token of a member of a new sandbox
// workspace.
func (h *testServer) sandboxDeveloper(t testing.TB) string {
	t.Helper()
	r := h.ops(t, "POST", "/workspaces", map[string]any{"name": "sandbox", "sandbox": true})
	want(t, r, 201)
	r = h.ops(t, "POST", "/workspaces/"+r.str("workspace.id")+"/users", map[string]any{"displayName": "Developer", "role": "admin"})
	want(t, r, 201)
	r = h.ops(t, "POST", "/users/"+r.str("user.id")+"/developer-tokens", map[string]any{"name": "test"})
	want(t, r, 201)
	return r.str("token")
}
