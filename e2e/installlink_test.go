package e2e

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Install links: docs/api.md "Kit detail" installLink; docs/decisions.md
// "Install links".

var (
	installURL     = regexp.MustCompile(`^(http://[^/]+)/app/kits/install\?link=(kil_[A-Za-z0-9_-]{43})$`)
	installationID = regexp.MustCompile(`Installation id: <code>([0-9a-f-]{36})</code>`)
)

// unlistedKit registers and publishes a new unlisted Kit of the workspace
// (no endpoint hosts, so no verified domain is needed).
func (w *Workspace) unlistedKit(t testing.TB) *Kit {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: baseScopes}
	k.Manifest = manifest(k.Slug, k.Version, baseScopes)
	k.Manifest["distribution"] = "unlisted"
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID, k.Upload = r.Str("kitId"), r
	return k
}

// publishAs publishes a new version of k with distribution.
func (w *Workspace) publishAs(t testing.TB, k *Kit, version, distribution string) {
	t.Helper()
	m := make(map[string]any, len(k.Manifest))
	for key, v := range k.Manifest {
		m[key] = v
	}
	m["version"], m["distribution"] = version, distribution
	want(t, w.uploadVersion(t, m, true), 201)
	k.Manifest, k.Version = m, version
}

// newInstallLink creates (or replaces) the Kit's install link and returns
// the secret, checking the 201 answer's shape.
func newInstallLink(t testing.TB, w *Workspace, k *Kit) string {
	t.Helper()
	r := w.S.api(t, w.Dev, "POST", "/dev/kits/"+k.ID+"/install-link", nil, nil)
	want(t, r, 201)
	m := installURL.FindStringSubmatch(r.Str("installLink.url"))
	if m == nil || m[1] != w.S.URL || r.Get("installLink.active") != true || r.Str("installLink.createdAt") == "" {
		t.Fatalf("want {installLink: {active: true, createdAt, url: {app_url}/app/kits/install?link=kil_...}}%s", r)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the answer that shows the secret must not be cached%s", r)
	}
	return m[2]
}

func installPage(link string) string {
	return "/app/kits/install?" + url.Values{"link": {link}}.Encode()
}

// installVia opens the link as the member of cookie and presses Install.
func installVia(t testing.TB, s *Server, cookie, link string) *Resp {
	t.Helper()
	page := s.page(t, "GET", installPage(link), cookie, nil)
	want(t, page, 200)
	form := url.Values{"link": {link}, "csrf": {csrfOf(t, page)}, "version": {formValue(t, page, "version")}}
	return s.page(t, "POST", "/app/kits/install", cookie, form)
}

// formValue returns the value of the page's hidden input name.
func formValue(t testing.TB, r *Resp, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("no %s field in the page%s", name, r)
	}
	return string(m[1])
}

// installedID returns the installation id of a result page.
func installedID(t testing.TB, r *Resp) string {
	t.Helper()
	want(t, r, 200)
	m := installationID.FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("the result page shows no installation id%s", r)
	}
	return string(m[1])
}

// linkDead checks the one 404 page of a link that does not work: the same
// page whatever the cause, never echoing the link.
func linkDead(t testing.TB, s *Server, cookie, link string) {
	t.Helper()
	r := s.page(t, "GET", installPage(link), cookie, nil)
	unknown := s.page(t, "GET", installPage("kil_"+strings.Repeat("A", 43)), cookie, nil)
	want(t, r, 404)
	if string(r.Body) != string(unknown.Body) || !strings.Contains(string(r.Body), "not_found") {
		t.Fatalf("a dead link's page differs from an unknown link's%s%s", r, unknown)
	}
	if strings.Contains(string(r.Body), link[4:]) {
		t.Fatalf("the 404 page echoes the link%s", r)
	}
}

// logsOf returns the Kit's developer log entries with event.
func logsOf(t testing.TB, w *Workspace, k *Kit, event string) []map[string]any {
	t.Helper()
	r := w.S.api(t, w.Dev, "GET", "/dev/kits/"+k.ID+"/logs?source=audit", nil, nil)
	want(t, r, 200)
	var out []map[string]any
	for _, e := range jarr(r.JSON, "entries") {
		if m := e.(map[string]any); m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

func TestInstallLink_Lifecycle(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	dev := newWorkspace(t, s)
	other := newWorkspace(t, s)
	k := dev.unlistedKit(t)
	detail := "/dev/kits/" + k.ID
	admin, _ := webSession(t, s, other.Admin.ID)

	link := newInstallLink(t, dev, k)
	t.Run("the detail shows the link active, never its URL or secret", func(t *testing.T) {
		r := s.api(t, dev.Dev, "GET", detail, nil, nil)
		want(t, r, 200)
		il := jobj(r.JSON, "detail.installLink")
		if il["active"] != true || il["createdAt"] == nil || len(il) != 2 || strings.Contains(string(r.Body), link[4:]) {
			t.Fatalf("installLink %v%s", il, r)
		}
	})
	t.Run("creating writes install_link.created", func(t *testing.T) {
		if got := logsOf(t, dev, k, "install_link.created"); len(got) != 1 {
			t.Fatalf("install_link.created entries %v", got)
		}
	})
	t.Run("without a session the page sends to sign-in and back", func(t *testing.T) {
		r := s.page(t, "GET", installPage(link), "", nil)
		want(t, r, 302)
		loc, err := url.Parse(r.Header.Get("Location"))
		if err != nil || loc.Path != "/app/signin" || loc.Query().Get("next") != installPage(link) {
			t.Fatalf("Location %q%s", r.Header.Get("Location"), r)
		}
	})
	t.Run("an admin of another workspace sees the consent summary", func(t *testing.T) {
		r := s.page(t, "GET", installPage(link), admin, nil)
		want(t, r, 200)
		body := string(r.Body)
		for _, part := range []string{"Kit " + k.Slug, "E2E Developer", other.Name, "messages:write", "users:read", `action="/app/kits/install"`, ">Install</button>"} {
			if !strings.Contains(body, part) {
				t.Fatalf("the consent page lacks %q%s", part, r)
			}
		}
		if formValue(t, r, "version") != "1.0.0" {
			t.Fatalf("the form installs version %q", formValue(t, r, "version"))
		}
	})
	t.Run("Install without a valid CSRF token is refused", func(t *testing.T) {
		r := s.page(t, "POST", "/app/kits/install", admin, url.Values{"link": {link}, "csrf": {"nope"}, "version": {"1.0.0"}})
		want(t, r, 403)
		if !strings.Contains(string(r.Body), "csrf_rejected") {
			t.Fatalf("want the csrf_rejected page%s", r)
		}
	})

	var instID string
	t.Run("Install installs the latest published version in the admin's workspace", func(t *testing.T) {
		instID = installedID(t, installVia(t, s, admin, link))
		tok := s.ops(t, "POST", "/ops/v1/installations/"+instID+"/bot-tokens", nil)
		want(t, tok, 201)
		r := s.api(t, tok.Str("token"), "GET", "/installation", nil, nil)
		want(t, r, 200)
		if r.Str("installation.workspace.id") != other.ID || r.Str("installation.kit.slug") != k.Slug || r.Str("installation.kit.version") != "1.0.0" {
			t.Fatalf("installation%s", r)
		}
	})
	t.Run("the use is logged with the installation", func(t *testing.T) {
		got := logsOf(t, dev, k, "install_link.used")
		if len(got) != 1 || got[0]["installationId"] != instID || got[0]["status"] != "1.0.0" {
			t.Fatalf("install_link.used entries %v", got)
		}
	})
	t.Run("a page opened before a new version asks again; then the installation is updated", func(t *testing.T) {
		page := s.page(t, "GET", installPage(link), admin, nil)
		want(t, page, 200)
		dev.publishAs(t, k, "1.1.0", "unlisted")
		stale := s.page(t, "POST", "/app/kits/install", admin, url.Values{"link": {link}, "csrf": {csrfOf(t, page)}, "version": {"1.0.0"}})
		want(t, stale, 409)
		if formValue(t, stale, "version") != "1.1.0" || !strings.Contains(string(stale.Body), "updated since") {
			t.Fatalf("want the consent page of 1.1.0 with a notice%s", stale)
		}
		if id := installedID(t, installVia(t, s, admin, link)); id != instID {
			t.Fatalf("updating made installation %s, want %s", id, instID)
		}
		if got := logsOf(t, dev, k, "install_link.used"); len(got) != 2 || got[0]["status"] != "1.1.0" {
			t.Fatalf("install_link.used entries %v", got)
		}
	})

	t.Run("replacing the link ends the old URL at once", func(t *testing.T) {
		next := newInstallLink(t, dev, k)
		if next == link {
			t.Fatal("the new link is the old one")
		}
		linkDead(t, s, admin, link)
		r := s.page(t, "POST", "/app/kits/install", admin, url.Values{"link": {link}, "csrf": {formValue(t, s.page(t, "GET", installPage(next), admin, nil), "csrf")}, "version": {"1.1.0"}})
		want(t, r, 404)
		want(t, s.page(t, "GET", installPage(next), admin, nil), 200)
		link = next
	})
	t.Run("deleting the link ends it; the detail shows it inactive", func(t *testing.T) {
		r := s.api(t, dev.Dev, "DELETE", detail+"/install-link", nil, nil)
		want(t, r, 200)
		il := jobj(r.JSON, "installLink")
		if il["active"] != false || il["createdAt"] != nil || len(il) != 2 {
			t.Fatalf("want {installLink: {active: false, createdAt: null}}%s", r)
		}
		linkDead(t, s, admin, link)
		d := s.api(t, dev.Dev, "GET", detail, nil, nil)
		if d.Get("detail.installLink.active") != false || d.Get("detail.installLink.createdAt") != nil {
			t.Fatalf("detail after delete%s", d)
		}
		if got := logsOf(t, dev, k, "install_link.deleted"); len(got) != 1 {
			t.Fatalf("install_link.deleted entries %v", got)
		}
		wantError(t, s.api(t, dev.Dev, "DELETE", detail+"/install-link", nil, nil), 404, "not_found")
	})
}

func TestInstallLink_Refusals(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	dev := newWorkspace(t, s)
	other := newWorkspace(t, s)
	k := dev.unlistedKit(t)
	link := newInstallLink(t, dev, k)
	member, _ := webSession(t, s, other.Mem.ID)

	t.Run("a member who is not an admin sees that an admin must install it (403)", func(t *testing.T) {
		r := s.page(t, "GET", installPage(link), member, nil)
		want(t, r, 403)
		if !strings.Contains(string(r.Body), "admin or owner") || !strings.Contains(string(r.Body), "Kit "+k.Slug) || strings.Contains(string(r.Body), link[4:]) {
			t.Fatalf("403 page%s", r)
		}
		home := s.page(t, "GET", "/app/", member, nil)
		post := s.page(t, "POST", "/app/kits/install", member, url.Values{"link": {link}, "csrf": {csrfOf(t, home)}, "version": {"1.0.0"}})
		want(t, post, 403)
		if got := logsOf(t, dev, k, "install_link.used"); len(got) != 0 {
			t.Fatalf("a refused install was logged: %v", got)
		}
	})
	t.Run("a guest is refused too", func(t *testing.T) {
		guest, _ := webSession(t, s, other.Guest.ID)
		want(t, s.page(t, "GET", installPage(link), guest, nil), 403)
	})
	t.Run("a malformed link is the same 404 page", func(t *testing.T) {
		linkDead(t, s, member, "kil_short")
		linkDead(t, s, "", link+"x")
	})
	t.Run("a private Kit cannot have a link (409)", func(t *testing.T) {
		p := dev.kit(t, baseScopes...)
		r := s.api(t, dev.Dev, "POST", "/dev/kits/"+p.ID+"/install-link", nil, nil)
		wantError(t, r, 409, "conflict")
		if !strings.Contains(r.Str("message"), "private") {
			t.Fatalf("the message must say why%s", r)
		}
	})
	t.Run("another workspace's Kit and an unknown Kit are 404", func(t *testing.T) {
		path := "/dev/kits/" + k.ID + "/install-link"
		wantError(t, s.api(t, other.Dev, "POST", path, nil, nil), 404, "not_found")
		wantError(t, s.api(t, other.Dev, "DELETE", path, nil, nil), 404, "not_found")
		wantError(t, s.api(t, dev.Dev, "POST", "/dev/kits/"+newUUID()+"/install-link", nil, nil), 404, "not_found")
		want(t, s.page(t, "GET", installPage(link), "", nil), 302) // the link still works
	})
	t.Run("a bot token cannot manage install links", func(t *testing.T) {
		b := newBotEnv(t, s)
		wantError(t, s.api(t, b.In.Token, "POST", "/dev/kits/"+k.ID+"/install-link", nil, nil), 403, "forbidden")
	})
	t.Run("publishing the Kit as private ends the link for good", func(t *testing.T) {
		admin, _ := webSession(t, s, other.Admin.ID)
		dev.publishAs(t, k, "1.1.0", "private")
		linkDead(t, s, admin, link)
		if d := s.api(t, dev.Dev, "GET", "/dev/kits/"+k.ID, nil, nil); d.Get("detail.installLink.active") != false {
			t.Fatalf("detail after a private publish%s", d)
		}
		dev.publishAs(t, k, "1.2.0", "unlisted")
		linkDead(t, s, admin, link)
		fresh := newInstallLink(t, dev, k)
		installedID(t, installVia(t, s, admin, fresh))
	})
}
