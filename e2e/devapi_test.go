package e2e

import (
	"strings"
	"testing"
	"time"
)

// docs/api.md "Developer API": GET /dev/me.
func TestDevAPI_Me(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)

	t.Run("me shows the token's workspace, member and token", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", "/dev/me", nil, nil)
		want(t, r, 200)
		if r.Str("workspaceId") != w.ID || r.Str("userId") != w.Owner.ID || r.Get("sandbox") != false ||
			r.Str("token.id") != w.DevID || r.Str("token.name") != "e2e" || !has(r.JSON, "token", "lastUsedAt") || r.Get("token.revokedAt") != nil {
			t.Fatalf("want {workspaceId, userId, sandbox, token: {id, name, createdAt, expiresAt, lastUsedAt, revokedAt}}%s", r)
		}
		created := parseTime(t, "createdAt", r.Str("token.createdAt"))
		expires := parseTime(t, "expiresAt", r.Str("token.expiresAt"))
		if d := expires.Sub(created); d != 90*24*time.Hour {
			t.Errorf("developer token lifetime %v, want 90 days", d)
		}
	})
	t.Run("a sandbox workspace's token says sandbox true", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "sandbox " + randHex(3), "sandbox": true})
		want(t, r, 201)
		u := s.ops(t, "POST", "/ops/v1/workspaces/"+r.Str("workspace.id")+"/users", map[string]any{"displayName": "dev", "role": "owner"})
		want(t, u, 201)
		tok := s.ops(t, "POST", "/ops/v1/users/"+u.Str("user.id")+"/developer-tokens", map[string]any{"name": "sb"})
		want(t, tok, 201)
		me := s.api(t, tok.Str("token"), "GET", "/dev/me", nil, nil)
		want(t, me, 200)
		if me.Get("sandbox") != true {
			t.Errorf("sandbox%s", me)
		}
	})
	t.Run("a revoked developer token is 401", func(t *testing.T) {
		tok, id := w.devToken(t, w.Admin.ID)
		want(t, s.api(t, tok, "GET", "/dev/me", nil, nil), 200)
		want(t, s.ops(t, "DELETE", "/ops/v1/developer-tokens/"+id, nil), 200)
		wantError(t, s.api(t, tok, "GET", "/dev/me", nil, nil), 401, "invalid_token")
	})
	t.Run("a bot token is 403 forbidden", func(t *testing.T) {
		in := w.install(t, w.kit(t, baseScopes...))
		wantError(t, s.api(t, in.Token, "GET", "/dev/me", nil, nil), 403, "forbidden")
	})
}

// docs/api.md "Developer API" POST /dev/kits/validate, and reserved slugs at upload.
func TestDevAPI_Validate(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	other := newWorkspace(t, s)
	published := w.kit(t, baseScopes...)
	// A later draft must not be what the diff compares against.
	want(t, w.uploadVersion(t, manifest(published.Slug, "1.1.0", []string{"conversations:read", "messages:read", "messages:write", "users:read", "files:read"}), false), 201)

	validate := func(w *Workspace, m map[string]any) *Resp {
		t.Helper()
		r := s.api(t, w.Dev, "POST", "/dev/kits/validate", map[string]any{"manifest": manifestString(m)}, nil)
		want(t, r, 200)
		return r
	}
	withEvents := manifest(published.Slug, "2.0.0", baseScopes)
	setPath(withEvents, "endpoints.events", "https://events.example.com/hook")
	withEvents["events"] = []any{"message.posted"}
	tests := []struct {
		name string
		w    *Workspace
		m    map[string]any
		ok   func(r *Resp) bool
	}{
		{"a new valid manifest: valid, consent, no diff, no existing Kit", w, manifest(newSlug(), "1.0.0", baseScopes), func(r *Resp) bool {
			return r.Get("valid") == true && len(jarr(r.JSON, "problems")) == 0 && r.Str("consent.version") == "1.0.0" &&
				r.Get("diff") == nil && r.Get("existingKitId") == nil && len(jarr(r.JSON, "hosts")) == 0
		}},
		{"schema problems: valid false with paths, no consent", w, func() map[string]any {
			m := manifest(newSlug(), "1.0.0", baseScopes)
			setPath(m, "bot.colour", "red")
			return m
		}(), func(r *Resp) bool {
			return r.Get("valid") == false && r.Str("problems.0.path") == "bot" && r.Get("consent") == nil
		}},
		{"a reserved slug is a problem at slug", w, manifest("admin", "1.0.0", baseScopes), func(r *Resp) bool {
			return r.Get("valid") == false && r.Str("problems.0.path") == "slug"
		}},
		{"another workspace's slug is a problem at slug, without its Kit id", other, manifest(published.Slug, "3.0.0", baseScopes), func(r *Resp) bool {
			return r.Get("valid") == false && r.Str("problems.0.path") == "slug" && r.Get("existingKitId") == nil && r.Get("diff") == nil
		}},
		{"the workspace's own slug: existingKitId and the diff to the latest published version", w, manifest(published.Slug, "2.0.0", without(baseScopes, "users:read")), func(r *Resp) bool {
			return r.Get("valid") == true && r.Str("existingKitId") == published.ID && r.Get("diff.wider") == false &&
				r.Str("diff.removedBotScopes.0") == "users:read" && len(jarr(r.JSON, "diff.addedBotScopes")) == 0
		}},
		{"an added event widens the diff; hosts and unverifiedHosts name the endpoint host", w, withEvents, func(r *Resp) bool {
			return r.Get("diff.wider") == true && r.Str("diff.addedEvents.0") == "message.posted" &&
				r.Str("hosts.0") == "events.example.com" && r.Str("unverifiedHosts.0") == "events.example.com"
		}},
		{"consent says installed once the Kit is installed here", w, manifest(published.Slug, "2.0.0", baseScopes), func(r *Resp) bool {
			return r.Get("consent.installed") == false && r.Get("consent.ownedByWorkspace") == true
		}},
		{"a version registered with another manifest is a problem at version, as its upload is 409", w, manifest(published.Slug, "1.1.0", baseScopes), func(r *Resp) bool {
			return r.Get("valid") == false && r.Str("problems.0.path") == "version"
		}},
		{"a version below the latest registered is a problem at version", w, manifest(published.Slug, "1.0.5", baseScopes), func(r *Resp) bool {
			return r.Get("valid") == false && r.Str("problems.0.path") == "version"
		}},
		{"the latest version's own manifest again is valid: its upload changes nothing", w, manifest(published.Slug, "1.1.0", []string{"conversations:read", "messages:read", "messages:write", "users:read", "files:read"}), func(r *Resp) bool {
			return r.Get("valid") == true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := validate(tt.w, tt.m); !tt.ok(r) {
				t.Fatalf("unexpected result%s", r)
			}
		})
	}

	t.Run("validate changes nothing: the validated slug stays free", func(t *testing.T) {
		m := manifest(newSlug(), "1.0.0", baseScopes)
		validate(w, m)
		want(t, other.uploadVersion(t, m, false), 201)
	})
	t.Run("upload of a reserved slug is 400 at manifest.slug", func(t *testing.T) {
		wantValidation(t, w.uploadVersion(t, manifest("system", "1.0.0", baseScopes), false), "manifest.slug")
	})
	t.Run("validate needs a manifest string", func(t *testing.T) {
		wantValidation(t, s.api(t, w.Dev, "POST", "/dev/kits/validate", map[string]any{}, nil), "manifest")
		wantValidation(t, s.api(t, w.Dev, "POST", "/dev/kits/validate", map[string]any{"manifest": "x"}, nil), "manifest")
	})
}

// docs/api.md "Kit version": a directory Kit is published only when complete.
func TestDevAPI_DirectoryPublish(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	m := manifest(newSlug(), "1.0.0", baseScopes)
	m["distribution"] = "directory"

	r := w.uploadVersion(t, m, true)
	wantError(t, r, 409, "conflict")
	if !strings.Contains(r.Str("message"), "manifest.iconUrl") {
		t.Errorf("the conflict should name the first missing field%s", r)
	}
	m["iconUrl"] = "https://example.com/icon.png"
	m["categories"] = []any{"productivity"}
	r = w.uploadVersion(t, m, true)
	want(t, r, 201)
	if r.Get("version.published") != true || r.Str("version.distribution") != "directory" {
		t.Errorf("a complete directory Kit is published%s", r)
	}
}

// docs/api.md "Developer API" GET /dev/kits and GET /dev/kits/{kitId}.
func TestDevAPI_Kits(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	other := newWorkspace(t, s)
	installed := w.kit(t, baseScopes...)
	w.install(t, installed)
	draft := manifest(newSlug(), "1.0.0", baseScopes)
	setPath(draft, "endpoints.events", "https://events.example.com/hook")
	draft["events"] = []any{"message.posted"}
	d := w.uploadVersion(t, draft, false)
	want(t, d, 201)
	draftID := d.Str("kitId")
	other.kit(t, baseScopes...)

	t.Run("kits lists the workspace's Kits with installedHere", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", "/dev/kits", nil, nil)
		want(t, r, 200)
		kits := jarr(r.JSON, "kits")
		if len(kits) != 2 || r.Str("kits.0.kitId") != installed.ID || r.Get("kits.0.installedHere") != true ||
			r.Str("kits.0.slug") != installed.Slug || r.Str("kits.0.distribution") != "private" || r.Str("kits.0.state") != "active" ||
			r.Str("kits.0.latestPublishedVersion") != "1.0.0" || r.Str("kits.1.kitId") != draftID ||
			r.Get("kits.1.installedHere") != false || r.Get("kits.1.latestPublishedVersion") != nil || r.Str("kits.1.latestVersion") != "1.0.0" {
			t.Fatalf("want the two Kits of the workspace in creation order%s", r)
		}
		parseTime(t, "createdAt", r.Str("kits.0.createdAt"))
	})
	t.Run("kit detail: kit, versions, domains, credentials, install link, hosts", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+draftID, nil, nil)
		want(t, r, 200)
		if r.Str("detail.kit.kitId") != draftID || len(jarr(r.JSON, "detail.versions")) != 1 || r.Str("detail.versions.0.version") != "1.0.0" ||
			jarr(r.JSON, "detail.domains") == nil || jobj(r.JSON, "detail.credentials") == nil ||
			r.Get("detail.installLink.active") != false || !has(r.JSON, "detail.installLink", "createdAt") ||
			r.Str("detail.endpointHosts.0") != "events.example.com" || r.Str("detail.unverifiedHosts.0") != "events.example.com" {
			t.Fatalf("want the Kit detail%s", r)
		}
	})
	t.Run("kit detail: credentials show metadata, never secrets", func(t *testing.T) {
		gen := s.ops(t, "POST", "/ops/v1/kits/"+installed.ID+"/client-secret", nil)
		want(t, gen, 201)
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+installed.ID, nil, nil)
		want(t, r, 200)
		parseTime(t, "clientSecret.createdAt", r.Str("detail.credentials.clientSecret.createdAt"))
		if sec := gen.Str("clientSecret"); sec == "" || strings.Contains(string(r.Body), sec) {
			t.Errorf("the detail must not show the secret%s", r)
		}
	})
	t.Run("another workspace's Kit is 404, even published", func(t *testing.T) {
		wantError(t, s.api(t, other.Dev, "GET", "/dev/kits/"+installed.ID, nil, nil), 404, "not_found")
		wantError(t, s.api(t, w.Dev, "GET", "/dev/kits/"+newUUID(), nil, nil), 404, "not_found")
	})
}

// docs/api.md "Developer API" GET /dev/kits/{kitId}/logs and "Developer log entry".
func TestDevAPI_Logs(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	k := w.kit(t, baseScopes...) // uploaded and published: two entries
	want(t, w.uploadVersion(t, manifest(k.Slug, "1.1.0", baseScopes), false), 201)
	want(t, s.api(t, w.Dev, "POST", "/dev/kits/"+k.ID+"/versions/1.1.0/publish", nil, nil), 200)
	logs := "/dev/kits/" + k.ID + "/logs"

	t.Run("uploads and publishes are audit entries, newest first", func(t *testing.T) {
		r := s.api(t, w.Dev, "GET", logs, nil, nil)
		want(t, r, 200)
		var got []string
		for _, e := range jarr(r.JSON, "entries") {
			got = append(got, jstr(e, "event")+" "+jstr(e, "status"))
			if jstr(e, "source") != "audit" || jstr(e, "level") != "info" || jstr(e, "id") == "" {
				t.Errorf("entry %v", e)
			}
			parseTime(t, "at", jstr(e, "at"))
		}
		wantLog := []string{"version.published 1.1.0", "version.uploaded 1.1.0", "version.published 1.0.0", "version.uploaded 1.0.0"}
		if len(got) != len(wantLog) {
			t.Fatalf("entries %q, want %q", got, wantLog)
		}
		for i := range got {
			if got[i] != wantLog[i] {
				t.Fatalf("entries %q, want %q", got, wantLog)
			}
		}
		if r.Get("nextCursor") != nil || !sameSet(strs(jarr(r.JSON, "sources")), []string{"tool_call", "audit", "delivery"}) {
			t.Errorf("nextCursor and sources%s", r)
		}
	})
	t.Run("the cursor pages newest first without repeats", func(t *testing.T) {
		var seen []string
		path := logs + "?limit=3"
		for range 4 {
			r := s.api(t, w.Dev, "GET", path, nil, nil)
			want(t, r, 200)
			for _, e := range jarr(r.JSON, "entries") {
				seen = append(seen, jstr(e, "id"))
			}
			c := r.Str("nextCursor")
			if c == "" {
				break
			}
			path = logs + "?limit=3&cursor=" + queryEscape(c)
		}
		if len(seen) != 4 || seen[0] == seen[3] {
			t.Fatalf("ids %v", seen)
		}
	})
	filters := []struct {
		name  string
		query string
		n     int
	}{
		{"source audit keeps audit entries", "?source=audit", 4},
		{"source delivery has none yet", "?source=delivery", 0},
		{"level error has none", "?level=error", 0},
		{"level info and a limit", "?level=info&limit=1", 1},
	}
	for _, f := range filters {
		t.Run(f.name, func(t *testing.T) {
			r := s.api(t, w.Dev, "GET", logs+f.query, nil, nil)
			want(t, r, 200)
			if len(jarr(r.JSON, "entries")) != f.n {
				t.Fatalf("want %d entries%s", f.n, r)
			}
		})
	}
	bad := []struct{ name, query, path string }{
		{"an unknown source is 400", "?source=zz-SENTINEL-zz", "source"},
		{"an unknown level is 400", "?level=zz-SENTINEL-zz", "level"},
		{"limit 0 is 400", "?limit=0", "limit"},
		{"limit 101 is 400", "?limit=101", "limit"},
		{"a foreign cursor is 400", "?cursor=zz-SENTINEL-zz", "cursor"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			wantValidation(t, s.api(t, w.Dev, "GET", logs+b.query, nil, nil), b.path, "zz-SENTINEL-zz")
		})
	}
	t.Run("another workspace's Kit log is 404", func(t *testing.T) {
		other := newWorkspace(t, s)
		wantError(t, s.api(t, other.Dev, "GET", logs, nil, nil), 404, "not_found")
	})
	t.Run("entries older than 7 days are not shown", func(t *testing.T) {
		ts := startServerOpts(t, ServerOpts{})
		tw := newWorkspace(t, ts)
		tk := tw.kit(t, baseScopes...)
		want(t, ts.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 8 * 24 * 3600}), 200)
		want(t, tw.uploadVersion(t, manifest(tk.Slug, "1.1.0", baseScopes), false), 201)
		r := ts.api(t, tw.Dev, "GET", "/dev/kits/"+tk.ID+"/logs", nil, nil)
		want(t, r, 200)
		if n := len(jarr(r.JSON, "entries")); n != 1 || r.Str("entries.0.status") != "1.1.0" {
			t.Fatalf("want only the entry of the last 7 days%s", r)
		}
	})
}
