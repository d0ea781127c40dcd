package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The authorization flow of OPERATIONS.md section 3 and docs/api.md "Authentication",
// driven over HTTP the way a browser and a Kit's backend would.

// e2eRedirect is the redirect URL of every Kit the flow sets up.
const e2eRedirect = "https://kit.example.com/oauth/callback"

// oauthState is a Kit's setup for the flow: oauth in its manifest and a
// client secret.
type oauthState struct {
	mu           sync.Mutex
	ready        bool
	clientSecret string
}

// noRedirect is the client of the app host: redirects are answers to check,
// not to follow.
var noRedirect = &http.Client{
	Timeout:       client.Timeout,
	Transport:     client.Transport,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// userScopesOf is what a Kit's user tokens may ask for: its scopes but the
// bot-only incoming-webhook.
func userScopesOf(scopes []string) []string {
	out := without(scopes, "incoming-webhook")
	if out == nil {
		out = []string{}
	}
	return out
}

// withOAuth is m with oauth (one redirect URL, userScopes) at version.
func withOAuth(m map[string]any, version string, userScopes []string) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out["version"] = version
	out["oauth"] = map[string]any{"redirectUrls": []string{e2eRedirect}, "userScopes": userScopes}
	return out
}

// prepareOAuth makes the installation's Kit ready for the flow once: a
// manifest with oauth (a new patch version, installed here) and a client
// secret. It returns the client secret.
func (in *Install) prepareOAuth(t testing.TB) string {
	t.Helper()
	k := in.Kit
	k.oauth.mu.Lock()
	defer k.oauth.mu.Unlock()
	if !k.oauth.ready {
		if _, has := k.Manifest["oauth"]; !has {
			var major, minor, patch int
			if _, err := fmt.Sscanf(k.Version, "%d.%d.%d", &major, &minor, &patch); err != nil {
				t.Fatalf("kit version %q: %v", k.Version, err)
			}
			version := fmt.Sprintf("%d.%d.%d", major, minor, patch+1)
			scopes := k.Scopes
			if scopes == nil {
				scopes = []string{}
			}
			m := withOAuth(k.Manifest, version, userScopesOf(scopes))
			want(t, in.W.uploadVersion(t, m, true), 201)
			r := in.W.S.ops(t, "POST", "/ops/v1/workspaces/"+in.W.ID+"/installations", map[string]any{"kitId": k.ID})
			want(t, r, 201)
			if r.Str("installation.id") != in.ID {
				t.Fatalf("updating the installation made another one%s", r)
			}
			k.Manifest, k.Version = m, version
		}
		r := in.W.S.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/client-secret", nil)
		want(t, r, 201)
		k.oauth.clientSecret = r.Str("clientSecret")
		k.oauth.ready = true
	}
	return k.oauth.clientSecret
}

// webSession signs userID in through the operator API.
func webSession(t testing.TB, s *Server, userID string) (cookie, sessionID string) {
	t.Helper()
	r := s.ops(t, "POST", "/ops/v1/users/"+userID+"/sessions", nil)
	want(t, r, 201)
	return r.Str("cookie"), r.Str("sessionId")
}

// pkce returns a fresh code verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = randToken() + "-" + randToken()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeQuery is the query of an authorize request for the installation.
func authorizeQuery(in *Install, tokenType, challenge, state string) url.Values {
	q := url.Values{
		"workspace": {in.W.ID}, "kit": {in.Kit.Slug}, "token_type": {tokenType},
		"redirect_uri": {e2eRedirect}, "state": {state},
	}
	if challenge != "" {
		q.Set("code_challenge", challenge)
		q.Set("code_challenge_method", "S256")
	}
	return q
}

// page performs one app-host request without following redirects. form nil
// sends a GET.
func (s *Server) page(t testing.TB, method, path, cookie string, form url.Values) *Resp {
	t.Helper()
	var body io.Reader
	var raw []byte
	if form != nil {
		raw = []byte(form.Encode())
		body = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	r := &Resp{Method: method, Path: path, ReqHeader: req.Header, ReqBody: raw, Status: res.StatusCode, Header: res.Header}
	r.Body, _ = io.ReadAll(res.Body)
	return r
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the CSRF token of the page's form.
func csrfOf(t testing.TB, r *Resp) string {
	t.Helper()
	m := csrfField.FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("no csrf field in the page%s", r)
	}
	return string(m[1])
}

// consent opens the consent page and answers it with decision; it returns
// the POST's answer.
func consent(t testing.TB, s *Server, cookie string, q url.Values, decision string) *Resp {
	t.Helper()
	r := s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), cookie, nil)
	want(t, r, 200)
	form := url.Values{}
	for k, v := range q {
		form[k] = v
	}
	form.Set("csrf", csrfOf(t, r))
	form.Set("decision", decision)
	return s.page(t, "POST", "/app/kits/authorize", cookie, form)
}

// redirected checks a 302 to e2eRedirect and returns its query.
func redirected(t testing.TB, r *Resp) url.Values {
	t.Helper()
	want(t, r, 302)
	loc, err := url.Parse(r.Header.Get("Location"))
	if err != nil || loc.Scheme+"://"+loc.Host+loc.Path != e2eRedirect {
		t.Fatalf("Location %q is not the redirect URL%s", r.Header.Get("Location"), r)
	}
	return loc.Query()
}

// approveCode runs the authorize page for the member of cookie and returns
// the code.
func approveCode(t testing.TB, in *Install, cookie, tokenType, challenge string) string {
	t.Helper()
	state := randHex(8)
	q := redirected(t, consent(t, in.W.S, cookie, authorizeQuery(in, tokenType, challenge, state), "approve"))
	if q.Get("state") != state || !strings.HasPrefix(q.Get("code"), "kcode_") {
		t.Fatalf("redirect query %v, want code and state %q", q, state)
	}
	return q.Get("code")
}

// exchange calls kit.access with the authorization_code grant.
func exchange(t testing.TB, in *Install, secret, code, verifier string) *Resp {
	t.Helper()
	body := map[string]any{
		"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret,
		"code": code, "redirectUri": e2eRedirect,
	}
	if verifier != "" {
		body["codeVerifier"] = verifier
	}
	return in.W.S.api(t, "", "POST", "/oauth/kit.access", body, nil)
}

// refresh calls kit.access with the refresh_token grant.
func refresh(t testing.TB, in *Install, secret, token string) *Resp {
	t.Helper()
	return in.W.S.api(t, "", "POST", "/oauth/kit.access", map[string]any{
		"grantType": "refresh_token", "clientId": in.Kit.ID, "clientSecret": secret, "refreshToken": token,
	}, nil)
}

// userGrant is one user authorization: its session and the 200 of
// kit.access.
type userGrant struct {
	Cookie, SessionID, Secret string
	Resp                      *Resp
}

func (g *userGrant) access() string  { return g.Resp.Str("accessToken") }
func (g *userGrant) refresh() string { return g.Resp.Str("refreshToken") }

// authorizeGrant runs the whole user flow for userID in a new web session.
func authorizeGrant(t testing.TB, in *Install, userID string) *userGrant {
	t.Helper()
	g := &userGrant{Secret: in.prepareOAuth(t)}
	g.Cookie, g.SessionID = webSession(t, in.W.S, userID)
	verifier, challenge := pkce()
	code := approveCode(t, in, g.Cookie, "user", challenge)
	g.Resp = exchange(t, in, g.Secret, code, verifier)
	want(t, g.Resp, 200)
	if g.Resp.Str("tokenType") != "user" || !strings.HasPrefix(g.access(), "kusr_") || !strings.HasPrefix(g.refresh(), "kref_") {
		t.Fatalf("want a user token and a refresh token%s", g.Resp)
	}
	return g
}

// authorizeUser is authorizeGrant's kit.access answer.
func authorizeUser(t testing.TB, in *Install, userID string) *Resp {
	t.Helper()
	return authorizeGrant(t, in, userID).Resp
}
