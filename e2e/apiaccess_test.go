package e2e

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// The home page and the API access page over plain HTTP (docs/decisions.md
// "Home and API access pages"): what
// the browser test does not need a browser for.

var (
	shownSecret = regexp.MustCompile(`id="shown-secret" value="([^"]+)"`)
	tokenIDs    = regexp.MustCompile(`name="token" value="([^"]+)"`)
	webhookIDs  = regexp.MustCompile(`name="webhook" value="([^"]+)"`)
	grantIDs    = regexp.MustCompile(`name="grant" value="([^"]+)"`)
)

// accessEnv is a workspace with a channel of everyone and a webhook Kit
// installed, and the admin's web session.
type accessEnv struct {
	s      *Server
	w      *Workspace
	c      Conv
	in     *Install
	cookie string
	path   string // the API access page
}

func newAccessEnv(t *testing.T) *accessEnv {
	t.Helper()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	e := &accessEnv{s: s, w: w, c: w.channel(t, "public", w.members()...)}
	e.in = w.install(t, w.webhookKit(t, 2))
	e.cookie, _ = webSession(t, s, w.Admin.ID)
	e.path = "/app/installations/" + e.in.ID
	return e
}

// post sends a form of the API access page (path under it) with the
// page's CSRF token.
func (e *accessEnv) post(t *testing.T, path string, form url.Values) *Resp {
	t.Helper()
	page := e.s.page(t, "GET", e.path, e.cookie, nil)
	want(t, page, 200)
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", csrfOf(t, page))
	return e.s.page(t, "POST", e.path+path, e.cookie, form)
}

func shownOnce(t *testing.T, r *Resp) string {
	t.Helper()
	want(t, r, 200)
	m := shownSecret.FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("no secret shown%s", r)
	}
	noteSecrets(r) // the servers must never log it (e2e/secrets_log_test.go)
	return string(m[1])
}

// docs/decisions.md "Home and API access pages": every action of the API access page is an audit entry of the
// Kit's developer log, and a bot token's use shows on the page.
func TestAPIAccess_ActionsAreAudited(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	w := e.w
	want(t, e.post(t, "/channels", url.Values{"conversation": {e.c.ID}}), 200)
	want(t, e.post(t, "/channels/remove", url.Values{"conversation": {e.c.ID}}), 200)
	token := shownOnce(t, e.post(t, "/bot-tokens", nil))
	want(t, e.s.api(t, token, "GET", "/auth/test", nil, nil), 200)

	t.Run("a bot token's use shows on the page", func(t *testing.T) {
		r := e.s.page(t, "GET", e.path, e.cookie, nil)
		if !strings.Contains(string(r.Body), "· last used ") {
			t.Fatalf("no last use on the page%s", r)
		}
	})

	ids := tokenIDs.FindAllSubmatch(e.s.page(t, "GET", e.path, e.cookie, nil).Body, -1)
	want(t, e.post(t, "/bot-tokens/revoke", url.Values{"token": {string(ids[len(ids)-1][1])}}), 200)
	wantError(t, e.s.api(t, token, "GET", "/auth/test", nil, nil), 401, "invalid_token")
	hook := shownOnce(t, e.post(t, "/webhooks", url.Values{"conversation": {e.c.ID}}))
	want(t, e.s.do(t, "POST", strings.TrimPrefix(hook, e.s.URL), "", map[string]any{"text": "hello"}, nil), 200)
	hid := webhookIDs.FindSubmatch(e.s.page(t, "GET", e.path, e.cookie, nil).Body)
	want(t, e.post(t, "/webhooks/revoke", url.Values{"webhook": {string(hid[1])}}), 200)
	wantError(t, e.s.do(t, "POST", strings.TrimPrefix(hook, e.s.URL), "", map[string]any{"text": "hello"}, nil), 404, "not_found")
	shownOnce(t, e.post(t, "/client-secret", nil))
	shownOnce(t, e.post(t, "/signing-secret", nil))
	want(t, e.post(t, "/uninstall", nil), 200)

	es := auditEntries(t, w, e.in.Kit.ID)
	for _, tc := range []struct{ name, event, status string }{
		{"the Kit bot added to a channel", "channel.added", ""},
		{"the Kit bot removed from a channel", "channel.removed", ""},
		{"a bot token created", "token.issued", "bot"},
		{"a bot token revoked", "token.revoked", "bot"},
		{"a webhook created", "webhook.created", "active"},
		{"a webhook revoked", "webhook.revoked", "revoked"},
		{"a client secret generated", "client_secret.rotated", "1"},
		{"the signing secret rotated", "signing_secret.rotated", "1"},
		{"the Kit uninstalled", "installation.uninstalled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if countEntries(es, tc.event, "info", tc.status, "") == 0 {
				t.Fatalf("no %s entry (status %q): %v", tc.event, tc.status, es)
			}
		})
	}
}

// docs/decisions.md "Home and API access pages": the forms are refused without the session's CSRF token and
// with bad input, change nothing and never echo what was sent.
func TestAPIAccess_FormsRefuse(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	before := string(e.s.page(t, "GET", e.path, e.cookie, nil).Body)
	t.Run("a form without the session's CSRF token is the csrf_rejected page", func(t *testing.T) {
		r := e.s.page(t, "POST", e.path+"/bot-tokens", e.cookie, url.Values{"csrf": {"forged"}})
		if r.Status != 403 || !strings.Contains(string(r.Body), "csrf_rejected") || shownSecret.Match(r.Body) {
			t.Fatalf("want the 403 csrf_rejected page%s", r)
		}
	})
	t.Run("a channel that is no id is a 400 page that does not echo it", func(t *testing.T) {
		r := e.post(t, "/webhooks", url.Values{"conversation": {"<b>not-an-id</b>"}})
		if r.Status != 400 || strings.Contains(string(r.Body), "not-an-id") || !strings.Contains(string(r.Body), "Choose a channel") {
			t.Fatalf("want the page with a 400 in words%s", r)
		}
	})
	t.Run("nothing changed", func(t *testing.T) {
		after := string(e.s.page(t, "GET", e.path, e.cookie, nil).Body)
		if strings.Count(after, `name="token"`) != strings.Count(before, `name="token"`) || strings.Contains(after, `name="webhook"`) {
			t.Fatalf("the page changed:\n%s", after)
		}
	})
	t.Run("a guest gets the 403 page and another workspace's admin the 404 page", func(t *testing.T) {
		guest, _ := webSession(t, e.s, e.w.Guest.ID)
		if r := e.s.page(t, "GET", e.path, guest, nil); r.Status != 403 {
			t.Fatalf("guest%s", r)
		}
		other, _ := webSession(t, e.s, newWorkspace(t, e.s).Admin.ID)
		if r := e.s.page(t, "GET", e.path, other, nil); r.Status != 404 {
			t.Fatalf("another workspace's admin%s", r)
		}
	})
}

// docs/decisions.md "Home and API access pages": the home page lists the member's authorizations, and
// revoking one there ends its tokens at once.
func TestAPIAccess_HomeRevokesAnAuthorization(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	in := w.install(t, w.kit(t, baseScopes...))
	g := authorizeGrant(t, in, w.Mem.ID)
	want(t, s.api(t, g.access(), "GET", "/auth/test", nil, nil), 200)

	home := s.page(t, "GET", "/app/", g.Cookie, nil)
	want(t, home, 200)
	m := grantIDs.FindSubmatch(home.Body)
	if m == nil || !strings.Contains(string(home.Body), "You let it act as you") {
		t.Fatalf("the home page lists no authorization%s", home)
	}
	t.Run("another member cannot revoke it", func(t *testing.T) {
		admin, _ := webSession(t, s, w.Admin.ID)
		page := s.page(t, "GET", "/app/", admin, nil)
		r := s.page(t, "POST", "/app/authorizations/revoke", admin, url.Values{"csrf": {csrfOf(t, page)}, "installation": {in.ID}, "grant": {string(m[1])}})
		if r.Status != 404 {
			t.Fatalf("want the home page with a 404%s", r)
		}
		want(t, s.api(t, g.access(), "GET", "/auth/test", nil, nil), 200)
	})
	r := s.page(t, "POST", "/app/authorizations/revoke", g.Cookie, url.Values{"csrf": {csrfOf(t, home)}, "installation": {in.ID}, "grant": {string(m[1])}})
	if r.Status != 200 || grantIDs.Match(r.Body) {
		t.Fatalf("want the home page without the authorization%s", r)
	}
	wantError(t, s.api(t, g.access(), "GET", "/auth/test", nil, nil), 401, "invalid_token")
	wantError(t, refresh(t, in, g.Secret, g.refresh()), 400, "validation_error")
}

// docs/decisions.md "Home and API access pages", "channels offered": the
// webhook form takes only the admin's own channels, and a channel the admin
// cannot see is "Choose a channel from the list", as an unknown id is
// (SPEC.md 1: 403 is never used to reveal existence). Nothing is created.
func TestAPIAccess_WebhookFormHidesChannelsTheAdminCannotSee(t *testing.T) {
	t.Parallel()
	e := newAccessEnv(t)
	private := e.w.channel(t, "private", e.w.Owner.ID, e.w.Mem.ID)
	public := e.w.channel(t, "public", e.w.Owner.ID)
	unknown := e.post(t, "/webhooks", url.Values{"conversation": {newUUID()}})
	for _, tc := range []struct{ name, conv string }{
		{"a private channel the admin is not in", private.ID},
		{"a public channel the admin is not in", public.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, "/webhooks", url.Values{"conversation": {tc.conv}})
			if r.Status != unknown.Status || !strings.Contains(string(r.Body), "Choose a channel from the list") || shownSecret.Match(r.Body) {
				t.Fatalf("want the answer of an unknown channel (%d, Choose a channel from the list)%s", unknown.Status, r)
			}
		})
	}
	if page := e.s.page(t, "GET", e.path, e.cookie, nil); strings.Contains(string(page.Body), `name="webhook"`) {
		t.Fatalf("a refused form created a webhook%s", page)
	}
}
