package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/ids"
)

func TestDeveloperReads(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	g := h.newFixture(t) // another workspace
	newSlug := func() string { return "h" + strings.ReplaceAll(ids.New()[24:], "-", "") }
	withEndpoints := func(slug, version string) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(manifestText(slug, version, []string{"messages:read"}, nil)), &m)
		m["endpoints"] = map[string]any{"events": "https://hooks.example.com/events"}
		m["events"] = []string{"message.posted"}
		b, _ := json.Marshal(m)
		return string(b)
	}
	// A published 1.0.0 and a draft 1.1.0 of one slug of f's workspace.
	pubSlug := newSlug()
	r := h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": manifestText(pubSlug, "1.0.0", []string{"messages:read"}, nil), "publish": true}})
	want(t, r, 201)
	pubKit := strAt(r, "kitId")
	want(t, h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": withEndpoints(pubSlug, "1.1.0")}}), 201)

	validate := func(token, man string) request {
		return request{method: "POST", path: "/api/v1/dev/kits/validate", token: token, json: map[string]any{"manifest": man}}
	}
	get := func(token, path string) request {
		return request{method: "GET", path: "/api/v1/dev" + path, token: token}
	}
	tests := []struct {
		name       string
		rq         request
		wantStatus int
		wantCode   string
		check      func(t *testing.T, r *response)
	}{
		{"me: the token's workspace, member, sandbox flag and token metadata, used now", get(f.dev, "/me"), 200, "", func(t *testing.T, r *response) {
			if strAt(r, "workspaceId") != f.ws || strAt(r, "userId") != f.member || fieldAt(r, "sandbox") != false ||
				!ids.Valid(strAt(r, "token.id")) || strAt(r, "token.name") != "test" || strAt(r, "token.createdAt") == "" ||
				strAt(r, "token.expiresAt") == "" || strAt(r, "token.lastUsedAt") == "" || fieldAt(r, "token.revokedAt") != nil {
				t.Fatalf("%s", r)
			}
		}},
		{"me: a bot token is 403 forbidden", get(f.bot, "/me"), 403, "forbidden", nil},
		{"validate: a valid new manifest", validate(f.dev, manifestText(newSlug(), "1.0.0", []string{"messages:read"}, nil)), 200, "", func(t *testing.T, r *response) {
			if fieldAt(r, "valid") != true || len(fieldAt(r, "problems").([]any)) != 0 || fieldAt(r, "consent.slug") == nil ||
				fieldAt(r, "consent.ownedByWorkspace") != true || fieldAt(r, "diff") != nil || fieldAt(r, "existingKitId") != nil ||
				len(fieldAt(r, "hosts").([]any)) != 0 || len(fieldAt(r, "unverifiedHosts").([]any)) != 0 {
				t.Fatalf("%s", r)
			}
		}},
		{"validate: schema problems are 200 valid false with paths", validate(f.dev, `{"schemaVersion":1}`), 200, "", func(t *testing.T, r *response) {
			if fieldAt(r, "valid") != false || len(fieldAt(r, "problems").([]any)) == 0 || fieldAt(r, "consent") != nil {
				t.Fatalf("%s", r)
			}
		}},
		{"validate: a reserved slug is a problem at slug", validate(f.dev, manifestText("admin", "1.0.0", []string{}, nil)), 200, "", func(t *testing.T, r *response) {
			if fieldAt(r, "valid") != false || strAt(r, "problems.0.path") != "slug" {
				t.Fatalf("%s", r)
			}
		}},
		{"validate: another workspace's slug is a problem at slug", validate(g.dev, manifestText(pubSlug, "2.0.0", []string{}, nil)), 200, "", func(t *testing.T, r *response) {
			if fieldAt(r, "valid") != false || strAt(r, "problems.0.path") != "slug" || fieldAt(r, "existingKitId") != nil || fieldAt(r, "diff") != nil {
				t.Fatalf("%s", r)
			}
		}},
		{"validate: the own Kit's id, hosts, and the diff to the latest published version", validate(f.dev, withEndpoints(pubSlug, "2.0.0")), 200, "", func(t *testing.T, r *response) {
			if fieldAt(r, "valid") != true || strAt(r, "existingKitId") != pubKit || fieldAt(r, "diff.wider") != true ||
				strAt(r, "diff.addedEvents.0") != "message.posted" || strAt(r, "hosts.0") != "hooks.example.com" ||
				strAt(r, "unverifiedHosts.0") != "hooks.example.com" {
				t.Fatalf("%s", r)
			}
		}},
		{"upload: a reserved slug is 400 at manifest.slug", request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev,
			json: map[string]any{"manifest": manifestText("system", "1.0.0", []string{}, nil)}}, 400, "validation_error", func(t *testing.T, r *response) {
			if !strings.HasPrefix(strAt(r, "message"), "manifest.slug:") {
				t.Fatalf("%s", r)
			}
		}},
		{"validate: manifest is required", request{method: "POST", path: "/api/v1/dev/kits/validate", token: f.dev, json: map[string]any{}}, 400, "validation_error", nil},
		{"kits: the workspace's Kits, installedHere for the installed one", get(f.dev, "/kits"), 200, "", func(t *testing.T, r *response) {
			kits := fieldAt(r, "kits").([]any)
			if len(kits) != 2 || strAt(r, "kits.0.kitId") != f.kitID || fieldAt(r, "kits.0.installedHere") != true ||
				strAt(r, "kits.1.kitId") != pubKit || fieldAt(r, "kits.1.installedHere") != false ||
				strAt(r, "kits.1.latestVersion") != "1.1.0" || strAt(r, "kits.1.latestPublishedVersion") != "1.0.0" || strAt(r, "kits.1.state") != "active" {
				t.Fatalf("%s", r)
			}
		}},
		{"kit detail: versions, credentials metadata, install link, hosts of the latest version", get(f.dev, "/kits/"+pubKit), 200, "", func(t *testing.T, r *response) {
			if strAt(r, "detail.kit.kitId") != pubKit || len(fieldAt(r, "detail.versions").([]any)) != 2 ||
				len(fieldAt(r, "detail.domains").([]any)) != 0 || fieldAt(r, "detail.installLink.active") != false ||
				fieldAt(r, "detail.credentials.clientSecret") != nil || strAt(r, "detail.endpointHosts.0") != "hooks.example.com" ||
				strAt(r, "detail.unverifiedHosts.0") != "hooks.example.com" {
				t.Fatalf("%s", r)
			}
		}},
		{"kit detail: another workspace's Kit is 404", get(g.dev, "/kits/"+pubKit), 404, "not_found", nil},
		{"kit detail: a malformed id is 404", get(f.dev, "/kits/nope"), 404, "not_found", nil},
		{"logs: audit entries newest first, with the sources", get(f.dev, "/kits/"+pubKit+"/logs"), 200, "", func(t *testing.T, r *response) {
			if strAt(r, "entries.0.event") != "version.uploaded" || strAt(r, "entries.0.status") != "1.1.0" ||
				strAt(r, "entries.1.event") != "version.published" || strAt(r, "entries.0.source") != "audit" ||
				len(fieldAt(r, "entries").([]any)) != 3 || fieldAt(r, "nextCursor") != nil || len(fieldAt(r, "sources").([]any)) != 3 {
				t.Fatalf("%s", r)
			}
		}},
		{"logs: source filter", get(f.dev, "/kits/"+pubKit+"/logs?source=delivery"), 200, "", func(t *testing.T, r *response) {
			if len(fieldAt(r, "entries").([]any)) != 0 {
				t.Fatalf("%s", r)
			}
		}},
		{"logs: level filter", get(f.dev, "/kits/"+pubKit+"/logs?level=info&limit=1"), 200, "", func(t *testing.T, r *response) {
			if len(fieldAt(r, "entries").([]any)) != 1 || strAt(r, "nextCursor") == "" {
				t.Fatalf("%s", r)
			}
		}},
		{"logs: unknown source is 400", get(f.dev, "/kits/"+pubKit+"/logs?source=x"), 400, "validation_error", nil},
		{"logs: unknown level is 400", get(f.dev, "/kits/"+pubKit+"/logs?level=warn"), 400, "validation_error", nil},
		{"logs: a source given twice is 400", get(f.dev, "/kits/"+pubKit+"/logs?source=audit&source=delivery"), 400, "validation_error", nil},
		{"logs: a level given twice is 400", get(f.dev, "/kits/"+pubKit+"/logs?level=info&level=error"), 400, "validation_error", nil},
		{"logs: limit above 100 is 400", get(f.dev, "/kits/"+pubKit+"/logs?limit=101"), 400, "validation_error", nil},
		{"logs: limit 100 is allowed", get(f.dev, "/kits/"+pubKit+"/logs?limit=100"), 200, "", nil},
		{"logs: a cursor of another list is 400", get(f.dev, "/kits/"+pubKit+"/logs?cursor="+cursorValue("devlog:"+f.kitID, ids.New())), 400, "validation_error", nil},
		{"logs: another workspace's Kit is 404", get(g.dev, "/kits/"+pubKit+"/logs"), 404, "not_found", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.rq)
			if tt.wantCode == "" {
				want(t, r, tt.wantStatus)
			} else {
				wantError(t, r, tt.wantStatus, tt.wantCode)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}

	t.Run("validate changes nothing: the slug stays free", func(t *testing.T) {
		slug := newSlug()
		want(t, h.do(t, validate(f.dev, manifestText(slug, "1.0.0", []string{}, nil))), 200)
		want(t, h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: g.dev, json: map[string]any{
			"manifest": manifestText(slug, "1.0.0", []string{}, nil)}}), 201)
	})

	t.Run("logs: the cursor pages through every entry once", func(t *testing.T) {
		var seen []string
		path := "/kits/" + pubKit + "/logs?limit=2"
		for range 5 {
			r := h.do(t, get(f.dev, path))
			want(t, r, 200)
			for _, e := range fieldAt(r, "entries").([]any) {
				seen = append(seen, e.(map[string]any)["id"].(string))
			}
			next := strAt(r, "nextCursor")
			if next == "" {
				break
			}
			path = "/kits/" + pubKit + "/logs?limit=2&cursor=" + next
		}
		if len(seen) != 3 || seen[0] <= seen[1] || seen[1] <= seen[2] {
			t.Fatalf("entries %v", seen)
		}
	})
}

func cursorValue(list, position string) string { return *cursorFor(list, position, true) }

// fieldAt is response.field with list indices ("kits.0.kitId").
func fieldAt(r *response, path string) any {
	var v any
	if json.Unmarshal(r.body, &v) != nil {
		return nil
	}
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func strAt(r *response, path string) string {
	s, _ := fieldAt(r, path).(string)
	return s
}
