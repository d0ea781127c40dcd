package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// setPath sets a dotted path in a manifest map (creating objects on the way);
// a nil value deletes the key.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	cur := m
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if v == nil {
		delete(cur, last)
	} else {
		cur[last] = v
	}
}

func cloneManifest(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// docs/api.md "Developer API" (upload and publish) and "Kit version".
func TestDev_Versions(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)

	slug := newSlug()
	base := manifest(slug, "1.0.0", baseScopes)
	first := w.uploadVersion(t, base, true)
	want(t, first, 201)
	kitID := first.Str("kitId")

	t.Run("first upload creates the Kit and a published version", func(t *testing.T) {
		v := jobj(first.JSON, "version")
		if !isUUID(kitID) || first.Get("created") != true || !isUUID(jstr(v, "id")) || jstr(v, "version") != "1.0.0" ||
			v["published"] != true || jstr(v, "distribution") != "private" ||
			!hex64.MatchString(jstr(v, "consentHash")) || !hex64.MatchString(jstr(v, "manifestHash")) {
			t.Errorf("want 201 {kitId, created: true, version: {id, version, published, publishedAt, createdAt, consentHash, manifestHash, distribution}}%s", first)
		}
		parseTime(t, "publishedAt", jstr(v, "publishedAt"))
		parseTime(t, "createdAt", jstr(v, "createdAt"))
	})

	t.Run("identical re-upload is 201 created false", func(t *testing.T) {
		r := w.uploadVersion(t, base, true)
		want(t, r, 201)
		if r.Get("created") != false || r.Str("kitId") != kitID || r.Str("version.id") != first.Str("version.id") ||
			r.Str("version.manifestHash") != first.Str("version.manifestHash") {
			t.Errorf("want the same version with created: false%s", r)
		}
	})

	t.Run("same version with a different manifest is 409 conflict", func(t *testing.T) {
		changed := cloneManifest(base)
		setPath(changed, "description.en", "a different description")
		r := w.uploadVersion(t, changed, true)
		wantError(t, r, 409, "conflict")
	})

	t.Run("draft upload then publish", func(t *testing.T) {
		r := w.uploadVersion(t, manifest(slug, "1.1.0", baseScopes), false)
		want(t, r, 201)
		if r.Get("created") != true || r.Get("version.published") != false || r.Get("version.publishedAt") != nil || r.Str("kitId") != kitID {
			t.Errorf("want a draft of the same Kit%s", r)
		}
		p := s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/versions/1.1.0/publish", nil, nil)
		want(t, p, 200)
		if p.Str("kitId") != kitID || p.Get("version.published") != true || p.Str("version.version") != "1.1.0" ||
			p.Str("version.id") != r.Str("version.id") {
			t.Errorf("publish: want 200 {kitId, created, version: {published: true}}%s", p)
		}
		parseTime(t, "publishedAt", p.Str("version.publishedAt"))
		// Now installable at 1.1.0 (the latest published).
		in := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": kitID})
		want(t, in, 201)
		if in.Str("installation.kit.version") != "1.1.0" {
			t.Errorf("install takes the latest published version%s", in)
		}
	})

	t.Run("publish of an unknown version or Kit is 404", func(t *testing.T) {
		wantError(t, s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/versions/9.9.9/publish", nil, nil), 404, "not_found")
		wantError(t, s.api(t, w.Dev, "POST", "/dev/kits/"+newUUID()+"/versions/1.0.0/publish", nil, nil), 404, "not_found")
	})

	t.Run("publish of another workspace's Kit is 404", func(t *testing.T) {
		other := newWorkspace(t, s)
		wantError(t, s.api(t, other.Dev, "POST", "/dev/kits/"+kitID+"/versions/1.0.0/publish", nil, nil), 404, "not_found")
	})

	t.Run("a slug is globally unique", func(t *testing.T) {
		other := newWorkspace(t, s)
		r := other.uploadVersion(t, manifest(slug, "2.0.0", baseScopes), true)
		if r.Status < 400 || r.Status >= 500 {
			t.Fatalf("another workspace registered a taken slug%s", r)
		}
		checkErrorBody(t, r)
	})
}

// docs/api.md "Manifest": invalid manifests answer 400 validation_error
// with the field path and without the submitted value.
func TestDev_InvalidManifests(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	cases := []struct {
		name string
		edit func(m map[string]any)
		path string
		echo string
	}{
		// docs/decisions.md "Request bodies": an unknown key is reported at its object, and
		// named only when it is a short plain name (a typo to fix).
		{"unknown key of bot is rejected at bot, named", func(m map[string]any) { setPath(m, "bot.scopez", 1) }, `manifest.bot: unknown key "scopez"`, ""},
		{"unknown key of bot that is not a plain name is rejected at bot, unnamed", func(m map[string]any) { setPath(m, "bot.<"+sentinel+">", 1) }, "manifest.bot", sentinel},
		{"unknown top-level key that is not a plain name is rejected at manifest, unnamed", func(m map[string]any) { setPath(m, sentinel+" ", "red") }, "manifest", sentinel},
		{"slug is required", func(m map[string]any) { setPath(m, "slug", nil) }, "slug", ""},
		{"slug with capitals is rejected", func(m map[string]any) { setPath(m, "slug", "Zz-SENTINEL-zz") }, "slug", "Zz-SENTINEL-zz"},
		{"slug of one character is rejected", func(m map[string]any) { setPath(m, "slug", "a") }, "slug", ""},
		{"slug of 41 characters is rejected", func(m map[string]any) { setPath(m, "slug", "a"+strings.Repeat("b", 40)) }, "slug", ""},
		{"slug starting with a digit is rejected", func(m map[string]any) { setPath(m, "slug", "1abc") }, "slug", ""},
		{"version with a leading zero is rejected", func(m map[string]any) { setPath(m, "version", "01.0.0") }, "version", ""},
		{"version with a fifth major digit is rejected", func(m map[string]any) { setPath(m, "version", "10000.0.0") }, "version", ""},
		{"version must be MAJOR.MINOR.PATCH", func(m map[string]any) { setPath(m, "version", sentinel) }, "version", sentinel},
		{"schemaVersion must be 1", func(m map[string]any) { setPath(m, "schemaVersion", 2) }, "schemaVersion", ""},
		{"developer.url must be https", func(m map[string]any) { setPath(m, "developer.url", "http://zz-sentinel-zz.example.com") }, "developer.url", "zz-sentinel-zz"},
		{"privacyPolicyUrl must be https", func(m map[string]any) { setPath(m, "privacyPolicyUrl", "http://example.com/p") }, "privacyPolicyUrl", ""},
		{"privacyPolicyUrl is required", func(m map[string]any) { setPath(m, "privacyPolicyUrl", nil) }, "privacyPolicyUrl", ""},
		{"bot.scopes must be an array", func(m map[string]any) { setPath(m, "bot.scopes", "messages:write") }, "bot.scopes", ""},
		{"unknown scope is rejected", func(m map[string]any) { setPath(m, "bot.scopes", []any{"messages:write", sentinel}) }, "bot.scopes[1]", sentinel},
		{"displayName must be an object", func(m map[string]any) { setPath(m, "displayName", sentinel) }, "displayName", sentinel},
		{"distribution must be known", func(m map[string]any) { setPath(m, "distribution", sentinel) }, "distribution", sentinel},
		{"incomingWebhooks.maxPerInstallation above 20 is rejected", func(m map[string]any) {
			setPath(m, "incomingWebhooks.maxPerInstallation", 21)
			setPath(m, "bot.scopes", []any{"incoming-webhook"})
		}, "incomingWebhooks.maxPerInstallation", ""},
		{"oauth.redirectUrls must be https", func(m map[string]any) { setPath(m, "oauth.redirectUrls", []any{"http://example.com/cb"}) }, "oauth.redirectUrls[0]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := manifest(newSlug(), "1.0.0", baseScopes)
			tc.edit(m)
			r := w.uploadVersion(t, m, false)
			wantValidation(t, r, tc.path, tc.echo)
		})
	}

	for _, tc := range []struct {
		name string
		body any
		path string
	}{
		{"manifest is required", map[string]any{"publish": true}, "manifest"},
		{"manifest must be a string", map[string]any{"manifest": manifest(newSlug(), "1.0.0", nil)}, "manifest"},
		{"manifest of 1 character is rejected", map[string]any{"manifest": "{"}, "manifest"},
		{"manifest of 65537 characters is rejected", map[string]any{"manifest": `{"slug":"` + strings.Repeat("a", 65537-11) + `"}`}, "manifest"},
		{"manifest that is not JSON is rejected", map[string]any{"manifest": `{"slug": zz-SENTINEL-zz`}, "manifest"},
		{"publish must be a boolean", map[string]any{"manifest": manifestString(manifest(newSlug(), "1.0.0", nil)), "publish": "yes"}, "publish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.api(t, w.Dev, "POST", "/dev/kits/versions", tc.body, nil)
			wantValidation(t, r, tc.path, sentinel)
		})
	}
}

// docs/api.md "Developer API": the developer API takes a developer token only.
func TestDev_TokenRequired(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	body := map[string]any{"manifest": manifestString(manifest(newSlug(), "1.0.0", baseScopes)), "publish": true}

	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"bot token", env.In.Token},
		{"operator token", s.OpToken},
		{"unknown developer token", "kdev_" + randToken()},
	} {
		t.Run(tc.name+" cannot upload", func(t *testing.T) {
			r := s.api(t, tc.token, "POST", "/dev/kits/versions", body, nil)
			if r.Status != 401 && r.Status != 403 {
				t.Fatalf("want 401 or 403%s", r)
			}
			checkErrorBody(t, r)
			if r.Status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate%s", r)
			}
			p := s.api(t, tc.token, "POST", "/dev/kits/"+env.Kit.ID+"/versions/1.0.0/publish", nil, nil)
			if p.Status != 401 && p.Status != 403 {
				t.Fatalf("publish: want 401 or 403%s", p)
			}
		})
	}

	t.Run("deleted developer token cannot upload", func(t *testing.T) {
		tok, id := env.W.devToken(t, env.W.Owner.ID)
		want(t, s.api(t, tok, "POST", "/dev/kits/versions", map[string]any{
			"manifest": manifestString(manifest(newSlug(), "1.0.0", baseScopes)),
		}, nil), 201)
		want(t, s.ops(t, "DELETE", "/ops/v1/developer-tokens/"+id, nil), 200)
		r := s.api(t, tok, "POST", "/dev/kits/versions", body, nil)
		wantError(t, r, 401, "invalid_token")
	})

}

// docs/api.md "Developer API" upload and publish answer installationId: the developer's
// workspace's active installation of the Kit, null when there is none.
func TestDev_VersionAnswerInstallationID(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	m := manifest(newSlug(), "1.0.0", baseScopes)
	first := w.uploadVersion(t, m, true)
	want(t, first, 201)
	if first.Get("installationId") != nil || !has(first.JSON, "", "installationId") {
		t.Fatalf("a Kit installed nowhere: want installationId null%s", first)
	}
	in := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": first.Str("kitId")})
	want(t, in, 201)
	instID := in.Str("installation.id")
	m["version"] = "1.1.0"
	up := w.uploadVersion(t, m, false)
	want(t, up, 201)
	if up.Str("installationId") != instID {
		t.Fatalf("upload: want installationId %s%s", instID, up)
	}
	pub := s.api(t, w.Dev, "POST", "/dev/kits/"+first.Str("kitId")+"/versions/1.1.0/publish", nil, nil)
	want(t, pub, 200)
	if pub.Str("installationId") != instID {
		t.Fatalf("publish: want installationId %s%s", instID, pub)
	}
	want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+instID, nil), 200)
	m["version"] = "1.2.0"
	if r := w.uploadVersion(t, m, false); r.Get("installationId") != nil {
		t.Fatalf("after uninstall: want installationId null%s", r)
	}
}
