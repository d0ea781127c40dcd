package e2e

import (
	"strings"
	"testing"
)

// Developer API rules on a Kit's lifecycle: which version's distribution
// the Kit takes, dev-install's limit in characters, who may send a test
// event, and a refused first upload that must leave nothing.

// docs/api.md "Kit version": publishing applies "the manifest's
// distribution"; docs/decisions.md "Install links": an install link needs
// "a published unlisted or directory version: a private Kit installs only in
// its own workspace". Publishing an older draft after a newer version was
// published must not make the Kit (whose latest published version is
// private) shareable.
func TestDevAPI_PublishingAnOlderDraftKeepsTheLatestDistribution(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	slug := newSlug()
	old := manifest(slug, "1.0.0", baseScopes)
	old["distribution"] = "unlisted" // no endpoint hosts: no domain needed
	up := w.uploadVersion(t, old, false)
	want(t, up, 201)
	kitID := up.Str("kitId")
	want(t, w.uploadVersion(t, manifest(slug, "2.0.0", baseScopes), true), 201) // latest published: private

	p := s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/versions/1.0.0/publish", nil, nil)
	if p.Status == 200 {
		d := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID, nil, nil)
		want(t, d, 200)
		if d.Str("detail.kit.latestPublishedVersion") != "2.0.0" || d.Str("detail.kit.distribution") != "private" {
			t.Errorf("after publishing the older 1.0.0, the Kit must keep the distribution of its latest published version 2.0.0 (private)%s", d)
		}
	}
	// Whatever the publish answered: the Kit's latest published version is
	// private, so no install link may be made for it.
	l := s.api(t, w.Dev, "POST", "/dev/kits/"+kitID+"/install-link", nil, nil)
	if l.Status != 409 {
		t.Fatalf("an install link was made for a Kit whose latest published version (2.0.0) is private%s", l)
	}
}

// docs/api.md "Manifest": a manifest travels "as a string of 2-65536
// characters"; docs/decisions.md "Dev-install": the rebased manifest "goes
// through the upload rules". A manifest of ~20,700 characters (80 KB of
// UTF-8) that upload accepts must not be refused by dev-install as "longer
// than 65536 characters".
func TestDevAPI_DevInstallCountsCharactersNotBytes(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	sb := newSandbox(t, s)
	m := manifest(newSlug(), "1.0.0", baseScopes)
	desc := map[string]any{"en": "x"}
	for i := 0; i < 40; i++ {
		desc[string(rune('a'+i/26))+string(rune('a'+i%26))] = strings.Repeat("\U0001F600", 500)
	}
	m["description"] = desc
	text := manifestString(m)
	if n, b := len([]rune(text)), len(text); n > 65536 || b <= 65536 {
		t.Fatalf("fixture: %d characters, %d bytes", n, b)
	}
	r := s.api(t, sb.Dev, "POST", "/dev/sandbox/dev-install", map[string]any{"manifest": text, "url": "https://t.example.com"}, nil)
	want(t, r, 201)
}

// docs/deliveries.md "Replay and visibility": the deliveries calls,
// POST /dev/kits/{kitId}/test-events among them, are for "the developers of
// the installed Kit's workspace only, anyone else 404". A sandbox developer
// who installed another workspace's unlisted Kit must not queue events to
// that Kit's endpoint (nor write its developer log).
func TestDevAPI_TestEventsOnlyForTheKitsOwnWorkspace(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	owner := newWorkspace(t, s)
	k := owner.unlistedKit(t)
	sb := newSandbox(t, s)
	want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+sb.ID+"/installations", map[string]any{"kitId": k.ID}), 201)

	r := s.api(t, sb.Dev, "POST", "/dev/kits/"+k.ID+"/test-events", map[string]any{"type": "installation.updated"}, nil)
	wantError(t, r, 404, "not_found")
	l := s.api(t, owner.Dev, "GET", "/dev/kits/"+k.ID+"/logs?source=delivery", nil, nil)
	want(t, l, 200)
	if n := len(jarr(l.JSON, "entries")); n != 0 {
		t.Fatalf("another workspace's developer wrote %d delivery entries into this Kit's log%s", n, l)
	}
}

// SPEC.md 4.10 / docs/api.md "Kit version": the Kit is created by a valid
// upload; a refused request changes nothing. A first upload with publish
// that is refused (409: a directory Kit lacking its icon and categories)
// must leave the slug free: another workspace may then register it, and
// validate there must not call it "belongs to another Kit".
func TestDevAPI_ARefusedFirstUploadLeavesTheSlugFree(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	other := newWorkspace(t, s)
	slug := newSlug()
	m := manifest(slug, "1.0.0", baseScopes)
	m["distribution"] = "directory"
	wantError(t, w.uploadVersion(t, m, true), 409, "conflict")
	l := s.api(t, w.Dev, "GET", "/dev/kits", nil, nil)
	want(t, l, 200)
	for _, k := range jarr(l.JSON, "kits") {
		if jstr(k, "slug") == slug {
			t.Fatalf("the refused upload created a Kit%s", l)
		}
	}

	v := s.api(t, other.Dev, "POST", "/dev/kits/validate", map[string]any{"manifest": manifestString(manifest(slug, "1.0.0", baseScopes))}, nil)
	want(t, v, 200)
	if v.Get("valid") != true {
		t.Errorf("validate in another workspace: the slug of a refused upload is taken%s", v)
	}
	want(t, other.uploadVersion(t, manifest(slug, "1.0.0", baseScopes), false), 201)
}
