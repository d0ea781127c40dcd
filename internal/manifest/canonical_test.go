package manifest

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func mustParse(t *testing.T, text string) *Manifest {
	t.Helper()
	m, problems := Parse(text)
	if problems != nil {
		t.Fatalf("problems: %+v", problems)
	}
	return m
}

var hexRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestCanonicalGolden pins the canonical form and hash: stored versions are
// keyed on them, so any change here is a breaking change.
func TestCanonicalGolden(t *testing.T) {
	m := mustParse(t, readFile(t, "full.json"))
	want := strings.TrimSuffix(readFile(t, "full.canonical.json"), "\n")
	if got := string(m.Canonical()); got != want {
		t.Fatalf("Canonical =\n%s\nwant\n%s", got, want)
	}
	if got := m.Hash(); got != sha256Hex([]byte(want)) || !hexRe.MatchString(got) {
		t.Fatalf("Hash = %q", got)
	}
	if !hexRe.MatchString(m.ConsentHash()) {
		t.Fatalf("ConsentHash = %q", m.ConsentHash())
	}
}

func TestCanonicalIsStableUnderReorderingWhitespaceAndEscapes(t *testing.T) {
	a := mustParse(t, readFile(t, "full.json"))
	b := mustParse(t, readFile(t, "full_reordered.json"))
	if !bytes.Equal(a.Canonical(), b.Canonical()) {
		t.Fatalf("canonical forms differ:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	if a.Hash() != b.Hash() || a.ConsentHash() != b.ConsentHash() {
		t.Fatal("hashes differ")
	}
}

func TestCanonicalRoundTrips(t *testing.T) {
	for _, name := range []string{"full.json", "minimal.json"} {
		m := mustParse(t, readFile(t, name))
		again := mustParse(t, string(m.Canonical()))
		if !bytes.Equal(m.Canonical(), again.Canonical()) {
			t.Errorf("%s: canonical form changes on a second parse", name)
		}
	}
}

func TestCanonicalEscapesMinimally(t *testing.T) {
	d := baseDoc(t)
	set(d, "description.en", "a \"q\" \\ </b> & \u2028 é \n\t")
	m := mustParse(t, encode(t, d))
	if want := `"en":"a \"q\" \\ </b> & ` + "\u2028" + ` é \n\t"`; !bytes.Contains(m.Canonical(), []byte(want)) {
		t.Fatalf("Canonical = %s, want it to contain %s", m.Canonical(), want)
	}
}

func TestDefaultDistributionHashesLikePrivate(t *testing.T) {
	d := baseDoc(t)
	set(d, "distribution", "private")
	explicit := mustParse(t, encode(t, d))
	delete(d, "distribution")
	implicit := mustParse(t, encode(t, d))
	if explicit.Hash() != implicit.Hash() {
		t.Fatal("absent distribution hashes differently from private")
	}
	set(d, "oauth.userScopes", arr())
	empty := mustParse(t, encode(t, d))
	delete(d["oauth"].(map[string]any), "userScopes")
	absent := mustParse(t, encode(t, d))
	if empty.Hash() != absent.Hash() {
		t.Fatal("empty userScopes hashes differently from absent")
	}
}

// edits change one value each; every one must change the manifest hash.
var valueEdits = []struct {
	name    string
	edit    func(doc)
	consent bool // whether the consent hash changes too
}{
	{"slug", edit("slug", "release-radar2"), true},
	{"version", edit("version", "2.10.1"), false},
	{"display name text", edit("displayName.de", "Radar"), true},
	{"display name language", func(d doc) {
		dn := d["displayName"].(map[string]any)
		dn["de-DE"] = dn["de"]
		delete(dn, "de")
	}, true},
	{"description", edit("description.en", "Posts release summaries."), true},
	{"developer name", edit("developer.name", "Radar Works AG"), true},
	{"developer URL", edit("developer.url", "https://radar.example.com/"), true},
	{"privacy policy URL", edit("privacyPolicyUrl", "https://radar.example.com/privacy"), true},
	{"bot display name", edit("bot.displayName.en", "Radar Bot"), false},
	{"bot scope added", func(d doc) {
		set(d, "bot.scopes", append(d["bot"].(map[string]any)["scopes"].([]any), "messages:read"))
	}, true},
	{"bot scope replaced", edit("bot.scopes.0", "messages:read"), true},
	{"bot scope order", edit("bot.scopes", arr("incoming-webhook", "messages:write", "conversations:read", "users:read", "users:read.email")), false},
	{"webhook count", edit("incomingWebhooks.maxPerInstallation", 6), false},
	{"redirect URL", edit("oauth.redirectUrls.0", "https://radar.example.com/oauth/cb"), false},
	{"user scope removed", edit("oauth.userScopes", arr("reactions:write", "files:write")), true},
	{"user scope order", edit("oauth.userScopes", arr("runs:read", "files:write", "reactions:write")), false},
	{"interactivity URL", edit("interactivity.url", "https://hooks.radar.example.net/interact2"), false},
	{"interactivity removed", edit("interactivity", deleted), true},
	{"distribution", edit("distribution", "unlisted"), false},
	{"oauth removed", edit("oauth", deleted), true},
}

func TestHashChangesWithEveryValue(t *testing.T) {
	base := mustParse(t, readFile(t, "full.json"))
	hashes := map[string]string{base.Hash(): "base"}
	for _, e := range valueEdits {
		d := baseDoc(t)
		e.edit(d)
		m := mustParse(t, encode(t, d))
		h := m.Hash()
		if other, dup := hashes[h]; dup {
			t.Errorf("%s: hash equals that of %s", e.name, other)
		}
		hashes[h] = e.name
	}
}

func TestConsentHashCoversOnlyWhatMembersConsentTo(t *testing.T) {
	base := mustParse(t, readFile(t, "full.json"))
	for _, e := range valueEdits {
		d := baseDoc(t)
		e.edit(d)
		m := mustParse(t, encode(t, d))
		if changed := m.ConsentHash() != base.ConsentHash(); changed != e.consent {
			t.Errorf("%s: consent hash changed = %v, want %v", e.name, changed, e.consent)
		}
	}
}
