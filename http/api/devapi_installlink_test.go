package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// The consent summary of the install page (docs/decisions.md "Install
// links"), for a Kit with everything it shows: user scopes and tools, which
// need endpoint hosts and so a verified domain.
func TestInstallPageConsent(t *testing.T) {
	h := ts
	person := func(ws, role string) string {
		r := h.ops(t, "POST", "/workspaces/"+ws+"/users", map[string]any{"displayName": role + " person", "role": role})
		want(t, r, 201)
		return r.str("user.id")
	}
	r := h.ops(t, "POST", "/workspaces", map[string]any{"name": "developer"})
	want(t, r, 201)
	devWS := r.str("workspace.id")
	r = h.ops(t, "POST", "/users/"+person(devWS, "owner")+"/developer-tokens", map[string]any{"name": "test"})
	want(t, r, 201)
	dev := r.str("token")
	r = h.ops(t, "POST", "/workspaces", map[string]any{"name": "Installers & Co"})
	want(t, r, 201)
	r = h.ops(t, "POST", "/users/"+person(r.str("workspace.id"), "admin")+"/sessions", nil)
	want(t, r, 201)
	cookie := r.str("cookie")

	slug := "il" + strings.ReplaceAll(ids.New()[24:], "-", "")
	man, err := json.Marshal(map[string]any{
		"schemaVersion": 1, "slug": slug, "version": "1.0.0",
		"displayName":      map[string]any{"en": "Desk <Deploys>"},
		"description":      map[string]any{"en": "Deploys services."},
		"developer":        map[string]any{"name": "Desk Labs", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot":              map[string]any{"displayName": map[string]any{"en": "Bot"}, "scopes": []string{"messages:write"}},
		"oauth":            map[string]any{"redirectUrls": []string{"https://example.com/cb"}, "userScopes": []string{"reactions:write"}},
		"endpoints":        map[string]any{"tools": "https://tools.example.com/tools"},
		"tools": []map[string]any{{
			"name": "start_deploy", "displayName": map[string]any{"en": "Start a deploy"},
			"description": map[string]any{"en": "Starts a <b>deploy</b>."}, "access": "write", "dataClass": "standard", "audience": "any",
		}},
		"distribution": "unlisted",
	})
	if err != nil {
		t.Fatal(err)
	}
	r = h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: dev, json: map[string]any{"manifest": string(man)}})
	want(t, r, 201)
	kitID := r.str("kitId")
	if _, err := ask[*kitpb.DomainReply](h.srv, actors.KindKit, kitID, &kitpb.AddDomain{WorkspaceId: devWS, Domain: "example.com", Method: actors.DomainMethodDNS, Challenge: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ask[*kitpb.DomainReply](h.srv, actors.KindKit, kitID, &kitpb.RecordDomainCheck{WorkspaceId: devWS, Domain: "example.com", Challenge: "c", Ok: true}); err != nil {
		t.Fatal(err)
	}
	want(t, h.do(t, request{method: "POST", path: "/api/v1/dev/kits/" + kitID + "/versions/1.0.0/publish", token: dev}), 200)
	r = h.do(t, request{method: "POST", path: "/api/v1/dev/kits/" + kitID + "/install-link", token: dev})
	want(t, r, 201)
	link, ok := strings.CutPrefix(r.str("installLink.url"), "http://kit.test/app/kits/install?link=")
	if !ok || !ids.WellFormed(link, ids.InstallLink) {
		t.Fatalf("url: %s", r)
	}

	page := h.do(t, request{method: "GET", path: "/app/kits/install?" + url.Values{"link": {link}}.Encode(), header: map[string]string{"Cookie": cookie}})
	want(t, page, 200)
	body := string(page.body)
	tests := []struct{ name, want string }{
		{"the display name, escaped", "Install Desk &lt;Deploys&gt;"},
		{"the developer", "by <strong>Desk Labs</strong>"},
		{"the installer's workspace, escaped", "<strong>Installers &amp; Co</strong>"},
		{"the version", "version 1.0.0"},
		{"bot scopes in words", app.ScopeInWords("messages:write") + ` <small>(<code>messages:write</code>)</small>`},
		{"user scopes in words", app.ScopeInWords("reactions:write") + ` <small>(<code>reactions:write</code>)</small>`},
		{"each tool with its access and data class, escaped", `<strong>Start a deploy</strong> <small>(<code>start_deploy</code>; write, standard data)</small>: Starts a &lt;b&gt;deploy&lt;/b&gt;.`},
		{"the privacy policy", `href="https://example.com/privacy"`},
		{"the link in the form", `name="link" value="` + link + `"`},
		{"the version the form installs", `name="version" value="1.0.0"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(body, tc.want) {
				t.Fatalf("the page lacks %q:\n%s", tc.want, body)
			}
		})
	}
	t.Run("the page cannot be framed or cached", func(t *testing.T) {
		if page.hdr("X-Frame-Options") != "DENY" || page.hdr("Cache-Control") != "no-store" || page.hdr("Referrer-Policy") != "no-referrer" {
			t.Fatalf("headers %v", page.header)
		}
	})
}
