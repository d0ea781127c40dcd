package manifest

import (
	"net/url"
	"os"
	"slices"
	"testing"
)

func TestRebase(t *testing.T) {
	text, err := os.ReadFile("testdata/everything.json")
	if err != nil {
		t.Fatal(err)
	}
	orig := mustParse(t, string(text))
	origin, _ := url.Parse("https://abc.tunnel.example:8443/ignored/path?q=1")
	out, err := Rebase(string(text), origin)
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, out)
	t.Run("every endpoint URL moves onto the origin, keeping path and query", func(t *testing.T) {
		want := []string{
			"https://abc.tunnel.example:8443/oauth/callback",
			"https://abc.tunnel.example:8443/interact",
			"https://abc.tunnel.example:8443/events",
			"https://abc.tunnel.example:8443/commands",
			"https://abc.tunnel.example:8443/tools",
		}
		if got := m.EndpointURLs(); !slices.Equal(got, want) {
			t.Fatalf("EndpointURLs = %q, want %q", got, want)
		}
		if got := m.EndpointHosts(); !slices.Equal(got, []string{"abc.tunnel.example"}) {
			t.Fatalf("EndpointHosts = %q", got)
		}
	})
	t.Run("distribution becomes private", func(t *testing.T) {
		if orig.Distribution == "private" || m.Distribution != "private" {
			t.Fatalf("distribution %q -> %q", orig.Distribution, m.Distribution)
		}
	})
	t.Run("URLs that are not endpoints stay", func(t *testing.T) {
		if m.PrivacyPolicyURL != orig.PrivacyPolicyURL || m.Developer.URL != orig.Developer.URL || m.IconURL != orig.IconURL {
			t.Fatalf("non-endpoint URLs changed")
		}
		if m.ExternalAuth == nil || m.ExternalAuth.AuthorizeURL != orig.ExternalAuth.AuthorizeURL {
			t.Fatalf("externalAuth URLs changed")
		}
	})
	t.Run("everything else is unchanged", func(t *testing.T) {
		if m.ConsentHash() != orig.ConsentHash() {
			t.Fatalf("consent hash changed: rebasing must not change what is consented to")
		}
	})
	t.Run("rebasing twice onto the same origin is stable", func(t *testing.T) {
		again, err := Rebase(out, origin)
		if err != nil {
			t.Fatal(err)
		}
		if mustParse(t, again).Hash() != m.Hash() {
			t.Fatalf("manifest hash differs after a second rebase")
		}
	})
}

// Redirect URLs on different hosts with the same path and query become one
// URL on the tunnel: the rebased manifest must still parse, so the copies go.
func TestRebaseMergesRedirectURLsThatBecomeEqual(t *testing.T) {
	text := `{"schemaVersion":1,"slug":"hi","version":"0.0.1","displayName":{"en":"Hi"},"description":{"en":"Hi"},` +
		`"developer":{"name":"Ada","url":"https://ada.example"},"privacyPolicyUrl":"https://ada.example/privacy",` +
		`"oauth":{"redirectUrls":["https://app.ada.example/cb","https://staging.ada.example/cb","https://app.ada.example/other"]}}`
	mustParse(t, text)
	origin, _ := url.Parse("https://abc.tunnel.example")
	out, err := Rebase(text, origin)
	if err != nil {
		t.Fatal(err)
	}
	m, problems := Parse(out)
	if len(problems) > 0 {
		t.Fatalf("rebased manifest does not parse: %v", problems)
	}
	want := []string{"https://abc.tunnel.example/cb", "https://abc.tunnel.example/other"}
	if !slices.Equal(m.OAuth.RedirectURLs, want) {
		t.Fatalf("redirectUrls = %q, want %q", m.OAuth.RedirectURLs, want)
	}
}
