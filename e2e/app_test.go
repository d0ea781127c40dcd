package e2e

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// OPERATIONS.md section 3: the app host's sign-in and authorize pages.
func TestApp_Authorize(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s, "conversations:read", "messages:write", "users:read")
	in := env.In
	in.prepareOAuth(t)
	cookie, _ := webSession(t, s, env.W.Mem.ID)
	_, challenge := pkce()
	good := func() url.Values { return authorizeQuery(in, "user", challenge, "state-1") }
	html := func(t *testing.T, r *Resp) {
		t.Helper()
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("want an HTML page%s", r)
		}
	}

	t.Run("without a session the page redirects to sign-in", func(t *testing.T) {
		r := s.page(t, "GET", "/app/kits/authorize?"+good().Encode(), "", nil)
		want(t, r, 302)
		loc, err := url.Parse(r.Header.Get("Location"))
		if err != nil || loc.Path != "/app/signin" || !strings.HasPrefix(loc.Query().Get("next"), "/app/kits/authorize?") {
			t.Fatalf("Location %q, want /app/signin?next=...%s", r.Header.Get("Location"), r)
		}
	})
	t.Run("the consent page names the Kit, the workspace and each scope in words", func(t *testing.T) {
		r := s.page(t, "GET", "/app/kits/authorize?"+good().Encode(), cookie, nil)
		want(t, r, 200)
		html(t, r)
		body := string(r.Body)
		for _, s := range []string{"Kit " + env.Kit.Slug, env.W.Name, "See the people of the workspace",
			"Send messages", `<form method="post" action="/app/kits/authorize">`, `name="decision" value="approve"`,
			`name="decision" value="deny"`, `name="state" value="state-1"`, `name="code_challenge" value="` + challenge + `"`} {
			if !strings.Contains(body, s) {
				t.Errorf("the consent page lacks %q%s", s, r)
			}
		}
		if r.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("the consent page must not be framed%s", r)
		}
	})
	bad := []struct {
		name string
		edit func(q url.Values)
	}{
		{"a redirect_uri not in the manifest", func(q url.Values) { q.Set("redirect_uri", "https://evil.example.com/cb") }},
		{"a redirect_uri that only starts like a registered one", func(q url.Values) { q.Set("redirect_uri", e2eRedirect+"/more") }},
		{"an unknown Kit", func(q url.Values) { q.Set("kit", "no-such-kit-"+randHex(4)) }},
		{"no code_challenge for a user token", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }},
		{"the plain PKCE method", func(q url.Values) { q.Set("code_challenge_method", "plain") }},
		{"an unknown token_type", func(q url.Values) { q.Set("token_type", "admin") }},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is a 400 page, never a redirect", func(t *testing.T) {
			q := good()
			tc.edit(q)
			for _, c := range []string{cookie, ""} {
				r := s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), c, nil)
				want(t, r, 400)
				html(t, r)
				if r.Header.Get("Location") != "" {
					t.Errorf("redirected%s", r)
				}
			}
			form := url.Values{}
			for k, v := range q {
				form[k] = v
			}
			home := s.page(t, "GET", "/app/", cookie, nil)
			form.Set("csrf", csrfOf(t, home))
			for _, d := range []string{"approve", "deny"} {
				form.Set("decision", d)
				r := s.page(t, "POST", "/app/kits/authorize", cookie, form)
				want(t, r, 400)
				if r.Header.Get("Location") != "" {
					t.Errorf("%s redirected%s", d, r)
				}
			}
		})
	}
	t.Run("a Kit without oauth.userScopes cannot be authorized for user tokens", func(t *testing.T) {
		k := env.W.kit(t, "users:read")
		want(t, env.W.uploadVersion(t, withOAuth(k.Manifest, "1.0.1", []string{}), true), 201)
		other := env.W.install(t, k)
		q := authorizeQuery(other, "user", challenge, "s")
		want(t, s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), cookie, nil), 400)
	})
	t.Run("a POST with a wrong or missing csrf is 403 csrf_rejected", func(t *testing.T) {
		form := good()
		form.Set("decision", "approve")
		for _, csrf := range []string{"", "wrong", randToken()} {
			if csrf != "" {
				form.Set("csrf", csrf)
			}
			r := s.page(t, "POST", "/app/kits/authorize", cookie, form)
			want(t, r, 403)
			if !strings.Contains(string(r.Body), "csrf_rejected") || r.Header.Get("Location") != "" {
				t.Errorf("want a csrf_rejected page%s", r)
			}
		}
		// Another session's token does not fit this session.
		otherCookie, _ := webSession(t, s, env.W.Mem.ID)
		form.Set("csrf", csrfOf(t, s.page(t, "GET", "/app/", otherCookie, nil)))
		want(t, s.page(t, "POST", "/app/kits/authorize", cookie, form), 403)
	})
	t.Run("deny redirects with error=access_denied and the state", func(t *testing.T) {
		q := redirected(t, consent(t, s, cookie, good(), "deny"))
		if q.Get("error") != "access_denied" || q.Get("state") != "state-1" || q.Get("code") != "" {
			t.Errorf("deny redirect query %v", q)
		}
	})
	t.Run("approve redirects with a code and the state", func(t *testing.T) {
		q := redirected(t, consent(t, s, cookie, good(), "approve"))
		if !strings.HasPrefix(q.Get("code"), "kcode_") || q.Get("state") != "state-1" {
			t.Errorf("approve redirect query %v", q)
		}
	})
}

// OPERATIONS.md section 3: sign-in with email and password sets the session
// cookie; the authorize page follows.
func TestApp_SignIn(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s, "users:read")
	in := env.In
	in.prepareOAuth(t)
	email, password := "pw-"+randHex(6)+"@example.com", "correct horse "+randHex(4)
	r := s.ops(t, "POST", "/ops/v1/workspaces/"+env.W.ID+"/users", map[string]any{
		"displayName": "Pat", "email": email, "role": "member", "password": password,
	})
	want(t, r, 201)
	userID := r.Str("user.id")
	_, challenge := pkce()
	next := "/app/kits/authorize?" + authorizeQuery(in, "user", challenge, "st").Encode()

	page := s.page(t, "GET", "/app/signin?next="+url.QueryEscape(next), "", nil)
	want(t, page, 200)
	csrfCookie := ""
	for _, c := range page.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "kit_csrf=") {
			csrfCookie = strings.SplitN(c, ";", 2)[0]
		}
	}
	if csrfCookie == "" || !strings.Contains(string(page.Body), `name="workspace" value="`+env.W.ID+`"`) {
		t.Fatalf("the sign-in page must set kit_csrf and carry the workspace of next%s", page)
	}
	form := func(pw string) url.Values {
		return url.Values{"email": {email}, "password": {pw}, "workspace": {env.W.ID}, "next": {next}, "csrf": {csrfOf(t, page)}}
	}

	t.Run("a wrong password is 401 and sets no session", func(t *testing.T) {
		r := s.page(t, "POST", "/app/signin", csrfCookie, form("wrong password"))
		want(t, r, 401)
		if strings.Contains(strings.Join(r.Header.Values("Set-Cookie"), "\n"), "kit_session=k") {
			t.Errorf("a failed sign-in set a session%s", r)
		}
		noEcho(t, r, "wrong password", email)
	})
	t.Run("an unknown email is 401 too", func(t *testing.T) {
		f := form(password)
		f.Set("email", "nobody-"+randHex(4)+"@example.com")
		want(t, s.page(t, "POST", "/app/signin", csrfCookie, f), 401)
	})
	t.Run("a sign-in without the csrf cookie is 403 csrf_rejected", func(t *testing.T) {
		want(t, s.page(t, "POST", "/app/signin", "", form(password)), 403)
	})
	t.Run("the right password sets kit_session (HttpOnly, SameSite=Lax) and returns to next", func(t *testing.T) {
		r := s.page(t, "POST", "/app/signin", csrfCookie, form(password))
		if r.Status != 303 && r.Status != 302 {
			t.Fatalf("want a redirect%s", r)
		}
		if r.Header.Get("Location") != next {
			t.Errorf("Location %q, want next", r.Header.Get("Location"))
		}
		session := ""
		for _, c := range r.Header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "kit_session=") {
				session = c
			}
		}
		lower := strings.ToLower(session)
		if session == "" || !strings.Contains(lower, "httponly") || !strings.Contains(lower, "samesite=lax") || strings.Contains(lower, "secure") {
			t.Fatalf("Set-Cookie %q: want kit_session, HttpOnly, SameSite=Lax, not Secure on http", session)
		}
		cookie := strings.SplitN(session, ";", 2)[0]
		page := s.page(t, "GET", next, cookie, nil)
		want(t, page, 200)
		if !strings.Contains(string(page.Body), "Pat") {
			t.Errorf("the consent page should name the signed-in member%s", page)
		}
		q := redirected(t, consent(t, s, cookie, authorizeQuery(in, "user", challenge, "st"), "approve"))
		if q.Get("code") == "" {
			t.Fatalf("no code")
		}
		_ = userID
	})
	t.Run("next outside the app host is not followed", func(t *testing.T) {
		f := form(password)
		f.Set("next", "https://evil.example.com/")
		r := s.page(t, "POST", "/app/signin", csrfCookie, f)
		if loc := r.Header.Get("Location"); loc != "/app/" {
			t.Errorf("Location %q, want /app/%s", loc, r)
		}
	})
}

// pageForm is the form of an authorize page as a browser submits it: every
// hidden input, and the decision.
func pageForm(page *Resp, decision string) url.Values {
	form := url.Values{}
	for _, m := range hiddenInput.FindAllSubmatch(page.Body, -1) {
		form.Set(html.UnescapeString(string(m[1])), html.UnescapeString(string(m[2])))
	}
	form.Set("decision", decision)
	return form
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// OPERATIONS.md section 3: the consent page names the scopes, and the
// member approves what it named. An update of the installation between the
// page and the approval that asks for more is refused with a 409 page, as
// the install page refuses a version that is no longer the one it showed
// (docs/decisions.md): the code carried the wider scopes.
func TestApp_ConsentGrantsOnlyTheScopesShown(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: baseScopes}
	k.Manifest = withOAuth(manifest(k.Slug, "1.0.0", baseScopes), "1.0.0", []string{"conversations:read"})
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	in := w.install(t, k)
	secret := in.prepareOAuth(t)
	cookie, _ := webSession(t, s, w.Mem.ID)
	verifier, challenge := pkce()
	pageOf := func() *Resp {
		page := s.page(t, "GET", "/app/kits/authorize?"+authorizeQuery(in, "user", challenge, "st-1").Encode(), cookie, nil)
		want(t, page, 200)
		return page
	}

	t.Run("the page's own form gives a code of the scopes it named", func(t *testing.T) {
		code := redirected(t, s.page(t, "POST", "/app/kits/authorize", cookie, pageForm(pageOf(), "approve"))).Get("code")
		ex := exchange(t, in, secret, code, verifier)
		want(t, ex, 200)
		if got := strs(jarr(ex.JSON, "scopes")); len(got) != 1 || got[0] != "conversations:read" {
			t.Fatalf("scopes %v, want the page's [conversations:read]%s", got, ex)
		}
	})
	t.Run("an installation that asks for more since the page: 409, no code", func(t *testing.T) {
		page := pageOf()
		wider := withOAuth(k.Manifest, "1.1.0", []string{"conversations:read", "messages:read", "users:read"})
		want(t, w.uploadVersion(t, wider, true), 201)
		want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID}), 201)
		r := s.page(t, "POST", "/app/kits/authorize", cookie, pageForm(page, "approve"))
		want(t, r, 409)
		if r.Header.Get("Location") != "" {
			t.Fatalf("redirected%s", r)
		}
	})
}
