package e2e

import (
	"strings"
	"testing"
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
