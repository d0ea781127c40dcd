package e2e

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// advance moves the server's test clock forward.
func advance(t testing.TB, s *Server, d time.Duration) {
	t.Helper()
	want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": d.Seconds()}), 200)
}

func authTest(t testing.TB, s *Server, token string) *Resp {
	t.Helper()
	return s.api(t, token, "GET", "/auth/test", nil, nil)
}

// docs/api.md "Bot token": rotation, the 24-hour overlap, one rotation
// per token.
func TestCredentials_BotTokenRotation(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	old := env.In.Token

	r := s.api(t, old, "POST", "/auth/rotate", nil, nil)
	want(t, r, 200)
	next := r.Str("token")
	if !strings.HasPrefix(next, "kbot_") || len(next) != len("kbot_")+43 || next == old {
		t.Fatalf("rotate must return a new kbot_ token%s", r)
	}
	exp := parseTime(t, "previousTokenExpiresAt", r.Str("previousTokenExpiresAt"))
	if d := time.Until(exp); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("previousTokenExpiresAt is %v away, want 24 h%s", d, r)
	}

	t.Run("both tokens work during the overlap", func(t *testing.T) {
		want(t, authTest(t, s, old), 200)
		want(t, authTest(t, s, next), 200)
	})
	t.Run("rotating the same token again is 409 conflict", func(t *testing.T) {
		wantError(t, s.api(t, old, "POST", "/auth/rotate", nil, nil), 409, "conflict")
	})
	t.Run("after 24 hours the old token is 401 and the new one works", func(t *testing.T) {
		advance(t, s, 24*time.Hour+time.Minute)
		wantError(t, authTest(t, s, old), 401, "invalid_token")
		want(t, authTest(t, s, next), 200)
	})
	t.Run("the new token can be rotated in turn", func(t *testing.T) {
		want(t, s.api(t, next, "POST", "/auth/rotate", nil, nil), 200)
	})
	t.Run("the old token, swept by that rotation, is 401; revoking it is 404 as an unknown one", func(t *testing.T) {
		wantError(t, authTest(t, s, old), 401, "invalid_token")
		wantError(t, s.api(t, old, "POST", "/auth/rotate", nil, nil), 401, "invalid_token")
		wantError(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": old}), 404, "not_found")
	})
	t.Run("a user token cannot rotate: 403 forbidden", func(t *testing.T) {
		wantError(t, s.api(t, userToken(t, env.In, env.W.Mem.ID), "POST", "/auth/rotate", nil, nil), 403, "forbidden")
	})
}

// OPERATIONS.md section 2: client and signing secrets, shown once, with
// their overlaps (docs/api.md "Client and signing secrets").
func TestCredentials_KitSecrets(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	k := env.Kit
	// A bad code with good client credentials is 400; with bad ones 401.
	probe := func(secret string) *Resp {
		return s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
			"grantType": "authorization_code", "clientId": k.ID, "clientSecret": secret,
			"code": "kcode_" + randToken(), "redirectUri": e2eRedirect,
		}, nil)
	}

	r := s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/client-secret", nil)
	want(t, r, 201)
	first := r.Str("clientSecret")
	if !strings.HasPrefix(first, "kcs_") || len(first) != len("kcs_")+43 || r.Str("createdAt") == "" {
		t.Fatalf("want {clientSecret: kcs_..., createdAt}%s", r)
	}
	wantError(t, probe(first), 400, "validation_error")
	r = s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/client-secret", nil)
	want(t, r, 201)
	second := r.Str("clientSecret")

	t.Run("the previous client secret works 24 hours more", func(t *testing.T) {
		wantError(t, probe(first), 400, "validation_error")
		wantError(t, probe(second), 400, "validation_error")
		advance(t, s, 24*time.Hour+time.Minute)
		r := probe(first)
		wantError(t, r, 401, "invalid_credentials")
		noEcho(t, r, first)
		wantError(t, probe(second), 400, "validation_error")
	})
	t.Run("an unknown client secret or client id is 401 invalid_credentials", func(t *testing.T) {
		wantError(t, probe("kcs_"+randToken()), 401, "invalid_credentials")
		wantError(t, probe("not-a-secret"), 401, "invalid_credentials")
		r := s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
			"grantType": "authorization_code", "clientId": newUUID(), "clientSecret": second,
			"code": "kcode_" + randToken(), "redirectUri": e2eRedirect,
		}, nil)
		wantError(t, r, 401, "invalid_credentials")
	})
	t.Run("signing secret: shown once, generation counts up, previous valid 7 days", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/signing-secret", nil)
		want(t, r, 201)
		if !strings.HasPrefix(r.Str("signingSecret"), "kss_") || r.Get("generation") != float64(1) || r.Get("previousExpiresAt") != nil {
			t.Fatalf("first signing secret: want kss_..., generation 1, previousExpiresAt null%s", r)
		}
		r = s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/signing-secret", nil)
		want(t, r, 201)
		if r.Get("generation") != float64(2) {
			t.Fatalf("generation must count up%s", r)
		}
		exp := parseTime(t, "previousExpiresAt", r.Str("previousExpiresAt"))
		now := parseTime(t, "createdAt", r.Str("createdAt"))
		if exp.Sub(now) != 7*24*time.Hour {
			t.Errorf("previousExpiresAt - createdAt = %v, want 7 days%s", exp.Sub(now), r)
		}
	})
	t.Run("secrets of an unknown Kit are 404", func(t *testing.T) {
		wantError(t, s.ops(t, "POST", "/ops/v1/kits/"+newUUID()+"/client-secret", nil), 404, "not_found")
	})
}

// docs/api.md "Authorization code" and "Auth" (kit.access).
func TestCredentials_CodeExchange(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	in := env.In
	secret := in.prepareOAuth(t)
	cookie, _ := webSession(t, s, env.W.Mem.ID)
	newCode := func(t *testing.T) (code, verifier string) {
		verifier, challenge := pkce()
		return approveCode(t, in, cookie, "user", challenge), verifier
	}

	t.Run("a code exchanges once for a user token and a refresh token", func(t *testing.T) {
		code, verifier := newCode(t)
		r := exchange(t, in, secret, code, verifier)
		want(t, r, 200)
		if r.Str("tokenType") != "user" || r.Get("expiresIn") != float64(3600) || r.Str("userId") != env.W.Mem.ID ||
			r.Str("installationId") != in.ID || r.Str("workspace.id") != env.W.ID || r.Str("workspace.name") != env.W.Name {
			t.Errorf("want {tokenType: user, accessToken, refreshToken, expiresIn: 3600, userId, installationId, workspace, scopes}%s", r)
		}
		if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, userScopesOf(env.Kit.Scopes)) {
			t.Errorf("scopes %v, want the manifest's userScopes%s", got, r)
		}
		tok := r.Str("accessToken")
		a := authTest(t, s, tok)
		want(t, a, 200)
		if a.Str("tokenType") != "user" || a.Str("userId") != env.W.Mem.ID {
			t.Errorf("auth/test of the user token%s", a)
		}
		wantValidation(t, exchange(t, in, secret, code, verifier), "code")
	})
	t.Run("the code verifier is required and must match", func(t *testing.T) {
		code, verifier := newCode(t)
		wantValidation(t, exchange(t, in, secret, code, ""), "codeVerifier")
		other, _ := pkce()
		r := exchange(t, in, secret, code, other)
		wantValidation(t, r, "codeVerifier", other)
		wantValidation(t, exchange(t, in, secret, code, "short"), "codeVerifier")
		want(t, exchange(t, in, secret, code, verifier), 200)
	})
	t.Run("redirectUri must equal the authorization's", func(t *testing.T) {
		code, verifier := newCode(t)
		r := s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
			"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret,
			"code": code, "redirectUri": e2eRedirect + "?x=1", "codeVerifier": verifier,
		}, nil)
		wantValidation(t, r, "redirectUri")
	})
	t.Run("bad client credentials are 401 invalid_credentials before the code is looked at", func(t *testing.T) {
		code, verifier := newCode(t)
		r := exchange(t, in, "kcs_"+randToken(), code, verifier)
		wantError(t, r, 401, "invalid_credentials")
		want(t, exchange(t, in, secret, code, verifier), 200) // the code was not spent
	})
	t.Run("malformed bodies are 400 naming the path", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body map[string]any
			path string
		}{
			{"grantType is required", map[string]any{"clientId": in.Kit.ID, "clientSecret": secret}, "grantType"},
			{"grantType must be known", map[string]any{"grantType": "password", "clientId": in.Kit.ID, "clientSecret": secret}, "grantType"},
			{"clientId must be a UUID", map[string]any{"grantType": "refresh_token", "clientId": "x", "clientSecret": secret, "refreshToken": "kref_x"}, "clientId"},
			{"code is required", map[string]any{"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret, "redirectUri": e2eRedirect}, "code"},
			{"redirectUri is required", map[string]any{"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret, "code": "kcode_x"}, "redirectUri"},
			{"refreshToken is required", map[string]any{"grantType": "refresh_token", "clientId": in.Kit.ID, "clientSecret": secret}, "refreshToken"},
			{"codeVerifier must be a string", map[string]any{"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret, "code": "kcode_x", "redirectUri": e2eRedirect, "codeVerifier": 5}, "codeVerifier"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.api(t, "", "POST", "/oauth/kit.access", tc.body, nil)
				wantValidation(t, r, tc.path)
				noEcho(t, r, secret)
			})
		}
	})
	t.Run("a code expires after 10 minutes", func(t *testing.T) {
		code, verifier := newCode(t)
		advance(t, s, 10*time.Minute+time.Second)
		wantValidation(t, exchange(t, in, secret, code, verifier), "code")
	})
}

// docs/api.md "User token and refresh token", every row.
func TestCredentials_UserTokens(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	in := env.In

	t.Run("refresh returns a new access token and a new refresh token; the spent one used again revokes the grant", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		other := authorizeGrant(t, in, env.W.Mem.ID)
		r := refresh(t, in, g.Secret, g.refresh())
		want(t, r, 200)
		access2, refresh2 := r.Str("accessToken"), r.Str("refreshToken")
		if access2 == g.access() || refresh2 == g.refresh() || r.Get("expiresIn") != float64(3600) {
			t.Fatalf("want new tokens%s", r)
		}
		want(t, authTest(t, s, access2), 200)
		wantValidation(t, refresh(t, in, g.Secret, g.refresh()), "refreshToken")
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
		wantError(t, authTest(t, s, access2), 401, "invalid_token")
		wantValidation(t, refresh(t, in, g.Secret, refresh2), "refreshToken")
		want(t, authTest(t, s, other.access()), 200) // another authorization is untouched
	})
	t.Run("concurrent refreshes with the same token: exactly one wins", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		const racers = 8
		var wg sync.WaitGroup
		statuses := make([]int, racers)
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := s.request("POST", "/api/v1/oauth/kit.access", "", map[string]any{
					"grantType": "refresh_token", "clientId": in.Kit.ID, "clientSecret": g.Secret, "refreshToken": g.refresh(),
				}, nil)
				if err == nil {
					statuses[i] = r.Status
				}
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, st := range statuses {
			switch st {
			case 200:
				won++
			case 400:
			default:
				t.Errorf("a refresh answered %d, want 200 or 400", st)
			}
		}
		if won != 1 {
			t.Errorf("%d of %d concurrent refreshes won, want exactly 1 (statuses %v)", won, racers, statuses)
		}
	})
	t.Run("signing out through the operator ends the user tokens of that session", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		other := authorizeGrant(t, in, env.W.Mem.ID)
		want(t, authTest(t, s, g.access()), 200)
		want(t, s.ops(t, "DELETE", "/ops/v1/sessions/"+g.SessionID, nil), 200)
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
		wantValidation(t, refresh(t, in, g.Secret, g.refresh()), "refreshToken")
		want(t, authTest(t, s, other.access()), 200)
	})
	t.Run("signing out on the app host ends the user tokens of that session", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		want(t, authTest(t, s, g.access()), 200)
		home := s.page(t, "GET", "/app/", g.Cookie, nil)
		want(t, home, 200)
		r := s.page(t, "POST", "/app/signout", g.Cookie, url.Values{"csrf": {csrfOf(t, home)}})
		if r.Status != 303 && r.Status != 302 {
			t.Fatalf("sign-out: want a redirect%s", r)
		}
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
	})
	t.Run("revocation through the operator is immediate", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		want(t, authTest(t, s, g.access()), 200)
		want(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": g.access()}), 200)
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
	})
	t.Run("a dropped user scope leaves user tokens at once", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		k := env.Kit
		m := withOAuth(k.Manifest, "1.5.0", userScopesOf(without(k.Scopes, "users:read")))
		want(t, env.W.uploadVersion(t, m, true), 201)
		r := authTest(t, s, g.access())
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, without(k.Scopes, "users:read")) {
			t.Errorf("scopes %v after the upload, before the update, want users:read gone%s", got, r)
		}
		r = refresh(t, in, g.Secret, g.refresh())
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, without(k.Scopes, "users:read")) {
			t.Errorf("a refresh after the upload answered scopes %v, want those auth.test answers, users:read gone%s", got, r)
		}
		g.Resp = r
		want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+env.W.ID+"/installations", map[string]any{"kitId": k.ID}), 201)
		r = authTest(t, s, g.access())
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, without(k.Scopes, "users:read")) {
			t.Errorf("scopes %v, want users:read gone%s", got, r)
		}
		r = s.api(t, g.access(), "GET", "/users", nil, nil)
		wantError(t, r, 403, "missing_scope")
		if r.Header.Get("X-Service-Required-Scope") != "users:read" {
			t.Errorf("X-Service-Required-Scope%s", r)
		}
	})
	t.Run("an access token expires after 1 hour; its refresh token still works", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		advance(t, s, time.Hour+time.Second)
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
		r := refresh(t, in, g.Secret, g.refresh())
		want(t, r, 200)
		want(t, authTest(t, s, r.Str("accessToken")), 200)
	})
	t.Run("uninstall ends user tokens and refresh tokens", func(t *testing.T) {
		g := authorizeGrant(t, in, env.W.Mem.ID)
		want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID, nil), 200)
		wantError(t, authTest(t, s, g.access()), 401, "invalid_token")
		wantValidation(t, refresh(t, in, g.Secret, g.refresh()), "refreshToken")
	})
}

// docs/api.md "The authorization code flow": a bot authorization needs an admin and returns a bot
// token of the installation.
func TestCredentials_BotGrant(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	in := env.In
	secret := in.prepareOAuth(t)

	t.Run("an admin's approval exchanges for a new bot token", func(t *testing.T) {
		cookie, _ := webSession(t, s, env.W.Admin.ID)
		code := approveCode(t, in, cookie, "bot", "")
		r := exchange(t, in, secret, code, "")
		want(t, r, 200)
		if r.Str("tokenType") != "bot" || r.Str("botId") != in.BotID || r.Str("installationId") != in.ID ||
			r.Str("workspace.id") != env.W.ID || r.Get("refreshToken") != nil {
			t.Errorf("want {tokenType: bot, accessToken, botId, installationId, workspace, scopes}%s", r)
		}
		a := authTest(t, s, r.Str("accessToken"))
		want(t, a, 200)
		if a.Str("tokenType") != "bot" || a.Str("botId") != in.BotID {
			t.Errorf("the new bot token%s", a)
		}
		want(t, authTest(t, s, in.Token), 200) // the older bot token keeps working
	})
	t.Run("a member cannot approve a bot authorization: 403 page", func(t *testing.T) {
		cookie, _ := webSession(t, s, env.W.Mem.ID)
		q := authorizeQuery(in, "bot", "", "st")
		r := s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), cookie, nil)
		want(t, r, 403)
		admin, _ := webSession(t, s, env.W.Admin.ID)
		page := s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), admin, nil)
		want(t, page, 200)
		// The member posts a form of their own session.
		home := s.page(t, "GET", "/app/", cookie, nil)
		form := url.Values{}
		for k, v := range q {
			form[k] = v
		}
		form.Set("csrf", csrfOf(t, home))
		form.Set("decision", "approve")
		r = s.page(t, "POST", "/app/kits/authorize", cookie, form)
		want(t, r, 403)
		if r.Header.Get("Location") != "" {
			t.Errorf("a refused approval must not redirect%s", r)
		}
	})
}

// An answer that carries a secret (a token, a Kit's secret, a webhook's
// URL, a session's cookie or CSRF token) says Cache-Control: no-store: no
// cache on the way may keep it (RFC 6749 5.1 for token answers). The
// install link's is TestInstallLink_Lifecycle's.
func TestCredentials_AnswersWithSecretsAreNotStored(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	k := w.webhookKit(t, 5)
	conv := w.channel(t, "public", w.members()...)
	in := w.install(t, k, conv.ID)
	grant := authorizeGrant(t, in, w.Mem.ID)
	csrfOf := func() *Resp { return memberCall(t, s, "GET", "/app/api/session", grant.Cookie, "", nil) }
	for _, tc := range []struct {
		name string
		call func() *Resp
	}{
		{"POST /oauth/kit.access", func() *Resp { return grant.Resp }},
		{"POST /auth/rotate", func() *Resp { return in.api(t, "POST", "/auth/rotate", nil) }},
		{"POST /ops/v1/users/{userId}/sessions", func() *Resp { return s.ops(t, "POST", "/ops/v1/users/"+w.Mem.ID+"/sessions", nil) }},
		{"POST /ops/v1/users/{userId}/developer-tokens", func() *Resp {
			return s.ops(t, "POST", "/ops/v1/users/"+w.Owner.ID+"/developer-tokens", map[string]any{"name": "cache"})
		}},
		{"POST /ops/v1/installations/{id}/bot-tokens", func() *Resp { return s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", nil) }},
		{"POST /ops/v1/installations/{id}/webhooks", func() *Resp {
			return s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/webhooks", map[string]any{"conversationId": conv.ID, "createdByUserId": w.Owner.ID})
		}},
		{"POST /ops/v1/kits/{kitId}/client-secret", func() *Resp { return s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/client-secret", nil) }},
		{"POST /ops/v1/kits/{kitId}/signing-secret", func() *Resp { return s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/signing-secret", nil) }},
		{"GET /app/api/session", csrfOf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.call()
			if r.Status/100 != 2 {
				t.Fatalf("want a 2xx%s", r)
			}
			if got := r.Header.Get("Cache-Control"); got != "no-store" {
				t.Fatalf("Cache-Control %q, want no-store%s", got, r)
			}
		})
	}
}
