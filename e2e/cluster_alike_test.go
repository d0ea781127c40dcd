package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// What a client sees of one request, with what differs between two runs of
// it (ids, times, correlation ids, secrets, rate-limit counts) masked.
type alikeAnswer struct{ label, text string }

var alikeMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`"correlationId":"[^"]*"`), `"correlationId":"<id>"`},
	{regexp.MustCompile(`"nextCursor":"[^"]*"`), `"nextCursor":"<cursor>"`},
	{regexp.MustCompile(`k(bot|usr|ref|code|cs|ss|dev)_[A-Za-z0-9_-]+`), "<secret>"},
	{regexp.MustCompile(`r=\d+;t=\d+`), "r=<n>;t=<n>"},
	{regexp.MustCompile(`"consentHash":"[0-9a-f]{64}"`), `"consentHash":"<hash>"`},
	{regexp.MustCompile(`"manifestHash":"[0-9a-f]{64}"`), `"manifestHash":"<hash>"`},
}

var alikeHeaders = []string{"Content-Type", "Cache-Control", "WWW-Authenticate", "X-Service-Required-Scope",
	"X-Service-Content-Type", "RateLimit-Policy", "RateLimit", "Retry-After"}

func alikeText(r *Resp, names *strings.Replacer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", r.Status)
	for _, h := range alikeHeaders {
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			if h == "Retry-After" {
				v = []string{"<seconds>"}
			}
			fmt.Fprintf(&b, "%s: %q\n", h, v)
		}
	}
	body := names.Replace(string(r.Body))
	for _, m := range alikeMasks {
		body = m.re.ReplaceAllString(body, m.with)
	}
	b.WriteString(body)
	return alikeMasks[5].re.ReplaceAllString(b.String(), alikeMasks[5].with)
}

// alikeEnv is what the representative requests run against: a Kit with
// file, reaction, user and webhook scopes, its installation, a user token of
// the member, one channel per node the requests go through.
type alikeEnv struct {
	e     *filesEnv
	user  string
	chans []Conv
	hooks []*Hook
	names *strings.Replacer
}

func newAlikeEnv(t *testing.T, s *Server, nodes int) *alikeEnv {
	t.Helper()
	w := newWorkspace(t, s)
	e := &filesEnv{W: w}
	e.Chan = w.channel(t, "public", w.members()...)
	scopes := append(slices.Clone(fileScopes), "users:read", "incoming-webhook")
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: scopes}
	k.Manifest = manifest(k.Slug, k.Version, scopes)
	k.Manifest["incomingWebhooks"] = map[string]any{"maxPerInstallation": 20}
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	e.In = w.install(t, k, e.Chan.ID)
	a := &alikeEnv{e: e, user: userToken(t, e.In, w.Mem.ID)}
	olds := []string{w.Name, "<ws>", k.Slug, "<slug>", e.Chan.Name, "<chan>"}
	for i, u := range []User{w.Owner, w.Admin, w.Mem, w.Guest} {
		olds = append(olds, u.DisplayName, fmt.Sprintf("<user%d>", i), u.Email, fmt.Sprintf("<email%d>", i))
	}
	for i := 0; i < nodes; i++ {
		c := w.channel(t, "public", w.members()...)
		e.In.addChannel(t, c.ID)
		a.chans = append(a.chans, c)
		a.hooks = append(a.hooks, e.In.hook(t, c.ID))
		olds = append(olds, c.Name, "<chan>", "topic of "+c.Name, "topic of <chan>")
	}
	a.names = strings.NewReplacer(olds...)
	return a
}

// answers runs the representative requests through via, as the i-th node.
func (a *alikeEnv) answers(t *testing.T, via *Server, i int) []alikeAnswer {
	t.Helper()
	in, w, ch, hook := a.e.In, a.e.In.W, a.chans[i], a.hooks[i]
	var out []alikeAnswer
	add := func(label string, r *Resp) *Resp {
		out = append(out, alikeAnswer{label, alikeText(r, a.names)})
		return r
	}
	bot := func(label, method, path string, body any, hdr map[string]string) *Resp {
		return add(label, via.api(t, in.Token, method, path, body, hdr))
	}
	usr := func(label, method, path string, body any) *Resp {
		return add(label, via.api(t, a.user, method, path, body, nil))
	}
	dev := func(label, method, path string, body any) *Resp {
		return add(label, via.api(t, w.Dev, method, path, body, nil))
	}
	missing := newUUID()

	bot("auth/test", "GET", "/auth/test", nil, nil)
	add("auth/test without a token", via.api(t, "", "GET", "/auth/test", nil, nil))
	add("auth/test with a made-up token", via.api(t, "kbot_"+strings.Repeat("A", 43), "GET", "/auth/test", nil, nil))
	m := bot("post", "POST", "/messages", postBody(ch.ID, "hello"), nil)
	id := m.Str("message.id")
	bot("post without text", "POST", "/messages", map[string]any{"conversationId": ch.ID}, nil)
	bot("post with a bad block", "POST", "/messages", map[string]any{"conversationId": ch.ID, "text": "x", "blocks": []any{map[string]any{"type": "header"}}}, nil)
	bot("post to a missing conversation", "POST", "/messages", postBody(missing, "x"), nil)
	key := map[string]string{"Idempotency-Key": "alike-" + randHex(6)}
	bot("keyed post", "POST", "/messages", postBody(ch.ID, "keyed"), key)
	bot("keyed post again", "POST", "/messages", postBody(ch.ID, "keyed"), key)
	bot("keyed post, other text", "POST", "/messages", postBody(ch.ID, "other"), key)
	bot("edit", "PATCH", "/messages/"+id, map[string]any{"text": "edited"}, nil)
	bot("edit without text", "PATCH", "/messages/"+id, map[string]any{}, nil)
	bot("edit a missing message", "PATCH", "/messages/"+missing, map[string]any{"text": "x"}, nil)
	bot("get", "GET", "/messages/"+id, nil, nil)
	bot("history", "GET", "/conversations/"+ch.ID+"/messages?limit=2", nil, nil)
	bot("history, limit 0", "GET", "/conversations/"+ch.ID+"/messages?limit=0", nil, nil)
	bot("history of a missing conversation", "GET", "/conversations/"+missing+"/messages", nil, nil)
	bot("delete", "DELETE", "/messages/"+id, nil, nil)
	bot("delete again", "DELETE", "/messages/"+id, nil, nil)
	bot("react as the bot", "POST", "/reactions", map[string]any{"messageId": id, "reaction": "heart"}, nil)
	um := usr("post as the member", "POST", "/messages", postBody(ch.ID, "mine"))
	usr("react", "POST", "/reactions", map[string]any{"messageId": um.Str("message.id"), "reaction": "heart"})
	usr("react, bad reaction", "POST", "/reactions", map[string]any{"messageId": um.Str("message.id"), "reaction": "nope"})
	usr("unreact", "DELETE", "/reactions?messageId="+um.Str("message.id")+"&reaction=heart", nil)
	f := usr("upload", "POST", "/files", uploadBody(ch.ID, "image/png", pngBytes))
	usr("upload, bad type", "POST", "/files", uploadBody(ch.ID, "image/gif", pngBytes))
	usr("upload into a missing conversation", "POST", "/files", uploadBody(missing, "image/png", pngBytes))
	bot("file", "GET", "/files/"+f.Str("file.id"), nil, nil)
	bot("file content", "GET", "/files/"+f.Str("file.id")+"/content", nil, nil)
	bot("missing file", "GET", "/files/"+missing, nil, nil)
	bot("users", "GET", "/users?limit=2", nil, nil)
	bot("users/me", "GET", "/users/me", nil, nil)
	usr("users/me as the member", "GET", "/users/me", nil)
	bot("user", "GET", "/users/"+w.Mem.ID, nil, nil)
	bot("missing user", "GET", "/users/"+missing, nil, nil)
	bot("installation", "GET", "/installation", nil, nil)
	usr("run without runs:read", "GET", "/runs/"+missing, nil)
	bot("run as the bot", "GET", "/runs/"+missing, nil, nil)
	add("webhook post", via.do(t, "POST", hook.Path, "", map[string]any{"text": "hooked"}, nil))
	add("webhook post without text", via.do(t, "POST", hook.Path, "", map[string]any{"channel": "x"}, nil))
	add("webhook post, wrong secret", via.do(t, "POST", hook.Path+"x", "", map[string]any{"text": "x"}, nil))
	add("kit.access, wrong secret", via.api(t, "", "POST", "/oauth/kit.access", map[string]any{
		"grantType": "refresh_token", "clientId": in.Kit.ID, "clientSecret": "kcs_" + strings.Repeat("A", 43), "refreshToken": "kref_" + strings.Repeat("A", 43)}, nil))
	add("kit.access, no grant type", via.api(t, "", "POST", "/oauth/kit.access", map[string]any{"clientId": in.Kit.ID}, nil))
	dev("dev/me", "GET", "/dev/me", nil)
	dev("dev kit", "GET", "/dev/kits/"+in.Kit.ID, nil)
	dev("dev missing kit", "GET", "/dev/kits/"+missing, nil)
	dev("validate", "POST", "/dev/kits/validate", map[string]any{"manifest": manifestString(in.Kit.Manifest)})
	changed := manifest(in.Kit.Slug, "1.0.0", []string{"users:read"})
	dev("upload a registered version, changed", "POST", "/dev/kits/versions", map[string]any{"manifest": manifestString(changed)})
	dev("publish a missing version", "POST", "/dev/kits/"+in.Kit.ID+"/versions/9.9.9/publish", nil)
	dev("logs, bad level", "GET", "/dev/kits/"+in.Kit.ID+"/logs?level=x", nil)
	add("ops: user of a missing workspace", via.ops(t, "POST", "/ops/v1/workspaces/"+missing+"/users", map[string]any{"displayName": "x", "email": "x@example.com", "role": "member"}))
	add("ops: conversation without a kind", via.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{"visibility": "public", "name": "x"}))
	add("ops: archive a missing conversation", via.ops(t, "POST", "/ops/v1/conversations/"+missing+"/archive", nil))
	add("ops: revoke a made-up token", via.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": "kbot_" + strings.Repeat("B", 43)}))
	add("ops: bad operator token", via.do(t, "GET", "/ops/v1/cluster", "nope", nil, nil))
	return out
}

// Any node of a cluster answers as a node alone does (docs/cluster.md
// "Forwarding", "Errors"): status, error code and path, the headers a
// client reads, and the body but for ids and times, for a representative
// request of each family, through every node.
func TestClusterAnswersAsANodeAloneThroughEveryNode(t *testing.T) {
	alone := startServerOpts(t, ServerOpts{Limits: "spec"})
	ref := newAlikeEnv(t, alone, 3).answers(t, alone, 0)

	c := startCluster(t, 3, "--limits", "spec")
	c.waitStable(t)
	a := newAlikeEnv(t, c.nodes[0], len(c.nodes))
	for i, s := range c.nodes {
		got := a.answers(t, s, i)
		for j, r := range ref {
			if j >= len(got) || got[j].label != r.label {
				t.Fatalf("n%d: answer %d is not %q", i+1, j, r.label)
			}
			if got[j].text != r.text {
				t.Errorf("n%d: %s:\n--- a node alone:\n%s\n--- n%d:\n%s", i+1, r.label, r.text, i+1, got[j].text)
			}
		}
	}
}

// A change made through one node is seen through every node on the very
// next request, though each had just served the credential or object
// (docs/cluster.md "Goals"; SPEC.md 3 and 5: revocation, uninstall, a
// dropped scope, a disabled webhook are immediate). Each change goes
// through another node in turn; right after its answer, every node is
// asked at once.
func TestClusterChangesReachEveryNodeAtOnce(t *testing.T) {
	c := startCluster(t, 3)
	c.waitStable(t)
	s0 := c.nodes[0]
	type check struct {
		label  string
		call   func(s *Server) *Resp
		status int
		code   string
	}
	type change struct {
		name   string
		make   func(via *Server)
		checks []check
	}
	botCall := func(tok, method, path string, body any) func(*Server) *Resp {
		return func(s *Server) *Resp { return s.api(t, tok, method, path, body, nil) }
	}
	hookCall := func(h *Hook) func(*Server) *Resp {
		return func(s *Server) *Resp { return s.do(t, "POST", h.Path, "", map[string]any{"text": "x"}, nil) }
	}
	var cases []change

	{ // uninstall
		env := hookBotEnv(t, s0)
		h := env.In.hook(t, env.Chan.ID)
		cases = append(cases, change{"uninstall", func(via *Server) {
			want(t, via.ops(t, "DELETE", "/ops/v1/installations/"+env.In.ID, nil), 200)
		}, []check{
			{"bot token", botCall(env.In.Token, "GET", "/auth/test", nil), 401, "invalid_token"},
			{"bot post", botCall(env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "x")), 401, "invalid_token"},
			{"webhook", hookCall(h), 404, "not_found"},
		}})
	}
	{ // a new version drops a scope
		env := newBotEnv(t, s0)
		cases = append(cases, change{"a dropped scope", func(via *Server) {
			m := manifest(env.Kit.Slug, "1.0.1", without(baseScopes, "users:read"))
			want(t, via.api(t, env.W.Dev, "POST", "/dev/kits/versions", map[string]any{"manifest": manifestString(m), "publish": true}, nil), 201)
		}, []check{
			{"users", botCall(env.In.Token, "GET", "/users", nil), 403, "missing_scope"},
		}})
	}
	{ // archive
		env := hookBotEnv(t, s0)
		h := env.In.hook(t, env.Chan.ID)
		cases = append(cases, change{"archived channel", func(via *Server) {
			want(t, via.ops(t, "POST", "/ops/v1/conversations/"+env.Chan.ID+"/archive", nil), 200)
		}, []check{
			{"webhook", hookCall(h), 410, "gone"},
		}})
	}
	{ // bot removed from the channel
		env := hookBotEnv(t, s0)
		h := env.In.hook(t, env.Chan.ID)
		cases = append(cases, change{"bot removed from the channel", func(via *Server) {
			want(t, via.ops(t, "DELETE", "/ops/v1/installations/"+env.In.ID+"/channels/"+env.Chan.ID, nil), 200)
		}, []check{
			{"bot post", botCall(env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "x")), 404, "not_found"},
			{"bot history", botCall(env.In.Token, "GET", "/conversations/"+env.Chan.ID+"/messages", nil), 404, "not_found"},
			{"webhook", hookCall(h), 410, "gone"},
		}})
	}
	{ // webhook revoked
		env := hookBotEnv(t, s0)
		h := env.In.hook(t, env.Chan.ID)
		cases = append(cases, change{"webhook revoked", func(via *Server) {
			want(t, via.ops(t, "DELETE", "/ops/v1/webhooks/"+h.ID, nil), 200)
		}, []check{{"webhook", hookCall(h), 404, "not_found"}}})
	}
	{ // developer token revoked
		w := newWorkspace(t, s0)
		cases = append(cases, change{"developer token revoked", func(via *Server) {
			want(t, via.ops(t, "DELETE", "/ops/v1/developer-tokens/"+w.DevID, nil), 200)
		}, []check{{"dev/me", botCall(w.Dev, "GET", "/dev/me", nil), 401, "invalid_token"}}})
	}
	{ // web session ended
		env := newBotEnv(t, s0)
		g := authorizeGrant(t, env.In, env.W.Mem.ID)
		cases = append(cases, change{"session ended", func(via *Server) {
			want(t, via.ops(t, "DELETE", "/ops/v1/sessions/"+g.SessionID, nil), 200)
		}, []check{{"user token", botCall(g.access(), "GET", "/auth/test", nil), 401, "invalid_token"}}})
	}
	{ // a refresh token used twice revokes the grant
		env := newBotEnv(t, s0)
		g := authorizeGrant(t, env.In, env.W.Mem.ID)
		cases = append(cases, change{"refresh token reused", func(via *Server) {
			body := map[string]any{"grantType": "refresh_token", "clientId": env.Kit.ID, "clientSecret": g.Secret, "refreshToken": g.refresh()}
			want(t, via.api(t, "", "POST", "/oauth/kit.access", body, nil), 200)
			if r := via.api(t, "", "POST", "/oauth/kit.access", body, nil); r.Status != 400 {
				t.Fatalf("a spent refresh token: want 400%s", r)
			}
		}, []check{{"user token", botCall(g.access(), "GET", "/auth/test", nil), 401, "invalid_token"}}})
	}
	{ // bot token rotated: once only
		env := newBotEnv(t, s0)
		cases = append(cases, change{"bot token rotated", func(via *Server) {
			want(t, via.api(t, env.In.Token, "POST", "/auth/rotate", nil, nil), 200)
		}, []check{
			{"rotate again", botCall(env.In.Token, "POST", "/auth/rotate", nil), 409, "conflict"},
		}})
	}
	{ // client secret generated twice: the first stops
		env := newBotEnv(t, s0)
		g := authorizeGrant(t, env.In, env.W.Mem.ID)
		cases = append(cases, change{"client secret replaced twice", func(via *Server) {
			want(t, via.ops(t, "POST", "/ops/v1/kits/"+env.Kit.ID+"/client-secret", nil), 201)
			want(t, via.ops(t, "POST", "/ops/v1/kits/"+env.Kit.ID+"/client-secret", nil), 201)
		}, []check{{"kit.access with the first", func(s *Server) *Resp {
			return s.api(t, "", "POST", "/oauth/kit.access", map[string]any{"grantType": "refresh_token", "clientId": env.Kit.ID, "clientSecret": g.Secret, "refreshToken": g.refresh()}, nil)
		}, 401, "invalid_credentials"}}})
	}

	for n, cs := range cases {
		// Each node serves each check's credential first, where it works.
		for _, ck := range cs.checks {
			if ck.label == "rotate again" || strings.HasPrefix(ck.label, "kit.access") {
				continue
			}
			for _, s := range c.nodes {
				if r := ck.call(s); r.Status >= 300 {
					t.Fatalf("%s: %s before the change: %d%s", cs.name, ck.label, r.Status, r)
				}
			}
		}
		cs.make(c.nodes[n%3])
		for _, ck := range cs.checks {
			got := make([]*Resp, len(c.nodes))
			var wg sync.WaitGroup
			for i, s := range c.nodes {
				wg.Add(1)
				go func() { defer wg.Done(); got[i] = ck.call(s) }()
			}
			wg.Wait()
			for i, r := range got {
				if r.Status != ck.status || r.Str("code") != ck.code {
					t.Errorf("%s (through n%d): %s through n%d: %d %s, want %d %s", cs.name, n%3+1, ck.label, i+1, r.Status, r.Str("code"), ck.status, ck.code)
				}
			}
		}
	}
}

// hookBotEnv is newBotEnv with a Kit that may have incoming webhooks.
func hookBotEnv(t *testing.T, s *Server) *BotEnv {
	t.Helper()
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.members()...)
	k := w.webhookKit(t, 20)
	k.Slug, k.Version, k.Scopes = jstr(k.Manifest, "slug"), "1.0.0", webhookScopes
	return &BotEnv{W: w, Chan: c, Kit: k, In: w.install(t, k, c.ID)}
}

// Every family's bucket is one across the cluster (SPEC.md 8: "Limits are
// counted across all servers"): requests spread round robin over the
// nodes meet the 429 once the bucket's capacity is spent, not three times
// it.
func TestClusterEveryFamilyCountsAcrossNodes(t *testing.T) {
	c := startCluster(t, 3, "--limits", "spec")
	c.waitStable(t)
	e := newFilesEnv(t, c.nodes[0])
	up := e.In.W.S.setup(t, "POST", userToken(t, e.In, e.W.Mem.ID), "/api/v1/files", uploadBody(e.Chan.ID, "image/png", pngBytes))
	want(t, up, 201)
	h := hookBotEnv(t, c.nodes[0])
	hook := h.In.hook(t, h.Chan.ID)
	dev := newWorkspace(t, c.nodes[0])
	for _, f := range []struct {
		name     string
		capacity int
		perSec   float64
		call     func(s *Server, i int) *Resp
	}{
		{"read", 100, 100.0 / 60, func(s *Server, i int) *Resp { return s.api(t, e.In.Token, "GET", "/users/me", nil, nil) }},
		// The upload spent one of the 20.
		{"files", 19, 20.0 / 60, func(s *Server, i int) *Resp {
			return s.api(t, e.In.Token, "GET", "/files/"+up.Str("file.id")+"/content", nil, nil)
		}},
		{"developer", 60, 1, func(s *Server, i int) *Resp { return s.api(t, dev.Dev, "GET", "/dev/me", nil, nil) }},
		{"webhook", 5, 1, func(s *Server, i int) *Resp {
			return s.do(t, "POST", hook.Path, "", map[string]any{"text": fmt.Sprint("w", i)}, nil)
		}},
		{"post_message", 5, 1, func(s *Server, i int) *Resp {
			return s.api(t, h.In.Token, "POST", "/messages", postBody(h.Chan.ID, fmt.Sprint("p", i)), nil)
		}},
	} {
		ok, limited, _, elapsed := burst(t, 3*f.capacity+10, func(i int) *Resp { return f.call(c.nodes[i%3], i) })
		if limited == nil {
			t.Errorf("%s: %d requests through three nodes in %v, no 429", f.name, ok, elapsed)
			continue
		}
		if ok < f.capacity || ok > allowed(f.capacity, f.perSec, elapsed) {
			t.Errorf("%s: %d requests succeeded through three nodes in %v, want %d plus the refill", f.name, ok, elapsed, f.capacity)
		}
		checkRetryAfter(t, limited, 60)
	}
}
