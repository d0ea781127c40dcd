package e2e

import (
	"strings"
	"testing"
	"time"
)

// docs/api.md "Authentication": a missing, malformed or unknown token answers 401
// invalid_token with WWW-Authenticate. RFC 6750 section 3.1: when the request
// carries no credential the challenge has no error attribute.
func TestAuth_Rejected(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)

	cases := []struct {
		name          string
		authorization string // "" = no Authorization header
		wantErrorAttr bool
	}{
		{"missing token is 401 without error attribute", "", false},
		{"unknown bot token is 401 invalid_token", "Bearer kbot_" + randToken(), true},
		{"malformed token is 401 invalid_token", "Bearer not-a-token", true},
		{"truncated bot token is 401 invalid_token", "Bearer " + env.In.Token[:len(env.In.Token)-1], true},
		{"bot token with one character changed is 401 invalid_token", "Bearer " + flipLast(env.In.Token), true},
		{"unknown user token is 401 invalid_token", "Bearer kusr_" + randToken(), true},
		{"operator token is not a Web API token", "Bearer " + s.OpToken, true},
		{"basic scheme is 401", "Basic " + "dXNlcjpwYXNz", false},
		{"empty bearer is 401", "Bearer ", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, call := range []struct{ method, path string }{
				{"GET", "/auth/test"},
				{"GET", "/conversations"},
				{"POST", "/messages"},
				{"GET", "/installation"},
			} {
				hdr := map[string]string{}
				if tc.authorization != "" {
					hdr["Authorization"] = tc.authorization
				}
				var body any
				if call.method == "POST" {
					body = map[string]any{"conversationId": env.Chan.ID, "text": "hi"}
				}
				r := s.do(t, call.method, "/api/v1"+call.path, "", body, hdr)
				wantError(t, r, 401, "invalid_token")
				h := r.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(h, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge%s", h, r)
				}
				if tc.wantErrorAttr && !strings.Contains(h, `error="invalid_token"`) {
					t.Errorf(`WWW-Authenticate = %q, want error="invalid_token"%s`, h, r)
				}
				if tc.authorization == "" && strings.Contains(h, "error=") {
					t.Errorf("no credential was sent: the challenge must not carry an error attribute (RFC 6750 3.1)%s", r)
				}
				noEcho(t, r, strings.TrimPrefix(strings.TrimPrefix(tc.authorization, "Bearer "), "Basic "))
			}
		})
	}
}

// A developer token is a credential of the developer API: on the Web API it
// is either not a token at all (401 invalid_token) or a token type that cannot
// call the method (403 forbidden, docs/api.md "Token type per method").
// Either way it never gets through.
func TestAuth_DeveloperTokenOnWebAPI(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	for _, call := range []struct{ method, path string }{
		{"GET", "/auth/test"},
		{"GET", "/conversations"},
		{"POST", "/messages"},
		{"GET", "/installation"},
	} {
		var body any
		if call.method == "POST" {
			body = postBody(env.Chan.ID, "from a developer token")
		}
		r := s.api(t, env.W.Dev, call.method, call.path, body, nil)
		switch {
		case r.Status == 401 && r.Str("code") == "invalid_token":
		case r.Status == 403 && r.Str("code") == "forbidden":
		default:
			t.Errorf("developer token on the Web API: want 401 invalid_token or 403 forbidden%s", r)
		}
		checkErrorBody(t, r)
	}
}

// docs/api.md "Authentication": GET /auth/test returns the token introspection object.
func TestAuth_Test(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s, "conversations:read", "messages:write")
	r := env.In.api(t, "GET", "/auth/test", nil)
	want(t, r, 200)
	if r.Get("ok") != true || r.Str("tokenType") != "bot" || r.Str("workspaceId") != env.W.ID ||
		r.Str("installationId") != env.In.ID || r.Str("kitSlug") != env.Kit.Slug || r.Str("botId") != env.In.BotID {
		t.Errorf("want {ok:true, tokenType:bot, workspaceId, installationId, kitSlug, botId}%s", r)
	}
	if r.Get("userId") != nil {
		t.Errorf("a bot token has no userId%s", r)
	}
	if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, []string{"conversations:read", "messages:write"}) {
		t.Errorf("scopes = %v, want the manifest's [conversations:read messages:write]%s", got, r)
	}
}

// docs/api.md "Bot token": revocation is immediate; other tokens of the
// installation keep working. An uninstalled Kit's tokens answer 401.
func TestAuth_RevokeAndUninstall(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	second := env.In.newToken(t)

	t.Run("revoked bot token is 401 at once", func(t *testing.T) {
		want(t, env.In.api(t, "GET", "/auth/test", nil), 200)
		r := s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": env.In.Token})
		want(t, r, 200)
		for _, path := range []string{"/auth/test", "/conversations", "/installation"} {
			r = env.In.api(t, "GET", path, nil)
			wantError(t, r, 401, "invalid_token")
			if !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf(`want WWW-Authenticate with error="invalid_token"%s`, r)
			}
		}
		r = env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": "after revoke"})
		wantError(t, r, 401, "invalid_token")
	})

	t.Run("other tokens of the installation keep working", func(t *testing.T) {
		r := s.api(t, second, "GET", "/auth/test", nil, nil)
		want(t, r, 200)
	})

	t.Run("uninstalled Kit's tokens are 401", func(t *testing.T) {
		r := s.ops(t, "DELETE", "/ops/v1/installations/"+env.In.ID, nil)
		want(t, r, 200)
		for _, path := range []string{"/auth/test", "/conversations/" + env.Chan.ID, "/users/me"} {
			r = s.api(t, second, "GET", path, nil, nil)
			wantError(t, r, 401, "invalid_token")
		}
	})
}

// docs/api.md "Scopes": a token lacking a needed scope gets 403
// missing_scope with X-Service-Required-Scope naming it.
func TestAuth_MissingScope(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	cases := []struct {
		scope        string
		method, path string
		body         func(env *BotEnv) any
	}{
		{"conversations:read", "GET", "/conversations", nil},
		{"conversations:read", "GET", "/conversations/{chan}", nil},
		{"conversations:read", "GET", "/conversations/{chan}/members", nil},
		{"messages:read", "GET", "/conversations/{chan}/messages", nil},
		{"messages:read", "GET", "/messages/{msg}", nil},
		{"messages:write", "POST", "/messages", func(env *BotEnv) any {
			return map[string]any{"conversationId": env.Chan.ID, "text": "no scope"}
		}},
		{"users:read", "GET", "/users", nil},
		{"users:read", "GET", "/users/{user}", nil},
	}
	for _, tc := range cases {
		t.Run("without "+tc.scope+" "+tc.method+" "+tc.path+" is 403 missing_scope", func(t *testing.T) {
			t.Parallel()
			env := newBotEnv(t, s, without(baseScopes, tc.scope)...)
			msgID := newUUID()
			if tc.path == "/messages/{msg}" {
				// A message that exists and is visible, so only the scope is missing.
				full := env.W.install(t, env.W.kit(t, baseScopes...), env.Chan.ID)
				msgID = jstr(full.post(t, env.Chan.ID, "visible"), "id")
			}
			path := strings.NewReplacer("{chan}", env.Chan.ID, "{msg}", msgID, "{user}", env.W.Mem.ID).Replace(tc.path)
			var body any
			if tc.body != nil {
				body = tc.body(env)
			}
			r := env.In.api(t, tc.method, path, body)
			wantError(t, r, 403, "missing_scope")
			if got := r.Header.Get("X-Service-Required-Scope"); got != tc.scope {
				t.Errorf("X-Service-Required-Scope = %q, want %q%s", got, tc.scope, r)
			}
		})
	}

	t.Run("no-scope methods work without any of the scopes", func(t *testing.T) {
		t.Parallel()
		env := newBotEnv(t, s, "users:read")
		for _, path := range []string{"/auth/test", "/users/me", "/installation"} {
			want(t, env.In.api(t, "GET", path, nil), 200)
		}
	})
}

// docs/api.md "Scopes" and "Versioning": a new manifest version that drops a scope removes
// it from existing tokens at once, from its upload (a draft's too), before
// and after the installation is updated to it.
func TestAuth_DroppedScopeLeavesTokens(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	want(t, env.In.api(t, "GET", "/users", nil), 200)
	gone := func(when string) {
		t.Helper()
		r := env.In.api(t, "GET", "/auth/test", nil)
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, without(baseScopes, "users:read")) {
			t.Errorf("effective scopes %s = %v, want users:read gone%s", when, got, r)
		}
		r = env.In.api(t, "GET", "/users", nil)
		wantError(t, r, 403, "missing_scope")
		if got := r.Header.Get("X-Service-Required-Scope"); got != "users:read" {
			t.Errorf("X-Service-Required-Scope %s = %q%s", when, got, r)
		}
	}

	r := env.W.uploadVersion(t, manifest(env.Kit.Slug, "1.1.0", without(baseScopes, "users:read")), false)
	want(t, r, 201)
	gone("after the draft's upload")
	r = s.setup(t, "POST", env.W.Dev, "/api/v1/dev/kits/"+env.Kit.ID+"/versions/1.1.0/publish", nil)
	want(t, r, 200)
	r = s.ops(t, "POST", "/ops/v1/workspaces/"+env.W.ID+"/installations", map[string]any{"kitId": env.Kit.ID})
	want(t, r, 201)
	gone("after the update")
	r = env.In.api(t, "GET", "/installation", nil)
	want(t, r, 200)
	if r.Str("installation.kit.version") != "1.1.0" {
		t.Errorf("installation still at %q%s", r.Str("installation.kit.version"), r)
	}
}

// User tokens (switch on with the credentials issue).
func TestAuth_UserToken(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	tok := userToken(t, env.In, env.W.Mem.ID)
	r := s.api(t, tok, "GET", "/auth/test", nil, nil)
	want(t, r, 200)
	if r.Str("tokenType") != "user" || r.Str("userId") != env.W.Mem.ID || r.Str("installationId") != env.In.ID {
		t.Errorf("user token introspection%s", r)
	}
	r = s.api(t, tok, "GET", "/users/me", nil, nil)
	want(t, r, 200)
	if r.Str("user.id") != env.W.Mem.ID || r.Get("bot") != nil {
		t.Errorf("users/me of a user token: want {user, bot:null}%s", r)
	}
	r = s.api(t, tok, "POST", "/auth/rotate", nil, nil)
	wantError(t, r, 403, "forbidden")
}

// authRoute is one Web API route of docs/api.md "Endpoints" with the token
// types it takes and the scope it needs.
type authRoute struct {
	method, path string // {chan}, {msg}, {user}, {id} are filled in
	bot, user    bool   // token types the route takes
	scope        string // "" = none
	body         func(chanID, msgID string) any
}

func (r authRoute) name() string { return r.method + " " + r.path }

// Every Web API route that takes a bearer token (docs/api.md "Endpoints").
var authRoutes = []authRoute{
	{"GET", "/auth/test", true, true, "", nil},
	{"POST", "/auth/rotate", true, false, "", nil},
	{"GET", "/conversations", true, true, "conversations:read", nil},
	{"GET", "/conversations/{chan}", true, true, "conversations:read", nil},
	{"GET", "/conversations/{chan}/members", true, true, "conversations:read", nil},
	{"GET", "/conversations/{chan}/messages", true, true, "messages:read", nil},
	{"GET", "/messages/{msg}", true, true, "messages:read", nil},
	{"GET", "/messages/{msg}/replies", true, true, "messages:read", nil},
	{"POST", "/messages", true, true, "messages:write", func(c, _ string) any { return postBody(c, "refused post") }},
	{"PATCH", "/messages/{msg}", true, true, "messages:write", func(string, string) any { return map[string]any{"text": "refused edit"} }},
	{"DELETE", "/messages/{msg}", true, true, "messages:write", nil},
	{"POST", "/reactions", false, true, "reactions:write", func(_, m string) any { return map[string]any{"messageId": m, "reaction": "heart"} }},
	{"DELETE", "/reactions?messageId={msg}&reaction=heart", false, true, "reactions:write", nil},
	{"POST", "/files", false, true, "files:write", func(c, _ string) any { return uploadBody(c, "text/plain", []byte("refused")) }},
	{"GET", "/files/{id}", true, true, "files:read", nil},
	{"GET", "/files/{id}/content", true, true, "files:read", nil},
	{"GET", "/users", true, true, "users:read", nil},
	{"GET", "/users/me", true, true, "", nil},
	{"GET", "/users/{user}", true, true, "users:read", nil},
	{"GET", "/runs/{id}", false, true, "runs:read", nil},
	{"GET", "/installation", true, true, "", nil},
}

// allScopes are every scope a route of authRoutes needs.
var allScopes = []string{"conversations:read", "messages:read", "messages:write", "reactions:write",
	"files:read", "files:write", "users:read", "runs:read"}

// docs/api.md "Authentication", "Scopes", "Token type per method" and
// "Errors", for every route of the Web API: no token, a malformed
// Authorization header, a revoked or expired token, a token of the wrong
// type and a token without the route's scope each get exactly their status,
// code, headers and error body; none of them echoes the token, and none
// changes anything.
func TestAuth_EveryRoute(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s, allScopes...)
	w := env.W
	msg := jstr(env.In.post(t, env.Chan.ID, "the message"), "id")

	// A user token that expires (1 hour), then everything else.
	expired := userToken(t, env.In, w.Admin.ID)
	want(t, s.api(t, expired, "GET", "/auth/test", nil, nil), 200) // cached before it expires
	advance(t, s, time.Hour+time.Minute)
	user := userToken(t, env.In, w.Mem.ID)
	revoked := env.In.newToken(t)
	want(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": revoked}), 200)
	revokedUser := userToken(t, env.In, w.Owner.ID)
	want(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": revokedUser}), 200)

	// A bot and a user token without each scope.
	type pair struct{ bot, user string }
	lacking := map[string]pair{}
	for _, scope := range allScopes {
		in := w.install(t, w.kit(t, without(allScopes, scope)...), env.Chan.ID)
		lacking[scope] = pair{in.Token, userToken(t, in, w.Mem.ID)}
	}

	history := func() int {
		t.Helper()
		r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?limit=200", nil)
		want(t, r, 200)
		return len(jarr(r.JSON, "messages"))
	}
	before := history()

	call := func(t *testing.T, rt authRoute, authorization string) *Resp {
		t.Helper()
		path := strings.NewReplacer("{chan}", env.Chan.ID, "{msg}", msg, "{user}", w.Mem.ID, "{id}", newUUID()).Replace(rt.path)
		hdr := map[string]string{}
		if authorization != "" {
			hdr["Authorization"] = authorization
		}
		var body any
		if rt.body != nil {
			body = rt.body(env.Chan.ID, msg)
		}
		return s.do(t, rt.method, "/api/v1"+path, "", body, hdr)
	}
	const (
		challenge          = `Bearer realm="kit"`
		challengeWithError = `Bearer realm="kit", error="invalid_token"`
	)
	unauthorized := []struct {
		name, authorization, challenge string
	}{
		{"no Authorization header", "", challenge},
		{"an empty bearer", "Bearer ", challengeWithError},
		{"another scheme", "Basic " + env.In.Token, challengeWithError},
		{"a truncated bot token", "Bearer " + env.In.Token[:len(env.In.Token)-1], challengeWithError},
		{"an unknown bot token", "Bearer kbot_" + randToken(), challengeWithError},
		{"an unknown user token", "Bearer kusr_" + randToken(), challengeWithError},
		{"a refresh token", "Bearer kref_" + randToken(), challengeWithError},
		{"a revoked bot token", "Bearer " + revoked, challengeWithError},
		{"a revoked user token", "Bearer " + revokedUser, challengeWithError},
		{"an expired user token", "Bearer " + expired, challengeWithError},
		{"the operator token", "Bearer " + s.OpToken, challengeWithError},
	}
	for _, rt := range authRoutes {
		t.Run(rt.name(), func(t *testing.T) {
			for _, tc := range unauthorized {
				t.Run(tc.name+" is 401 invalid_token", func(t *testing.T) {
					r := call(t, rt, tc.authorization)
					wantError(t, r, 401, "invalid_token")
					if got := r.Header.Get("WWW-Authenticate"); got != tc.challenge {
						t.Errorf("WWW-Authenticate = %q, want %q%s", got, tc.challenge, r)
					}
					noEcho(t, r, strings.TrimPrefix(strings.TrimPrefix(tc.authorization, "Bearer "), "Basic "))
				})
			}
			forbidden := func(t *testing.T, token string) {
				t.Helper()
				r := call(t, rt, "Bearer "+token)
				wantError(t, r, 403, "forbidden")
				if r.Header.Get("X-Service-Required-Scope") != "" || r.Header.Get("WWW-Authenticate") != "" {
					t.Errorf("403 forbidden carries no scope header and no challenge%s", r)
				}
				noEcho(t, r, token)
			}
			if !rt.bot {
				t.Run("a bot token is 403 forbidden", func(t *testing.T) { forbidden(t, env.In.Token) })
				t.Run("a bot token without the scope is 403 forbidden", func(t *testing.T) {
					if rt.scope != "" {
						forbidden(t, lacking[rt.scope].bot)
					}
				})
			}
			if !rt.user {
				t.Run("a user token is 403 forbidden", func(t *testing.T) { forbidden(t, user) })
			}
			t.Run("a developer token", func(t *testing.T) {
				r := call(t, rt, "Bearer "+w.Dev)
				if rt.scope == "" && rt.bot && rt.user {
					// docs/api.md "Token type per method": the no-scope routes answer no 403.
					wantError(t, r, 401, "invalid_token")
				} else {
					wantError(t, r, 403, "forbidden")
				}
				noEcho(t, r, w.Dev)
			})
			if rt.scope == "" {
				return
			}
			for _, c := range []struct {
				kind, token string
				takes       bool
			}{{"bot", lacking[rt.scope].bot, rt.bot}, {"user", lacking[rt.scope].user, rt.user}} {
				if !c.takes {
					continue
				}
				t.Run("a "+c.kind+" token without "+rt.scope+" is 403 missing_scope", func(t *testing.T) {
					r := call(t, rt, "Bearer "+c.token)
					wantError(t, r, 403, "missing_scope")
					if got := r.Header.Get("X-Service-Required-Scope"); got != rt.scope {
						t.Errorf("X-Service-Required-Scope = %q, want %q%s", got, rt.scope, r)
					}
					noEcho(t, r, c.token)
				})
			}
		})
	}

	t.Run("refused calls changed nothing", func(t *testing.T) {
		if got := history(); got != before {
			t.Errorf("history has %d messages after the refused calls, had %d", got, before)
		}
		r := env.In.api(t, "GET", "/messages/"+msg, nil)
		want(t, r, 200)
		if r.Str("message.text") != "the message" || r.Get("message.deletedAt") != nil || r.Get("message.editedAt") != nil {
			t.Errorf("the message changed%s", r)
		}
		// The bot token was never rotated by a refused call.
		want(t, env.In.api(t, "POST", "/auth/rotate", nil), 200)
	})
}

// Every developer API route (docs/api.md "Developer API", docs/decisions.md
// "Developer API"); {kit}, {inst} and {id} are filled in.
var devAuthRoutes = []struct {
	method, path string
	body         any
}{
	{"GET", "/dev/me", nil},
	{"GET", "/dev/kits", nil},
	{"POST", "/dev/kits/validate", map[string]any{"manifest": "{}"}},
	{"POST", "/dev/kits/versions", map[string]any{"manifest": "{}"}},
	{"GET", "/dev/kits/{kit}", nil},
	{"GET", "/dev/kits/{kit}/logs", nil},
	{"POST", "/dev/kits/{kit}/versions/1.0.0/publish", nil},
	{"POST", "/dev/kits/{kit}/domains", map[string]any{"domain": "example.com"}},
	{"POST", "/dev/kits/{kit}/domains/example.com/verify", map[string]any{}},
	{"DELETE", "/dev/kits/{kit}/domains/example.com", nil},
	{"POST", "/dev/kits/{kit}/install-link", nil},
	{"DELETE", "/dev/kits/{kit}/install-link", nil},
	{"POST", "/dev/kits/{kit}/test-events", map[string]any{}},
	{"GET", "/dev/installations/{inst}/deliveries", nil},
	{"POST", "/dev/installations/{inst}/deliveries/redeliver", map[string]any{}},
	{"POST", "/dev/sandbox/dev-install", map[string]any{"manifest": "{}", "url": "https://example.com"}},
}

// docs/api.md "Authentication" and "Token type per method" on the developer
// API: no token, a malformed header, a revoked or expired developer token,
// or one of a deactivated member is 401 invalid_token with its challenge; a
// bot or user token is 403 forbidden; nothing is echoed.
func TestAuth_EveryDeveloperRoute(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	w := env.W
	user := userToken(t, env.In, w.Mem.ID)

	short := w.S.setup(t, "POST", s.OpToken, "/ops/v1/users/"+w.Admin.ID+"/developer-tokens", map[string]any{"name": "short", "ttlSeconds": 60})
	want(t, short, 201)
	expired := short.Str("token")
	want(t, s.api(t, expired, "GET", "/dev/me", nil, nil), 200) // cached before it expires
	advance(t, s, 2*time.Minute)
	revoked, revokedID := w.devToken(t, w.Owner.ID)
	want(t, s.ops(t, "DELETE", "/ops/v1/developer-tokens/"+revokedID, nil), 200)
	leaver := w.user(t, "member")
	gone, _ := w.devToken(t, leaver.ID)
	want(t, s.api(t, gone, "GET", "/dev/me", nil, nil), 200)
	want(t, s.ops(t, "DELETE", "/ops/v1/users/"+leaver.ID, nil), 200)

	const (
		challenge          = `Bearer realm="kit"`
		challengeWithError = `Bearer realm="kit", error="invalid_token"`
	)
	for _, rt := range devAuthRoutes {
		path := "/api/v1" + strings.NewReplacer("{kit}", env.Kit.ID, "{inst}", env.In.ID).Replace(rt.path)
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			for _, tc := range []struct{ name, authorization, challenge string }{
				{"no Authorization header", "", challenge},
				{"an empty bearer", "Bearer ", challengeWithError},
				{"another scheme", "Basic " + w.Dev, challengeWithError},
				{"an unknown developer token", "Bearer kdev_" + randToken(), challengeWithError},
				{"a truncated developer token", "Bearer " + w.Dev[:len(w.Dev)-1], challengeWithError},
				{"a revoked developer token", "Bearer " + revoked, challengeWithError},
				{"an expired developer token", "Bearer " + expired, challengeWithError},
				{"a deactivated member's developer token", "Bearer " + gone, challengeWithError},
				{"the operator token", "Bearer " + s.OpToken, challengeWithError},
			} {
				t.Run(tc.name+" is 401 invalid_token", func(t *testing.T) {
					hdr := map[string]string{}
					if tc.authorization != "" {
						hdr["Authorization"] = tc.authorization
					}
					r := s.do(t, rt.method, path, "", rt.body, hdr)
					wantError(t, r, 401, "invalid_token")
					if got := r.Header.Get("WWW-Authenticate"); got != tc.challenge {
						t.Errorf("WWW-Authenticate = %q, want %q%s", got, tc.challenge, r)
					}
					noEcho(t, r, strings.TrimPrefix(strings.TrimPrefix(tc.authorization, "Bearer "), "Basic "))
				})
			}
			for _, tc := range []struct{ name, token string }{{"a bot token", env.In.Token}, {"a user token", user}} {
				t.Run(tc.name+" is 403 forbidden", func(t *testing.T) {
					r := s.do(t, rt.method, path, tc.token, rt.body, nil)
					wantError(t, r, 403, "forbidden")
					noEcho(t, r, tc.token)
				})
			}
		})
	}
}
