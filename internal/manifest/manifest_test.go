package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// secret marks submitted values in invalid rows; no problem may repeat it.
const secret = "qqsecretqq"

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// doc is a manifest as generic JSON; edits change it by dotted path, with
// array indexes as numbers ("oauth.redirectUrls.0").
type doc = map[string]any

func baseDoc(t testing.TB) doc { return docOf(t, "full.json") }

func docOf(t testing.TB, name string) doc {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(readFile(t, name)))
	dec.UseNumber()
	var d doc
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// deleted as a value removes the key.
type deletedT struct{}

var deleted deletedT

func set(d doc, path string, v any) {
	parts := strings.Split(path, ".")
	var cur any = d
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if v == deleted {
					delete(c, p)
				} else {
					c[p] = v
				}
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil {
				panic(path)
			}
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		default:
			panic(path)
		}
	}
}

func encode(t testing.TB, d doc) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func arr(v ...any) []any {
	if v == nil {
		return []any{} // null is not an empty array
	}
	return v
}

// edit is a shortcut for a row that sets one path.
func edit(path string, v any) func(doc) { return func(d doc) { set(d, path, v) } }

// ruleRow is one rule of Parse: a manifest and the problem paths it gives.
type ruleRow struct {
	name string
	base string    // file the edit applies to; "": full.json
	edit func(doc) // applied to the base
	raw  string    // used instead when set
	want []string  // problem paths, in order; nil: valid
	// schemaLooser marks a rule docs/manifest.schema.json cannot express:
	// the schema accepts what Parse rejects (see the schema's $comment).
	schemaLooser bool
}

// text returns the manifest text of the row.
func (r ruleRow) text(t testing.TB) string {
	if r.raw != "" {
		return r.raw
	}
	base := r.base
	if base == "" {
		base = "full.json"
	}
	d := docOf(t, base)
	r.edit(d)
	return encode(t, d)
}

func TestParseRules(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range ruleRows(t) {
		if seen[row.name] {
			t.Fatalf("duplicate row name %q", row.name)
		}
		seen[row.name] = true
		t.Run(row.name, func(t *testing.T) {
			text := row.text(t)
			m, problems := Parse(text)
			var got []string
			for _, p := range problems {
				got = append(got, p.Path)
				if containsFold(p.Message, secret) || containsFold(p.Path, secret) {
					t.Errorf("problem %+v echoes the submitted value", p)
				}
				if len(p.Path) > 200 || len(p.Message) > 300 || p.Message == "" {
					t.Errorf("problem %+v breaks the length rules", p)
				}
			}
			if !slices.Equal(got, row.want) {
				t.Fatalf("problem paths = %q, want %q\nproblems: %+v", got, row.want, problems)
			}
			if (m == nil) == (len(row.want) == 0) {
				t.Fatalf("manifest = %v with %d problems", m != nil, len(problems))
			}
		})
	}
}

func ruleRows(t testing.TB) []ruleRow {
	full := readFile(t, "full.json")
	rows := []ruleRow{
		// The document.
		{name: "text of 1 character is rejected", raw: "{", want: []string{""}},
		{name: "text of 65537 characters is rejected", raw: "{}" + strings.Repeat(" ", 65535), want: []string{""}},
		{name: "invalid UTF-8 is rejected", raw: "{\"slug\":\"\xff" + secret + "\"}", want: []string{""}},
		{name: "invalid JSON is one problem at the root", raw: `{"slug": ` + secret + `}`, want: []string{""}},
		{name: "truncated JSON is one problem at the root", raw: full[:200], want: []string{""}},
		{name: "trailing data after the document is rejected", raw: full + ` {"x":1}`, want: []string{""}},
		{name: "top-level array is rejected", raw: `["` + secret + `"]`, want: []string{""}},
		{name: "unknown top-level key is rejected", edit: edit("tool", arr(secret)), want: []string{""}},
		{name: "unknown nested key is rejected", edit: edit("bot.colour", secret), want: []string{"bot"}},
		{name: "unknown key that is not a plain name is reported at its object", edit: edit("developer", map[string]any{"name": "A", "url": "https://a.example", "<" + secret + ">": 1}), want: []string{"developer"}},
		{name: "key differing only in case is unknown", edit: edit("Slug", "other"), want: []string{""}},
		{name: "an unknown key's name is not shown when it is not a plain name", edit: edit("bot.<"+secret+">", 1), want: []string{"bot"}},
		{name: "an unknown key's name is not shown when it is longer than 64 characters", edit: edit("bot."+strings.Repeat("q", 55)+secret, 1), want: []string{"bot"}},
		{name: "an unknown top-level key's name is not shown when it is not a plain name", edit: edit(secret+" ", 1), want: []string{""}},
		{name: "a duplicated unknown key's name is not shown when it is not a plain name", raw: strings.Replace(full, `"slug": "release-radar",`, `"`+secret+`!": 1, "`+secret+`!": 2, "slug": "release-radar",`, 1), want: []string{"", ""}},
		{name: "a language key that is not a language code is not shown", edit: edit("displayName."+secret, "x"), want: []string{"displayName"}},
		{name: "duplicate key is rejected", raw: strings.Replace(full, `"slug": "release-radar",`, `"slug": "release-radar", "slug": "`+secret+`",`, 1), want: []string{"slug"}},
		{name: "duplicate language key is rejected", raw: strings.Replace(full, `"de": "Release-Radar",`, `"de": "Release-Radar", "de": "`+secret+`",`, 1), want: []string{"displayName.de"}},
		{name: "null for an optional object is rejected", edit: func(d doc) { set(d, "interactivity", nil) }, want: []string{"interactivity"}},

		// schemaVersion.
		{name: "missing schemaVersion is rejected", edit: edit("schemaVersion", deleted), want: []string{"schemaVersion"}},
		{name: "schemaVersion 2 is rejected", edit: edit("schemaVersion", 2), want: []string{"schemaVersion"}},
		{name: "schemaVersion 1.0 is rejected", edit: edit("schemaVersion", json.Number("1.0")), want: []string{"schemaVersion"}},
		{name: "schemaVersion 1e0 is rejected", edit: edit("schemaVersion", json.Number("1e0")), want: []string{"schemaVersion"}},
		{name: "schemaVersion as a string is rejected", edit: edit("schemaVersion", "1"), want: []string{"schemaVersion"}},
		{name: "huge schemaVersion is rejected", edit: edit("schemaVersion", json.Number("100000000000000000000000")), want: []string{"schemaVersion"}},

		// slug.
		{name: "slug of 40 characters is accepted", edit: edit("slug", "a"+strings.Repeat("b", 39))},
		{name: "slug of 2 characters is accepted", edit: edit("slug", "a1")},
		{name: "slug of 41 characters is rejected", edit: edit("slug", "a"+strings.Repeat("b", 40)), want: []string{"slug"}},
		{name: "slug of 1 character is rejected", edit: edit("slug", "a"), want: []string{"slug"}},
		{name: "slug with uppercase letters is rejected", edit: edit("slug", "Qqsecretqq"), want: []string{"slug"}},
		{name: "slug with an underscore is rejected", edit: edit("slug", "qq_secretqq"), want: []string{"slug"}},
		{name: "slug with non-ASCII letters is rejected", edit: edit("slug", "qqsécretqq"), want: []string{"slug"}},
		{name: "slug starting with a digit is rejected", edit: edit("slug", "1qqsecretqq"), want: []string{"slug"}},
		{name: "slug starting with a hyphen is rejected", edit: edit("slug", "-qqsecretqq"), want: []string{"slug"}},
		{name: "slug ending with a hyphen is accepted (SPEC: letters, digits and hyphens, a letter first)", edit: edit("slug", "qqsecretqq-")},
		{name: "slug with a double hyphen is accepted", edit: edit("slug", "qq--secretqq")},
		{name: "missing slug is rejected", edit: edit("slug", deleted), want: []string{"slug"}},
		{name: "slug as a number is rejected", edit: edit("slug", 12), want: []string{"slug"}},

		// version.
		{name: "version with a leading zero is rejected", edit: edit("version", "1.02.3"), want: []string{"version"}},
		{name: "version with a 5-digit major is rejected", edit: edit("version", "10000.0.0"), want: []string{"version"}},
		{name: "version as a number is rejected", edit: edit("version", 1), want: []string{"version"}},
		{name: "missing version is rejected", edit: edit("version", deleted), want: []string{"version"}},

		// displayName and description.
		{name: "empty displayName object is rejected", edit: edit("displayName", map[string]any{}), want: []string{"displayName"}},
		{name: "displayName as a string is rejected", edit: edit("displayName", secret), want: []string{"displayName"}},
		{name: "missing displayName is rejected", edit: edit("displayName", deleted), want: []string{"displayName"}},
		{name: "displayName language code of a word is rejected", edit: edit("displayName.english", "x"), want: []string{"displayName"}},
		{name: "displayName language code with lowercase region is rejected", edit: edit("displayName.en-us", "x"), want: []string{"displayName"}},
		{name: "displayName language code with region is accepted", edit: edit("displayName.pt-BR", "Radar")},
		{name: "displayName of 60 characters is accepted", edit: edit("displayName.en", strings.Repeat("é", 60))},
		{name: "displayName of 61 characters is rejected", edit: edit("displayName.en", strings.Repeat("q", 61)), want: []string{"displayName.en"}},
		{name: "empty displayName is rejected", edit: edit("displayName.en", ""), want: []string{"displayName.en"}},
		{name: "blank displayName is rejected", edit: edit("displayName.en", " \t\u00a0"), want: []string{"displayName.en"}},
		{name: "displayName with a line break is rejected", edit: edit("displayName.en", "qq\nsecretqq"), want: []string{"displayName.en"}},
		{name: "displayName with a bidi override is rejected", edit: edit("displayName.en", "qq\u202esecretqq"), want: []string{"displayName.en"}},
		{name: "displayName value as a number is rejected", edit: edit("displayName.en", 5), want: []string{"displayName.en"}},
		{name: "description of 500 characters with line breaks is accepted", edit: edit("description.en", strings.Repeat("ab\n\t", 125))},
		{name: "description of 501 characters is rejected", edit: edit("description.en", strings.Repeat("q", 501)), want: []string{"description.en"}},
		{name: "blank description is rejected", edit: edit("description.de", "\n\n"), want: []string{"description.de"}},
		{name: "description with a control character is rejected", edit: edit("description.en", "qq\x00secretqq"), want: []string{"description.en"}},
		{name: "missing description is rejected", edit: edit("description", deleted), want: []string{"description"}},

		// developer.
		{name: "missing developer is rejected", edit: edit("developer", deleted), want: []string{"developer"}},
		{name: "developer as a string is rejected", edit: edit("developer", secret), want: []string{"developer"}},
		{name: "developer without a name is rejected", edit: edit("developer.name", deleted), want: []string{"developer.name"}},
		{name: "developer name of 80 characters is accepted", edit: edit("developer.name", strings.Repeat("n", 80))},
		{name: "developer name of 81 characters is rejected", edit: edit("developer.name", strings.Repeat("q", 81)), want: []string{"developer.name"}},
		{name: "developer without a URL is rejected", edit: edit("developer.url", deleted), want: []string{"developer.url"}},
		{name: "http developer URL is rejected", edit: edit("developer.url", "http://qqsecretqq.example"), want: []string{"developer.url"}},

		// privacyPolicyUrl and the rules of every URL.
		{name: "missing privacy policy URL is rejected", edit: edit("privacyPolicyUrl", deleted), want: []string{"privacyPolicyUrl"}},
		{name: "http privacy policy URL is rejected", edit: edit("privacyPolicyUrl", "http://qqsecretqq.example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with an uppercase scheme is rejected", edit: edit("privacyPolicyUrl", "HTTPS://qqsecretqq.example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "scheme-relative privacy policy URL is rejected", edit: edit("privacyPolicyUrl", "//qqsecretqq.example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL without a host is rejected", edit: edit("privacyPolicyUrl", "https:///qqsecretqq"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with user information is rejected", edit: edit("privacyPolicyUrl", "https://qq:secretqq@a.example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with a space is rejected", edit: edit("privacyPolicyUrl", "https://a.example/qq secretqq"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with non-ASCII is rejected", edit: edit("privacyPolicyUrl", "https://a.example/qqsécretqq"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with an underscore host is rejected", edit: edit("privacyPolicyUrl", "https://qq_secretqq.example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with an empty label is rejected", edit: edit("privacyPolicyUrl", "https://qqsecretqq..example/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with port 0 is rejected", edit: edit("privacyPolicyUrl", "https://qqsecretqq.example:0/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with port 65536 is rejected", edit: edit("privacyPolicyUrl", "https://qqsecretqq.example:65536/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with an empty port is rejected", edit: edit("privacyPolicyUrl", "https://qqsecretqq.example:/p"), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL of 2000 characters is accepted", edit: edit("privacyPolicyUrl", "https://a.example/"+strings.Repeat("p", 2000-18))},
		{name: "privacy policy URL of 2001 characters is rejected", edit: edit("privacyPolicyUrl", "https://a.example/"+strings.Repeat("q", 2001-18)), want: []string{"privacyPolicyUrl"}},
		{name: "privacy policy URL with a fragment is accepted", edit: edit("privacyPolicyUrl", "https://a.example/p#data")},
		{name: "privacy policy URL with an IPv4 host is accepted", edit: edit("privacyPolicyUrl", "https://192.0.2.1/p")},
		{name: "privacy policy URL with an IPv6 host is accepted", edit: edit("privacyPolicyUrl", "https://[2001:db8::1]:8443/p")},
		{name: "privacy policy URL as a number is rejected", edit: edit("privacyPolicyUrl", 3), want: []string{"privacyPolicyUrl"}},

		// bot.
		{name: "manifest without bot, webhooks, oauth and interactivity is accepted", edit: func(d doc) {
			for _, k := range []string{"bot", "incomingWebhooks", "oauth", "interactivity"} {
				delete(d, k)
			}
		}},
		{name: "bot as an array is rejected", edit: edit("bot", arr()), want: []string{"bot"}},
		{name: "bot without scopes is rejected", edit: edit("bot.scopes", deleted), want: []string{"bot.scopes"}},
		{name: "bot without a display name is accepted", edit: edit("bot.displayName", deleted)},
		{name: "bot with empty scopes is accepted", edit: func(d doc) { set(d, "bot.scopes", arr()); delete(d, "incomingWebhooks") }},
		{name: "bot scopes as a string is rejected", edit: edit("bot.scopes", "messages:write"), want: []string{"bot.scopes"}},
		{name: "unknown bot scope is rejected", edit: edit("bot.scopes.1", secret), want: []string{"bot.scopes[1]"}},
		{name: "bot scope as a number is rejected", edit: edit("bot.scopes.0", 1), want: []string{"bot.scopes[0]"}},
		{name: "duplicate bot scope is rejected", edit: edit("bot.scopes.1", "messages:write"), want: []string{"bot.scopes[1]"}},
		{name: "21 bot scopes are rejected", edit: func(d doc) {
			s := arr()
			for _, k := range KnownScopes() {
				s = append(s, k)
			}
			for len(s) < 21 {
				s = append(s, "messages:read")
			}
			set(d, "bot.scopes", s)
		}, want: []string{"bot.scopes", "bot.scopes[10]", "bot.scopes[11]", "bot.scopes[12]", "bot.scopes[13]", "bot.scopes[14]", "bot.scopes[15]", "bot.scopes[16]", "bot.scopes[17]", "bot.scopes[18]", "bot.scopes[19]", "bot.scopes[20]"}},
		{name: "bot scope users:read.email without users:read is rejected", edit: edit("bot.scopes.2", "files:read"), want: []string{"bot.scopes[3]"}},
		{name: "bot display name of 80 characters is accepted", edit: edit("bot.displayName.en", strings.Repeat("b", 80))},
		{name: "bot display name of 81 characters is rejected", edit: edit("bot.displayName.en", strings.Repeat("q", 81)), want: []string{"bot.displayName.en"}},
		{name: "empty bot display name object is rejected", edit: edit("bot.displayName", map[string]any{}), want: []string{"bot.displayName"}},

		// incomingWebhooks.
		{name: "maxPerInstallation 1 is accepted", edit: edit("incomingWebhooks.maxPerInstallation", 1)},
		{name: "maxPerInstallation 20 is accepted", edit: edit("incomingWebhooks.maxPerInstallation", 20)},
		{name: "maxPerInstallation 0 is rejected", edit: edit("incomingWebhooks.maxPerInstallation", 0), want: []string{"incomingWebhooks.maxPerInstallation"}},
		{name: "maxPerInstallation 21 is rejected", edit: edit("incomingWebhooks.maxPerInstallation", 21), want: []string{"incomingWebhooks.maxPerInstallation"}},
		{name: "maxPerInstallation -1 is rejected", edit: edit("incomingWebhooks.maxPerInstallation", -1), want: []string{"incomingWebhooks.maxPerInstallation"}},
		{name: "maxPerInstallation 2.5 is rejected", edit: edit("incomingWebhooks.maxPerInstallation", json.Number("2.5")), want: []string{"incomingWebhooks.maxPerInstallation"}},
		{name: "missing maxPerInstallation is rejected", edit: edit("incomingWebhooks.maxPerInstallation", deleted), want: []string{"incomingWebhooks.maxPerInstallation"}},
		{name: "incomingWebhooks without bot scope incoming-webhook is rejected", edit: edit("bot.scopes.4", "messages:read"), want: []string{"incomingWebhooks"}},
		{name: "incomingWebhooks without a bot is rejected", edit: edit("bot", deleted), want: []string{"incomingWebhooks"}},
		{name: "bot scope incoming-webhook without incomingWebhooks is rejected", edit: edit("incomingWebhooks", deleted), want: []string{"bot.scopes[4]"}},

		// oauth.
		{name: "oauth without redirectUrls is rejected", edit: edit("oauth.redirectUrls", deleted), want: []string{"oauth.redirectUrls"}},
		{name: "empty redirectUrls is rejected", edit: edit("oauth.redirectUrls", arr()), want: []string{"oauth.redirectUrls"}},
		{name: "redirectUrls as a string is rejected", edit: edit("oauth.redirectUrls", "https://a.example/cb"), want: []string{"oauth.redirectUrls"}},
		{name: "10 redirect URLs are accepted", edit: func(d doc) {
			s := arr()
			for i := range 10 {
				s = append(s, "https://a.example/cb"+strconv.Itoa(i))
			}
			set(d, "oauth.redirectUrls", s)
		}},
		{name: "11 redirect URLs are rejected", edit: func(d doc) {
			s := arr()
			for i := range 11 {
				s = append(s, "https://a.example/cb"+strconv.Itoa(i))
			}
			set(d, "oauth.redirectUrls", s)
		}, want: []string{"oauth.redirectUrls"}},
		{name: "http redirect URL is rejected", edit: edit("oauth.redirectUrls.1", "http://qqsecretqq.example/cb"), want: []string{"oauth.redirectUrls[1]"}},
		{name: "redirect URL with a fragment is rejected", edit: edit("oauth.redirectUrls.0", "https://a.example/cb#qqsecretqq"), want: []string{"oauth.redirectUrls[0]"}},
		{name: "redirect URL of 2001 characters is rejected", edit: edit("oauth.redirectUrls.0", "https://a.example/"+strings.Repeat("q", 2001-18)), want: []string{"oauth.redirectUrls[0]"}},
		{name: "duplicate redirect URL is rejected", edit: edit("oauth.redirectUrls.1", "https://radar.example.com/oauth/callback"), want: []string{"oauth.redirectUrls[1]"}},
		{name: "redirect URLs differing only in case are distinct", edit: edit("oauth.redirectUrls.1", "https://radar.example.com/OAuth/callback")},
		{name: "oauth without userScopes is accepted", edit: edit("oauth.userScopes", deleted)},
		{name: "empty userScopes is accepted", edit: edit("oauth.userScopes", arr())},
		{name: "unknown user scope is rejected", edit: edit("oauth.userScopes.2", secret), want: []string{"oauth.userScopes[2]"}},
		{name: "duplicate user scope is rejected", edit: edit("oauth.userScopes.2", "files:write"), want: []string{"oauth.userScopes[2]"}},
		{name: "user scope incoming-webhook is rejected", edit: edit("oauth.userScopes.0", "incoming-webhook"), want: []string{"oauth.userScopes[0]"}},
		{name: "user scope users:read.email without users:read is rejected", edit: edit("oauth.userScopes.0", "users:read.email"), want: []string{"oauth.userScopes[0]"}},
		{name: "user scope users:read.email with users:read later is accepted", edit: edit("oauth.userScopes", arr("users:read.email", "users:read"))},
		{name: "21 user scopes are rejected", edit: func(d doc) {
			s := arr("users:read")
			for len(s) < 21 {
				s = append(s, "users:read")
			}
			set(d, "oauth.userScopes", s)
		}, want: []string{"oauth.userScopes", "oauth.userScopes[1]", "oauth.userScopes[2]", "oauth.userScopes[3]", "oauth.userScopes[4]", "oauth.userScopes[5]", "oauth.userScopes[6]", "oauth.userScopes[7]", "oauth.userScopes[8]", "oauth.userScopes[9]", "oauth.userScopes[10]", "oauth.userScopes[11]", "oauth.userScopes[12]", "oauth.userScopes[13]", "oauth.userScopes[14]", "oauth.userScopes[15]", "oauth.userScopes[16]", "oauth.userScopes[17]", "oauth.userScopes[18]", "oauth.userScopes[19]", "oauth.userScopes[20]"}},

		// interactivity.
		{name: "interactivity without a URL is rejected", edit: edit("interactivity.url", deleted), want: []string{"interactivity.url"}},
		{name: "http interactivity URL is rejected", edit: edit("interactivity.url", "http://qqsecretqq.example/i"), want: []string{"interactivity.url"}},
		{name: "interactivity URL with a fragment is rejected", edit: edit("interactivity.url", "https://a.example/i#qqsecretqq"), want: []string{"interactivity.url"}},
		{name: "interactivity as true is rejected", edit: edit("interactivity", true), want: []string{"interactivity"}},

		// distribution.
		{name: "missing distribution is accepted", edit: edit("distribution", deleted)},
		{name: "unlisted distribution is accepted", edit: edit("distribution", "unlisted")},
		{name: "unknown distribution is rejected", edit: edit("distribution", secret), want: []string{"distribution"}},
		{name: "distribution in uppercase is rejected", edit: edit("distribution", "PRIVATE"), want: []string{"distribution"}},
		{name: "distribution as a number is rejected", edit: edit("distribution", 1), want: []string{"distribution"}},
	}
	for _, name := range []string{"schemaVersion 1.0 is rejected", "schemaVersion 1e0 is rejected", "privacy policy URL with port 0 is rejected", "privacy policy URL with port 65536 is rejected"} {
		i := slices.IndexFunc(rows, func(r ruleRow) bool { return r.name == name })
		rows[i].schemaLooser = true
	}
	return append(rows, newFieldRows()...)
}

func TestParseFull(t *testing.T) {
	m, problems := Parse(readFile(t, "full.json"))
	if problems != nil {
		t.Fatalf("problems: %+v", problems)
	}
	want := &Manifest{
		SchemaVersion: 1,
		Slug:          "release-radar",
		Version:       Version{2, 10, 0},
		DisplayName:   map[string]string{"en": "Release Radar", "de": "Release-Radar", "fr-CA": "Radar de publication"},
		Description: map[string]string{
			"en": "Posts a summary of every release into the channels you choose.\nUse /radar to ask for the latest one.",
			"de": "Fasst jede Veröffentlichung zusammen.",
		},
		Developer:        Developer{Name: "Radar Works GmbH", URL: "https://radar.example.com/about"},
		PrivacyPolicyURL: "https://radar.example.com/privacy#data",
		Bot: &Bot{
			DisplayName: map[string]string{"en": "Radar", "de": "Radar"},
			Scopes:      []string{"messages:write", "conversations:read", "users:read", "users:read.email", "incoming-webhook"},
		},
		IncomingWebhooks: &IncomingWebhooks{MaxPerInstallation: 5},
		OAuth: &OAuth{
			RedirectURLs: []string{"https://radar.example.com/oauth/callback", "https://EU.Radar.example.com:8443/oauth/callback?region=eu"},
			UserScopes:   []string{"reactions:write", "files:write", "runs:read"},
		},
		Interactivity: &Interactivity{URL: "https://hooks.radar.example.net/interact"},
		Distribution:  "directory",
	}
	if !bytes.Equal(m.Canonical(), want.Canonical()) {
		t.Fatalf("parsed\n%s\nwant\n%s", m.Canonical(), want.Canonical())
	}
	if got := m.DefaultDisplayName(); got != "Release Radar" {
		t.Errorf("DefaultDisplayName = %q", got)
	}
	if got := m.BotDisplayName(); got != "Radar" {
		t.Errorf("BotDisplayName = %q", got)
	}
	if got, want := m.EndpointHosts(), []string{"eu.radar.example.com", "hooks.radar.example.net", "radar.example.com"}; !slices.Equal(got, want) {
		t.Errorf("EndpointHosts = %q, want %q", got, want)
	}
	if !m.AllowsRedirect("https://radar.example.com/oauth/callback") {
		t.Error("AllowsRedirect rejects a listed URL")
	}
	for _, uri := range []string{"https://radar.example.com/oauth/callback/", "https://radar.example.com/oauth/callback?x=1", "https://RADAR.example.com/oauth/callback", ""} {
		if m.AllowsRedirect(uri) {
			t.Errorf("AllowsRedirect(%q) = true, want exact match only", uri)
		}
	}
	// User-only scopes are user scopes here; only what the directory needs
	// is missing.
	var paths []string
	for _, w := range m.Warnings() {
		paths = append(paths, w.Path)
	}
	if want := []string{"iconUrl", "categories"}; !slices.Equal(paths, want) {
		t.Errorf("Warnings = %q, want %q", paths, want)
	}
}

func TestParseMinimal(t *testing.T) {
	m, problems := Parse(readFile(t, "minimal.json"))
	if problems != nil {
		t.Fatalf("problems: %+v", problems)
	}
	if m.Distribution != "private" {
		t.Errorf("Distribution = %q, want the default private", m.Distribution)
	}
	if m.Bot != nil || m.IncomingWebhooks != nil || m.OAuth != nil || m.Interactivity != nil {
		t.Errorf("optional parts present: %+v", m)
	}
	if got := m.DefaultDisplayName(); got != "こんにちは" {
		t.Errorf("DefaultDisplayName = %q", got)
	}
	if got := m.BotDisplayName(); got != "" {
		t.Errorf("BotDisplayName without a bot = %q", got)
	}
	if got := m.EndpointHosts(); len(got) != 0 {
		t.Errorf("EndpointHosts = %q, want none (developer and privacy URLs are not endpoints)", got)
	}
	if m.AllowsRedirect("https://ada.example") {
		t.Error("AllowsRedirect without oauth")
	}
}

func TestDefaultDisplayNamePicksSmallestKeyWithoutEnglish(t *testing.T) {
	m := &Manifest{DisplayName: map[string]string{"fr": "F", "de-AT": "A", "de": "D", "en-GB": "G"}}
	if got := m.DefaultDisplayName(); got != "D" {
		t.Fatalf("DefaultDisplayName = %q, want the de text", got)
	}
	m.DisplayName["en"] = "E"
	if got := m.DefaultDisplayName(); got != "E" {
		t.Fatalf("DefaultDisplayName = %q, want the en text", got)
	}
}

// An unknown key is named when it is a short plain name, what a typo
// looks like, and otherwise not (docs/api.md: no input echoed
// beyond what the developer needs).
func TestUnknownKeyMessages(t *testing.T) {
	for _, tc := range []struct {
		rule, key, path, message string
	}{
		{"a plain unknown key is named", "bot.scopez", "bot", `unknown key "scopez"`},
		{"a top-level plain unknown key is named", "tool", "", `unknown key "tool"`},
		{"digits, _, - and . are plain", "developer.e-mail_2.x", "developer", `unknown key "e-mail_2.x"`},
		{"a key of 64 characters is named", "bot." + strings.Repeat("k", 64), "bot", `unknown key "` + strings.Repeat("k", 64) + `"`},
		{"a key of 65 characters is not named", "bot." + strings.Repeat("k", 65), "bot", "has an unknown key"},
		{"a key with a space is not named", "bot.scope z", "bot", "has an unknown key"},
		{"a key with a quote is not named", `bot.scope"z`, "bot", "has an unknown key"},
		{"a non-ASCII key is not named", "bot.scopé", "bot", "has an unknown key"},
		{"an empty key is not named", "bot.", "bot", "has an unknown key"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			d := baseDoc(t)
			if object, key, ok := strings.Cut(tc.key, "."); ok {
				d[object].(map[string]any)[key] = 1
			} else {
				d[tc.key] = 1
			}
			_, problems := Parse(encode(t, d))
			if len(problems) != 1 || problems[0].Path != tc.path || problems[0].Message != tc.message {
				t.Fatalf("problems %+v, want one at %q saying %q", problems, tc.path, tc.message)
			}
		})
	}
}

// TestManyProblems pins the order of problems: document order, missing keys
// at the end of their object, cross-field problems at the value concerned.
func TestManyProblems(t *testing.T) {
	_, problems := Parse(readFile(t, "many_problems.json"))
	var b strings.Builder
	for _, p := range problems {
		b.WriteString(p.Path + "\t" + p.Message + "\n")
	}
	if want := readFile(t, "many_problems.golden"); b.String() != want {
		t.Fatalf("problems:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestProblemsAreCapped(t *testing.T) {
	d := baseDoc(t)
	s := arr()
	for range 300 {
		s = append(s, secret)
	}
	set(d, "oauth.userScopes", s)
	_, problems := Parse(encode(t, d))
	if len(problems) != MaxProblems {
		t.Fatalf("%d problems, want %d", len(problems), MaxProblems)
	}
	if last := problems[MaxProblems-1]; last.Path != "" {
		t.Fatalf("last problem = %+v, want the root note that more were found", last)
	}
	if problems[0].Path != "oauth.userScopes" || problems[1].Path != "oauth.userScopes[0]" {
		t.Fatalf("first problems = %+v", problems[:2])
	}
}

func TestKnownScope(t *testing.T) {
	for _, s := range []string{"conversations:read", "messages:read", "messages:write", "reactions:write", "files:read", "files:write", "users:read", "users:read.email", "runs:read", "incoming-webhook"} {
		if !KnownScope(s) {
			t.Errorf("KnownScope(%q) = false", s)
		}
	}
	for _, s := range []string{"", "admin", "users:write", "Messages:read", "messages:read "} {
		if KnownScope(s) {
			t.Errorf("KnownScope(%q) = true", s)
		}
	}
	if !slices.IsSorted(KnownScopes()) || len(KnownScopes()) != 10 {
		t.Errorf("KnownScopes = %q", KnownScopes())
	}
}

func TestWarningsForUserOnlyBotScopes(t *testing.T) {
	d := baseDoc(t)
	set(d, "bot.scopes", arr("messages:write", "reactions:write", "files:read", "files:write", "runs:read"))
	set(d, "distribution", "unlisted")
	delete(d, "incomingWebhooks")
	m, problems := Parse(encode(t, d))
	if problems != nil {
		t.Fatalf("problems: %+v", problems)
	}
	var got []string
	for _, w := range m.Warnings() {
		got = append(got, w.Path)
	}
	if want := []string{"bot.scopes[1]", "bot.scopes[3]", "bot.scopes[4]"}; !slices.Equal(got, want) {
		t.Fatalf("warning paths = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"full.json", "full_reordered.json", "minimal.json", "many_problems.json", "everything.json", "many_problems_fields.json"} {
		f.Add(readFile(f, name))
	}
	f.Add(`{"a":[[[[]]]]}`)
	f.Add(`"x"`)
	f.Fuzz(func(t *testing.T, text string) {
		m, problems := Parse(text)
		if (m == nil) == (len(problems) == 0) {
			t.Fatalf("manifest %v with %d problems", m != nil, len(problems))
		}
		if len(problems) > MaxProblems {
			t.Fatalf("%d problems", len(problems))
		}
		for _, p := range problems {
			// A problem names where it is ("" is the whole document) and
			// what it is, within the lengths of docs/api.md "Developer API".
			if p.Message == "" || len(p.Message) > maxMessageLen || len(p.Path) > maxPathLen || strings.HasPrefix(p.Path, ".") {
				t.Fatalf("problem %+v", p)
			}
		}
		if m != nil {
			again, problems := Parse(string(m.Canonical()))
			if problems != nil || !bytes.Equal(again.Canonical(), m.Canonical()) {
				t.Fatalf("canonical form does not round-trip: %+v", problems)
			}
		}
	})
}
