package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/domainproof/domainprooftest"
)

// domainServer is a kitd whose domain verification asks dns for TXT
// records and fetches the well-known documents of wellKnownHost from wk.
func domainServer(t *testing.T, wellKnownHost string) (*Server, ServerOpts, *domainprooftest.DNSServer, *domainprooftest.WellKnownServer) {
	t.Helper()
	dns := domainprooftest.NewDNSServer(t)
	wk := domainprooftest.NewWellKnownServer(t, wellKnownHost)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, wk.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := ServerOpts{DataDir: t.TempDir(), OpToken: "op_" + randToken(), Args: []string{
		"--verify-dns", dns.Addr(), "--verify-resolve", wk.ResolveFlag(wellKnownHost), "--verify-ca", ca,
	}}
	return startServerOpts(t, opts), opts, dns, wk
}

// findDomain returns the domain object of the Kit detail named name.
func findDomain(t *testing.T, s *Server, w *Workspace, kitID, name string) map[string]any {
	t.Helper()
	r := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID, nil, nil)
	want(t, r, 200)
	for _, d := range jarr(r.JSON, "detail.domains") {
		if m := d.(map[string]any); m["domain"] == name {
			return m
		}
	}
	return nil
}

// docs/api.md "Domain"; docs/decisions.md "Domains".
func TestDomains_AddAndRemove(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	other := newWorkspace(t, s)
	k := w.kit(t, baseScopes...)
	path := "/dev/kits/" + k.ID + "/domains"

	r := s.api(t, w.Dev, "POST", path, map[string]any{"domain": "Desk.Example.COM"}, nil)
	want(t, r, 201)
	challenge := r.Str("domain.challenge")
	t.Run("a new domain is folded to lowercase, unverified, with both proofs", func(t *testing.T) {
		if r.Str("domain.domain") != "desk.example.com" || r.Str("domain.method") != "dns" || r.Get("domain.verified") != false || r.Get("domain.verifiedAt") != nil {
			t.Fatalf("domain%s", r)
		}
		if len(challenge) != 43 {
			t.Fatalf("challenge of %d characters, want 43 (256 bits, base64url)", len(challenge))
		}
		if r.Str("domain.proof.dns.type") != "TXT" || r.Str("domain.proof.dns.host") != "_kit-challenge.desk.example.com" ||
			r.Str("domain.proof.dns.value") != "kit-verification="+challenge {
			t.Fatalf("proof.dns%s", r)
		}
		if r.Str("domain.proof.wellKnown.url") != "https://desk.example.com/.well-known/kit-verification.json" ||
			r.Str("domain.proof.wellKnown.body.kitId") != k.ID || r.Str("domain.proof.wellKnown.body.token") != challenge {
			t.Fatalf("proof.wellKnown%s", r)
		}
	})
	t.Run("adding it again is 200 with the same challenge; the method follows the request", func(t *testing.T) {
		again := s.api(t, w.Dev, "POST", path, map[string]any{"domain": "desk.example.com", "method": "well_known"}, nil)
		want(t, again, 200)
		if again.Str("domain.challenge") != challenge || again.Str("domain.method") != "well_known" {
			t.Fatalf("re-add%s", again)
		}
	})
	t.Run("the Kit detail lists it", func(t *testing.T) {
		d := findDomain(t, s, w, k.ID, "desk.example.com")
		if d == nil || d["challenge"] != challenge || d["method"] != "well_known" {
			t.Fatalf("detail domain %v", d)
		}
	})
	bad := []struct{ name, domain string }{
		{"a single label", "localhost"},
		{"an IP literal", "192.0.2.1"},
		{"a label starting with a hyphen", "-desk.example.com"},
		{"an underscore", "de_sk.example.com"},
		{"a trailing dot", "desk.example.com."},
		{"a label over 63 characters", strings.Repeat("a", 64) + ".example.com"},
		{"a URL instead of a name", "https://desk.example.com"},
	}
	for _, tc := range bad {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			e := s.api(t, w.Dev, "POST", path, map[string]any{"domain": tc.domain}, nil)
			wantError(t, e, 400, "validation_error")
			if !strings.Contains(e.Str("message"), "domain") || strings.Contains(string(e.Body), tc.domain) {
				t.Fatalf("message must name the path and not echo the value%s", e)
			}
		})
	}
	t.Run("refused: a method that is not dns or well_known", func(t *testing.T) {
		wantError(t, s.api(t, w.Dev, "POST", path, map[string]any{"domain": "x.example.com", "method": "email"}, nil), 400, "validation_error")
	})
	t.Run("another workspace's Kit is 404", func(t *testing.T) {
		wantError(t, s.api(t, other.Dev, "POST", path, map[string]any{"domain": "evil.example.com"}, nil), 404, "not_found")
		wantError(t, s.api(t, other.Dev, "DELETE", path+"/desk.example.com", nil, nil), 404, "not_found")
		wantError(t, s.api(t, other.Dev, "POST", path+"/desk.example.com/verify", map[string]any{}, nil), 404, "not_found")
	})
	t.Run("an unknown Kit is 404", func(t *testing.T) {
		wantError(t, s.api(t, w.Dev, "POST", "/dev/kits/"+newUUID()+"/domains", map[string]any{"domain": "a.example.com"}, nil), 404, "not_found")
	})
	t.Run("at most 20 domains per Kit", func(t *testing.T) {
		k2 := w.kit(t, baseScopes...)
		for i := range 20 {
			want(t, s.api(t, w.Dev, "POST", "/dev/kits/"+k2.ID+"/domains", map[string]any{"domain": "d" + strconv.Itoa(i) + ".example.com"}, nil), 201)
		}
		wantError(t, s.api(t, w.Dev, "POST", "/dev/kits/"+k2.ID+"/domains", map[string]any{"domain": "d20.example.com"}, nil), 409, "conflict")
		// One already there is still answered.
		want(t, s.api(t, w.Dev, "POST", "/dev/kits/"+k2.ID+"/domains", map[string]any{"domain": "d0.example.com"}, nil), 200)
	})
	t.Run("removing it: 200, gone from the detail, then 404; added again it gets a new challenge", func(t *testing.T) {
		want(t, s.api(t, w.Dev, "DELETE", path+"/desk.example.com", nil, nil), 200)
		if d := findDomain(t, s, w, k.ID, "desk.example.com"); d != nil {
			t.Fatalf("removed domain still listed: %v", d)
		}
		wantError(t, s.api(t, w.Dev, "DELETE", path+"/desk.example.com", nil, nil), 404, "not_found")
		r := s.api(t, w.Dev, "POST", path, map[string]any{"domain": "desk.example.com"}, nil)
		want(t, r, 201)
		if r.Str("domain.challenge") == challenge {
			t.Fatal("a domain added again kept its old challenge")
		}
	})
	t.Run("every change is an audit entry of the Kit's log", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+k.ID+"/logs?source=audit", nil, nil)
		want(t, r, 200)
		var events []string
		for _, e := range jarr(r.JSON, "entries") {
			events = append(events, e.(map[string]any)["event"].(string))
		}
		for _, ev := range []string{"domain.added", "domain.method_changed", "domain.removed"} {
			if !slices.Contains(events, ev) {
				t.Errorf("no %s entry in %q", ev, events)
			}
		}
	})
}

// Verification by DNS TXT and by the well-known document, and what a
// verified domain changes: unverifiedHosts and the unlisted publish rule.
func TestDomains_Verify(t *testing.T) {
	t.Parallel()
	const wkHost = "wk.example.test"
	s, opts, dns, wk := domainServer(t, wkHost)
	w := newWorkspace(t, s)

	// A Kit whose endpoints live on api.dns.example.test and wk.example.test.
	slug := newSlug()
	m := manifest(slug, "1.0.0", baseScopes)
	setPath(m, "endpoints.events", "https://api.dns.example.test/events")
	setPath(m, "endpoints.tools", "https://"+wkHost+"/tools")
	r := w.uploadVersion(t, m, false)
	want(t, r, 201)
	kitID := r.Str("kitId")
	path := "/dev/kits/" + kitID + "/domains"
	unverified := func() []string {
		t.Helper()
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID, nil, nil)
		want(t, r, 200)
		var out []string
		for _, h := range jarr(r.JSON, "detail.unverifiedHosts") {
			out = append(out, h.(string))
		}
		return out
	}
	unlisted := manifest(slug, "1.1.0", baseScopes)
	setPath(unlisted, "endpoints.events", "https://api.dns.example.test/events")
	setPath(unlisted, "endpoints.tools", "https://"+wkHost+"/tools")
	unlisted["distribution"] = "unlisted"
	want(t, w.uploadVersion(t, unlisted, false), 201)

	add := s.api(t, w.Dev, "POST", path, map[string]any{"domain": "dns.example.test"}, nil)
	want(t, add, 201)
	challenge := add.Str("domain.challenge")

	t.Run("before any proof: verify is 409 and says which proof, never what was found", func(t *testing.T) {
		dns.SetTXT("_kit-challenge.dns.example.test", "kit-verification=not-the-challenge")
		e := s.api(t, w.Dev, "POST", path+"/dns.example.test/verify", map[string]any{}, nil)
		wantError(t, e, 409, "conflict")
		if !strings.Contains(e.Str("message"), "DNS") || strings.Contains(string(e.Body), "not-the-challenge") {
			t.Fatalf("message%s", e)
		}
		if d := findDomain(t, s, w, kitID, "dns.example.test"); d["verified"] != false {
			t.Fatalf("verified after a failed check: %v", d)
		}
	})
	t.Run("an unlisted version cannot be published while a host is unverified", func(t *testing.T) {
		wantError(t, s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/versions/1.1.0/publish", nil, nil), 409, "conflict")
		if got := unverified(); !slices.Equal(got, []string{"api.dns.example.test", wkHost}) {
			t.Fatalf("unverifiedHosts %q", got)
		}
	})
	t.Run("dns: the TXT record among others verifies the domain and covers its subdomains", func(t *testing.T) {
		dns.SetTXT("_kit-challenge.dns.example.test", "v=spf1 -all", "kit-verification="+challenge)
		r := s.api(t, w.Dev, "POST", path+"/dns.example.test/verify", map[string]any{}, nil)
		want(t, r, 200)
		if r.Get("domain.verified") != true || r.Get("domain.verifiedAt") == nil || r.Str("domain.method") != "dns" {
			t.Fatalf("verify%s", r)
		}
		if got := unverified(); !slices.Equal(got, []string{wkHost}) {
			t.Fatalf("unverifiedHosts after verifying dns.example.test: %q", got)
		}
		// Verifying again is answered without a new check.
		dns.SetTXT("_kit-challenge.dns.example.test")
		want(t, s.api(t, w.Dev, "POST", path+"/dns.example.test/verify", map[string]any{}, nil), 200)
	})
	t.Run("well_known: a wrong token is 409, the right document verifies", func(t *testing.T) {
		add := s.api(t, w.Dev, "POST", path, map[string]any{"domain": wkHost, "method": "well_known"}, nil)
		want(t, add, 201)
		token := add.Str("domain.challenge")
		body, _ := json.Marshal(map[string]any{"kitId": kitID, "token": "wrong"})
		wk.Set(200, string(body))
		wantError(t, s.api(t, w.Dev, "POST", path+"/"+wkHost+"/verify", map[string]any{}, nil), 409, "conflict")
		body, _ = json.Marshal(map[string]any{"kitId": kitID, "token": token, "note": "other keys are ignored"})
		wk.Set(200, string(body))
		r := s.api(t, w.Dev, "POST", path+"/"+wkHost+"/verify", map[string]any{}, nil)
		want(t, r, 200)
		if r.Get("domain.verified") != true || r.Str("domain.method") != "well_known" {
			t.Fatalf("verify%s", r)
		}
		if got := unverified(); len(got) != 0 {
			t.Fatalf("unverifiedHosts %q, want none", got)
		}
	})
	t.Run("validate reports only hosts no verified domain covers", func(t *testing.T) {
		m := manifest(slug, "2.0.0", baseScopes)
		setPath(m, "endpoints.events", "https://deep.api.dns.example.test/e")
		setPath(m, "endpoints.commands", "https://elsewhere.example.test/c")
		r := s.api(t, w.Dev, "POST", "/dev/kits/validate", map[string]any{"manifest": manifestString(m)}, nil)
		want(t, r, 200)
		var got []string
		for _, h := range jarr(r.JSON, "unverifiedHosts") {
			got = append(got, h.(string))
		}
		if !slices.Equal(got, []string{"elsewhere.example.test"}) {
			t.Fatalf("unverifiedHosts %q%s", got, r)
		}
	})
	t.Run("with every host verified the unlisted version publishes", func(t *testing.T) {
		r := s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/versions/1.1.0/publish", nil, nil)
		want(t, r, 200)
		if r.Get("version.published") != true {
			t.Fatalf("publish%s", r)
		}
	})
	t.Run("verification outcomes are audit entries, failures at level error", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID+"/logs?source=audit&level=error", nil, nil)
		want(t, r, 200)
		es := jarr(r.JSON, "entries")
		if len(es) != 2 || es[0].(map[string]any)["event"] != "domain.verify_failed" {
			t.Fatalf("error entries%s", r)
		}
		ok := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID+"/logs?source=audit&level=info", nil, nil)
		n := 0
		for _, e := range jarr(ok.JSON, "entries") {
			if e.(map[string]any)["event"] == "domain.verified" {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d domain.verified entries, want 2%s", n, ok)
		}
	})
	t.Run("verified domains survive kill -9", func(t *testing.T) {
		s.kill()
		s = startServerOpts(t, opts)
		if got := unverified(); len(got) != 0 {
			t.Fatalf("unverifiedHosts after restart %q", got)
		}
	})
}

// docs/api.md "Developer API" POST /dev/sandbox/dev-install; docs/decisions.md
// "Dev-install".
func TestDevInstall(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	sb := newSandbox(t, s)
	slug := newSlug()
	m := manifest(slug, "0.1.0", baseScopes)
	setPath(m, "endpoints.events", "https://prod.example.com/kit/events?v=1")
	setPath(m, "interactivity.url", "https://prod.example.com/kit/interact")
	m["oauth"] = map[string]any{"redirectUrls": []any{"https://prod.example.com/cb"}}
	m["distribution"] = "unlisted"
	body := func(m map[string]any, url string) map[string]any {
		return map[string]any{"manifest": manifestString(m), "url": url}
	}

	r := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(m, "https://abc123.tunnel.example:8443/ignored?x=1"), nil)
	want(t, r, 201)
	kitID, instID := r.Str("kitId"), r.Str("installationId")
	t.Run("first install: the Kit, the installation and a signing secret shown once", func(t *testing.T) {
		if !isUUID(kitID) || !isUUID(instID) || r.Str("slug") != slug || r.Str("version") != "0.1.0" {
			t.Fatalf("dev-install%s", r)
		}
		ss := r.Str("signingSecret.signingSecret")
		if !strings.HasPrefix(ss, "kss_") || len(ss) != 4+43 || r.Get("signingSecret.generation") != float64(1) {
			t.Fatalf("signingSecret%s", r)
		}
	})
	t.Run("every endpoint URL moves onto the url's origin, keeping path and query", func(t *testing.T) {
		var got []string
		for _, e := range jarr(r.JSON, "endpoints") {
			got = append(got, e.(string))
		}
		want := []string{
			"https://abc123.tunnel.example:8443/cb",
			"https://abc123.tunnel.example:8443/kit/interact",
			"https://abc123.tunnel.example:8443/kit/events?v=1",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("endpoints %q, want %q", got, want)
		}
	})
	t.Run("the version is private and installed in the sandbox", func(t *testing.T) {
		d := s.api(t, sb.Dev, "GET", "/dev/kits/"+kitID, nil, nil)
		want(t, d, 200)
		if d.Str("detail.kit.distribution") != "private" || d.Get("detail.kit.installedHere") != true ||
			d.Str("detail.versions.0.distribution") != "private" || d.Get("detail.versions.0.published") != false {
			t.Fatalf("detail%s", d)
		}
		if hosts := jarr(d.JSON, "detail.endpointHosts"); len(hosts) != 1 || hosts[0] != "abc123.tunnel.example" {
			t.Fatalf("endpointHosts%s", d)
		}
		if d.Get("detail.credentials.signingSecret.generation") != float64(1) {
			t.Fatalf("signing secret metadata%s", d)
		}
	})
	t.Run("again with the same manifest and url: same Kit and installation, no new secret", func(t *testing.T) {
		again := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(m, "https://abc123.tunnel.example:8443/"), nil)
		want(t, again, 201)
		if again.Str("kitId") != kitID || again.Str("installationId") != instID || has(again.JSON, "", "signingSecret") {
			t.Fatalf("second dev-install%s", again)
		}
	})
	t.Run("the same version on another url is 409 conflict; a higher one updates the installation", func(t *testing.T) {
		wantError(t, s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(m, "https://other.tunnel.example"), nil), 409, "conflict")
		m2 := cloneManifest(m)
		m2["version"] = "0.2.0"
		up := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(m2, "https://other.tunnel.example"), nil)
		want(t, up, 201)
		if up.Str("installationId") != instID || up.Str("version") != "0.2.0" {
			t.Fatalf("update%s", up)
		}
		bot := s.ops(t, "POST", "/ops/v1/installations/"+instID+"/bot-tokens", nil)
		want(t, bot, 201)
		inst := s.api(t, bot.Str("token"), "GET", "/installation", nil, nil)
		want(t, inst, 200)
		if inst.Str("installation.kit.version") != "0.2.0" {
			t.Fatalf("installation not updated%s", inst)
		}
	})
	t.Run("a developer token of a workspace that is not a sandbox is 403 forbidden", func(t *testing.T) {
		w := newWorkspace(t, s)
		wantError(t, s.api(t, w.Dev, "POST", "/dev/sandbox/dev-install", body(manifest(newSlug(), "1.0.0", baseScopes), "https://t.example"), nil), 403, "forbidden")
	})
	bad := []struct{ name, url string }{
		{"http, not https", "http://abc.tunnel.example"},
		{"no host", "https:///path"},
		{"user information", "https://user:pw@abc.tunnel.example"},
		{"not a URL", "abc.tunnel.example"},
		{"empty", ""},
		{"over 2000 characters", "https://abc.tunnel.example/" + strings.Repeat("a", 2000)},
	}
	for _, tc := range bad {
		t.Run("url refused: "+tc.name, func(t *testing.T) {
			m := manifest(newSlug(), "1.0.0", baseScopes)
			e := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(m, tc.url), nil)
			wantError(t, e, 400, "validation_error")
			if !strings.Contains(e.Str("message"), "url") || (tc.url != "" && strings.Contains(string(e.Body), tc.url)) {
				t.Fatalf("message must name url and not echo it%s", e)
			}
		})
	}
	t.Run("an invalid manifest is 400 at its path and registers nothing", func(t *testing.T) {
		bm := manifest(newSlug(), "1.0.0", baseScopes)
		bm["bot"].(map[string]any)["scopes"] = []any{"no-such-scope"}
		e := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", body(bm, "https://t.example"), nil)
		wantError(t, e, 400, "validation_error")
		if !strings.Contains(e.Str("message"), "manifest.bot.scopes[0]") {
			t.Fatalf("path%s", e)
		}
		list := s.api(t, sb.Dev, "GET", "/dev/kits", nil, nil)
		if n := len(jarr(list.JSON, "kits")); n != 1 {
			t.Fatalf("%d Kits in the sandbox, want 1 (the invalid one not registered)%s", n, list)
		}
	})
	t.Run("a dev_install audit entry names the installation", func(t *testing.T) {
		l := s.api(t, sb.Dev, "GET", "/dev/kits/"+kitID+"/logs?source=audit", nil, nil)
		want(t, l, 200)
		for _, e := range jarr(l.JSON, "entries") {
			if e := e.(map[string]any); e["event"] == "dev_install" && e["installationId"] == instID {
				return
			}
		}
		t.Fatalf("no dev_install entry%s", l)
	})
}

// newSandbox is a sandbox workspace with an owner and the owner's developer
// token.
func newSandbox(t *testing.T, s *Server) *Workspace {
	t.Helper()
	r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "sandbox " + randHex(3), "sandbox": true})
	want(t, r, 201)
	w := &Workspace{S: s, ID: r.Str("workspace.id")}
	w.Owner = w.user(t, "owner")
	w.Dev, w.DevID = w.devToken(t, w.Owner.ID)
	return w
}

// docs/api.md "Developer API" GET /dev/me token.lastUsedAt (minute granularity,
// actors.LastUsedGranularity).
func TestDevAPI_LastUsedAt(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{})
	w := newWorkspace(t, s)
	lastUsed := func() time.Time {
		t.Helper()
		me := s.api(t, w.Dev, "GET", "/dev/me", nil, nil)
		want(t, me, 200)
		if me.Get("token.lastUsedAt") == nil {
			t.Fatalf("lastUsedAt is null after the token was used%s", me)
		}
		return parseTime(t, "lastUsedAt", me.Str("token.lastUsedAt"))
	}
	first := lastUsed()
	t.Run("uses within a minute do not move it", func(t *testing.T) {
		advance(t, s, 30*time.Second)
		if got := lastUsed(); !got.Equal(first) {
			t.Fatalf("lastUsedAt %v, want %v", got, first)
		}
	})
	t.Run("a use a minute later moves it", func(t *testing.T) {
		advance(t, s, 31*time.Second)
		if got := lastUsed(); got.Sub(first) < time.Minute {
			t.Fatalf("lastUsedAt %v, want a minute after %v", got, first)
		}
	})
}
