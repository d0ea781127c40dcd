package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The hashes of manifests written before tools, events and the rest existed
// must not change: stored versions and consents are keyed on them.
func TestHashesOfOlderManifestsAreUnchanged(t *testing.T) {
	for _, c := range []struct{ file, hash, consent string }{
		{"full.json", "1918ae46c6a16299fc9caee5d697a0cb4633885494b920a40d9ec57f63fa6063", "ab39766e04e03119cdff0d100e7769c7c71c0cb4aac0fbc3cc5deec7a7fac7b9"},
		{"minimal.json", "6f3975a40c0d41b0da44c12734786df41f284b5a8df3142fcf0c017cd3e18f0d", "5924521f50715cf177750667dea075d62da40a27c5e005a8264c2909ac87694f"},
	} {
		m := mustParse(t, readFile(t, c.file))
		if m.Hash() != c.hash || m.ConsentHash() != c.consent {
			t.Errorf("%s: Hash %s ConsentHash %s, want %s %s", c.file, m.Hash(), m.ConsentHash(), c.hash, c.consent)
		}
	}
}

func TestCanonicalGoldenEverything(t *testing.T) {
	m := mustParse(t, readFile(t, every))
	want := strings.TrimSuffix(readFile(t, "everything.canonical.json"), "\n")
	if got := string(m.Canonical()); got != want {
		t.Fatalf("Canonical =\n%s\nwant\n%s", got, want)
	}
	for _, name := range []string{every, "big.json"} {
		m := mustParse(t, readFile(t, name))
		again := mustParse(t, string(m.Canonical()))
		if !bytes.Equal(m.Canonical(), again.Canonical()) || m.ConsentHash() != again.ConsentHash() {
			t.Errorf("%s: canonical form changes on a second parse", name)
		}
	}
}

// Declaring nothing and declaring an empty value are the same manifest.
func TestEmptyNewFieldsHashLikeAbsentOnes(t *testing.T) {
	rows := []struct {
		name  string
		empty func(doc)
	}{
		{"tools", all(edit("tools", arr()), edit("endpoints.tools", deleted))},
		{"events", all(edit("events", arr()), edit("endpoints.events", deleted))},
		{"commands", all(edit("commands", arr()), edit("endpoints.commands", deleted))},
		{"categories", edit("categories", arr())},
		{"sample", edit("sample", false)},
		{"modelDataPolicy", edit("modelDataPolicy", "none")},
		{"externalAuth.optionalScopes", edit("externalAuth.optionalScopes", arr())},
		{"externalAuth.requiredScopes", edit("externalAuth.requiredScopes", arr())},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			d := docOf(t, every)
			set(d, "distribution", "unlisted")
			row.empty(d)
			empty := mustParse(t, encode(t, d))
			set(d, row.name, deleted)
			absent := mustParse(t, encode(t, d))
			if empty.Hash() != absent.Hash() || empty.ConsentHash() != absent.ConsentHash() {
				t.Fatalf("empty %s hashes differently from absent", row.name)
			}
		})
	}
	d := docOf(t, "full.json")
	set(d, "endpoints", map[string]any{})
	if mustParse(t, encode(t, d)).Hash() != mustParse(t, readFile(t, "full.json")).Hash() {
		t.Fatal("empty endpoints hashes differently from absent")
	}
}

// Every edit changes the manifest hash; consent says whether the consent
// hash changes too.
var newFieldEdits = []struct {
	name    string
	edit    func(doc)
	consent bool
}{
	{"tool added", func(d doc) {
		set(d, "tools", append(get(d, "tools").([]any), map[string]any{"name": "x", "displayName": map[string]any{"en": "X"}, "description": map[string]any{"en": "X"}, "access": "read", "dataClass": "aggregate", "audience": "private"}))
	}, true},
	{"tool removed", edit("tools", arr(get(docOfT(), "tools.0"), get(docOfT(), "tools.1"))), true},
	{"tool access", edit("tools.0.access", "write"), true},
	{"tool data class", edit("tools.0.dataClass", "personal"), true},
	{"tool audience", edit("tools.0.audience", "private"), true},
	{"tool display name", edit("tools.0.displayName.en", "Deploys"), true},
	{"tool description", edit("tools.0.description.en", "Lists deploys."), true},
	{"tool order", edit("tools", arr(get(docOfT(), "tools.2"), get(docOfT(), "tools.0"), get(docOfT(), "tools.1"))), false},
	{"event added", edit("events", arr("message.posted", "bot.mentioned", "channel.member_joined", "installation.uninstalled", "message.edited")), true},
	{"event order", edit("events", arr("bot.mentioned", "message.posted", "channel.member_joined", "installation.uninstalled")), false},
	{"command added", edit("commands.1.name", "/undo"), true},
	{"command description", edit("commands.1.description.en", "Undo"), false},
	{"command usage", edit("commands.0.usage.en", "/deploy SERVICE"), false},
	{"command order", edit("commands", arr(get(docOfT(), "commands.1"), get(docOfT(), "commands.0"))), false},
	{"external auth scope added", edit("externalAuth.optionalScopes", arr("repo", "gist")), true},
	{"external auth scope made optional", func(d doc) {
		set(d, "externalAuth.requiredScopes", arr("repo:status"))
		set(d, "externalAuth.optionalScopes", arr("repo", "read:org"))
	}, true},
	{"external auth scope order", edit("externalAuth.requiredScopes", arr("read:org", "repo:status")), false},
	{"external auth display name", edit("externalAuth.displayName.en", "GitHub.com"), true},
	{"external auth authorize URL", edit("externalAuth.authorizeUrl", "https://github.example.com/login/oauth/authorize"), true},
	{"external auth token URL", edit("externalAuth.tokenUrl", "https://github.example.com/login/oauth/access_token"), true},
	{"external auth removed", edit("externalAuth", deleted), true},
	{"model data policy", edit("modelDataPolicy", "none"), true},
	{"icon", edit("iconUrl", "https://cdn.desk.example.com/icon-1024.png"), true},
	{"categories", edit("categories", arr("developer-tools")), false},
	{"sample", edit("sample", true), false},
	{"tools endpoint", edit("endpoints.tools", "https://api.desk.example.com/tools2"), false},
	{"events endpoint", edit("endpoints.events", "https://api.desk.example.com/events2"), false},
	{"commands endpoint", edit("endpoints.commands", "https://api.desk.example.com/commands2"), false},
}

// docOfT reads everything.json outside a test (for table literals).
func docOfT() doc {
	b, err := os.ReadFile("testdata/" + every)
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var d doc
	if err := dec.Decode(&d); err != nil {
		panic(err)
	}
	return d
}

func TestNewFieldsInHashes(t *testing.T) {
	base := mustParse(t, readFile(t, every))
	hashes := map[string]string{base.Hash(): "base"}
	for _, e := range newFieldEdits {
		d := docOf(t, every)
		e.edit(d)
		m := mustParse(t, encode(t, d))
		if other, dup := hashes[m.Hash()]; dup {
			t.Errorf("%s: hash equals that of %s", e.name, other)
		}
		hashes[m.Hash()] = e.name
		if changed := m.ConsentHash() != base.ConsentHash(); changed != e.consent {
			t.Errorf("%s: consent hash changed = %v, want %v", e.name, changed, e.consent)
		}
	}
}

func TestConsentSummaryGolden(t *testing.T) {
	m := mustParse(t, readFile(t, every))
	owned := true
	s := m.ConsentSummary(SummaryOptions{Available: true, Installed: false, Official: false, OwnedByWorkspace: &owned, Language: "de-AT"})
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "everything.summary.json"); string(got)+"\n" != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
	if s.ConsentHash != m.ConsentHash() {
		t.Fatal("summary consent hash differs")
	}
}

func TestConsentSummaryOfMinimalManifest(t *testing.T) {
	m := mustParse(t, readFile(t, "minimal.json"))
	b, err := json.Marshal(m.ConsentSummary(SummaryOptions{Installed: true, Official: true}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"slug":"hi","version":"0.0.1","official":true,"displayName":"こんにちは","description":"挨拶します。","developerName":"Ada",` +
		`"privacyPolicyUrl":"https://ada.example/privacy","iconUrl":null,"categories":[],"sample":false,"externalAuth":null,"botScopes":[],"tools":[],` +
		`"requestedModelDataPolicy":"none","consentHash":"` + m.ConsentHash() + `","available":false,"installed":true}`
	if string(b) != want {
		t.Fatalf("summary\n%s\nwant\n%s", b, want)
	}
}

func TestConsentSummaryLanguage(t *testing.T) {
	texts := map[string]string{"en": "E", "de": "D", "pt-BR": "P", "fr-CA": "F", "fr-BE": "B"}
	for lang, want := range map[string]string{"": "E", "de": "D", "de-CH": "D", "pt": "P", "pt-PT": "P", "fr": "B", "ja": "E", "en-GB": "E"} {
		if got := pickLanguage(texts, lang); got != want {
			t.Errorf("pickLanguage(%q) = %q, want %q", lang, got, want)
		}
	}
	if got := pickLanguage(map[string]string{"fr": "F", "de": "D"}, "ja"); got != "D" {
		t.Errorf("without en: %q, want the smallest code", got)
	}
}

// diffRows edit two copies of everything.json: from (the published
// version) and to (the new one).
var diffRows = []struct {
	name     string
	from, to func(doc)
	want     string // the diff with empty lists, "unchanged", null and false left out
}{
	{name: "identical versions", want: `{}`},

	// Each cause of wider on its own.
	{name: "added bot scope is wider", to: edit("bot.scopes", arr("messages:write", "messages:read", "conversations:read", "users:read", "incoming-webhook", "files:read")),
		want: `{"addedBotScopes":["files:read"],"wider":true}`},
	{name: "added user scope is wider", to: edit("oauth.userScopes", arr("reactions:write", "runs:read")),
		want: `{"addedUserScopes":["runs:read"],"wider":true}`},
	{name: "added tool is wider", from: edit("tools", arr(get(docOfT(), "tools.0"), get(docOfT(), "tools.1"))),
		want: `{"addedTools":[{"name":"deploy_stats","access":"read","dataClass":"aggregate","audience":"any"}],"wider":true}`},
	{name: "tool access read to write is wider", to: edit("tools.0.access", "write"),
		want: `{"changedTools":[{"name":"list_deploys","from":{"access":"read","dataClass":"standard","audience":"any"},"to":{"access":"write","dataClass":"standard","audience":"any"},"wider":true}],"wider":true}`},
	{name: "tool data class standard to personal is wider", to: edit("tools.0.dataClass", "personal"),
		want: `{"changedTools":[{"name":"list_deploys","from":{"access":"read","dataClass":"standard","audience":"any"},"to":{"access":"read","dataClass":"personal","audience":"any"},"wider":true}],"wider":true}`},
	{name: "tool data class aggregate to standard is wider", to: edit("tools.2.dataClass", "standard"),
		want: `{"changedTools":[{"name":"deploy_stats","from":{"access":"read","dataClass":"aggregate","audience":"any"},"to":{"access":"read","dataClass":"standard","audience":"any"},"wider":true}],"wider":true}`},
	{name: "tool data class personal to sensitive is wider", from: edit("tools.0.dataClass", "personal"), to: edit("tools.0.dataClass", "sensitive"),
		want: `{"changedTools":[{"name":"list_deploys","from":{"access":"read","dataClass":"personal","audience":"any"},"to":{"access":"read","dataClass":"sensitive","audience":"any"},"wider":true}],"wider":true}`},
	{name: "tool audience private to any is wider", to: edit("tools.1.audience", "any"),
		want: `{"changedTools":[{"name":"start_deploy","from":{"access":"write","dataClass":"standard","audience":"private"},"to":{"access":"write","dataClass":"standard","audience":"any"},"wider":true}],"wider":true}`},
	{name: "tool that widens one way and narrows another is wider", to: all(edit("tools.1.access", "read"), edit("tools.1.dataClass", "personal")),
		want: `{"changedTools":[{"name":"start_deploy","from":{"access":"write","dataClass":"standard","audience":"private"},"to":{"access":"read","dataClass":"personal","audience":"private"},"wider":true}],"wider":true}`},
	{name: "added event is wider", to: edit("events", arr("message.posted", "bot.mentioned", "channel.member_joined", "installation.uninstalled", "message.edited")),
		want: `{"addedEvents":["message.edited"],"wider":true}`},
	{name: "added command is wider", to: edit("commands.1.name", "/undo"),
		want: `{"addedCommands":["/undo"],"removedCommands":["/rollback"],"wider":true}`},
	{name: "external auth added is wider", from: edit("externalAuth", deleted),
		want: `{"externalAuth":"added","wider":true}`},
	{name: "external auth with a new optional scope is wider", to: edit("externalAuth.optionalScopes", arr("repo", "gist")),
		want: `{"externalAuth":"widened","wider":true}`},
	{name: "external auth with a new required scope is wider", to: edit("externalAuth.requiredScopes", arr("repo:status", "read:org", "gist")),
		want: `{"externalAuth":"widened","wider":true}`},
	{name: "external auth making an optional scope required is wider", to: all(edit("externalAuth.requiredScopes", arr("repo:status", "read:org", "repo")), edit("externalAuth.optionalScopes", deleted)),
		want: `{"externalAuth":"widened","wider":true}`},
	{name: "external auth at another provider is wider", to: edit("externalAuth.tokenUrl", "https://github.example.com/token"),
		want: `{"externalAuth":"widened","wider":true}`},
	{name: "external auth trading one scope for another is wider", to: edit("externalAuth.optionalScopes", arr("gist")),
		want: `{"externalAuth":"widened","wider":true}`},
	{name: "model data policy none to answer is wider", from: edit("modelDataPolicy", "none"),
		want: `{"modelDataPolicy":{"from":"none","to":"answer"},"wider":true}`},

	// Narrowing and neutral changes are not wider.
	{name: "removed bot scope is not wider", to: edit("bot.scopes", arr("messages:write", "messages:read", "conversations:read", "incoming-webhook")),
		want: `{"removedBotScopes":["users:read"]}`},
	{name: "removed user scopes are not wider", to: edit("oauth.userScopes", deleted),
		want: `{"removedUserScopes":["reactions:write"]}`},
	{name: "removed oauth is not wider", to: edit("oauth", deleted),
		want: `{"removedUserScopes":["reactions:write"]}`},
	{name: "removed tool is not wider", to: edit("tools", arr(get(docOfT(), "tools.0"), get(docOfT(), "tools.2"))),
		want: `{"removedTools":["start_deploy"]}`},
	{name: "tool access write to read is not wider", to: edit("tools.1.access", "read"),
		want: `{"changedTools":[{"name":"start_deploy","from":{"access":"write","dataClass":"standard","audience":"private"},"to":{"access":"read","dataClass":"standard","audience":"private"}}]}`},
	{name: "tool data class sensitive to aggregate is not wider", from: edit("tools.0.dataClass", "sensitive"), to: edit("tools.0.dataClass", "aggregate"),
		want: `{"changedTools":[{"name":"list_deploys","from":{"access":"read","dataClass":"sensitive","audience":"any"},"to":{"access":"read","dataClass":"aggregate","audience":"any"}}]}`},
	{name: "tool audience any to private is not wider", to: edit("tools.0.audience", "private"),
		want: `{"changedTools":[{"name":"list_deploys","from":{"access":"read","dataClass":"standard","audience":"any"},"to":{"access":"read","dataClass":"standard","audience":"private"}}]}`},
	{name: "tool texts and order are not a change", to: all(edit("tools.0.displayName.en", "Deploys"), edit("tools", arr(get(docOfT(), "tools.2"), get(docOfT(), "tools.1"), get(docOfT(), "tools.0")))),
		want: `{}`},
	{name: "removed event is not wider", to: edit("events", arr("message.posted")),
		want: `{"removedEvents":["bot.mentioned","channel.member_joined","installation.uninstalled"]}`},
	{name: "removed command is not wider", to: edit("commands", arr(get(docOfT(), "commands.0"))),
		want: `{"removedCommands":["/rollback"]}`},
	{name: "external auth removed is not wider", to: edit("externalAuth", deleted),
		want: `{"externalAuth":"removed"}`},
	{name: "external auth dropping a scope is not wider", to: edit("externalAuth.optionalScopes", deleted),
		want: `{"externalAuth":"narrowed"}`},
	{name: "external auth making a required scope optional is not wider", to: all(edit("externalAuth.requiredScopes", arr("repo:status")), edit("externalAuth.optionalScopes", arr("repo", "read:org"))),
		want: `{"externalAuth":"narrowed"}`},
	{name: "external auth display name and scope order are not a change", to: all(edit("externalAuth.displayName.en", "GitHub.com"), edit("externalAuth.requiredScopes", arr("read:org", "repo:status"))),
		want: `{}`},
	{name: "model data policy answer to none is not wider", to: edit("modelDataPolicy", "none"),
		want: `{"modelDataPolicy":{"from":"answer","to":"none"}}`},
	{name: "scope order, endpoints, icon and distribution are not a change", to: all(
		edit("bot.scopes", arr("incoming-webhook", "messages:write", "messages:read", "conversations:read", "users:read")),
		edit("endpoints.tools", "https://other.desk.example.com/t"), edit("iconUrl", "https://a.example/i.png"), edit("distribution", "unlisted")),
		want: `{}`},
	{name: "everything narrowed at once is not wider", to: all(edit("bot", deleted), edit("incomingWebhooks", deleted), edit("oauth", deleted), edit("tools", deleted), edit("events", deleted),
		edit("commands", deleted), edit("externalAuth", deleted), edit("modelDataPolicy", deleted), edit("endpoints", deleted)),
		want: `{"externalAuth":"removed","modelDataPolicy":{"from":"answer","to":"none"},"removedBotScopes":["conversations:read","incoming-webhook","messages:read","messages:write","users:read"],` +
			`"removedCommands":["/deploy","/rollback"],"removedEvents":["bot.mentioned","channel.member_joined","installation.uninstalled","message.posted"],` +
			`"removedTools":["deploy_stats","list_deploys","start_deploy"],"removedUserScopes":["reactions:write"]}`},
}

// compact drops the empty parts of a diff and writes it with sorted keys.
func compact(t *testing.T, d ConsentDiff) string {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if l, ok := v.([]any); ok && len(l) == 0 || v == nil || v == false || v == "unchanged" {
			delete(m, k)
		}
	}
	for _, c := range asSlice(m["changedTools"]) {
		if c.(map[string]any)["wider"] == false {
			delete(c.(map[string]any), "wider")
		}
	}
	b, _ = json.Marshal(m)
	return string(b)
}

func TestDiff(t *testing.T) {
	for _, row := range diffRows {
		t.Run(row.name, func(t *testing.T) {
			from, to := docOf(t, every), docOf(t, every)
			if row.from != nil {
				row.from(from)
			}
			if row.to != nil {
				row.to(to)
			}
			d := Diff(mustParse(t, encode(t, from)), mustParse(t, encode(t, to)))
			want := row.want
			if got := compact(t, d); got != canonicalJSON(t, want) {
				t.Fatalf("diff = %s\nwant   %s", got, canonicalJSON(t, want))
			}
			if wider := strings.Contains(row.name, " is wider"); d.Wider != wider && strings.Contains(row.name, "wider") {
				t.Fatalf("wider = %v, but the row name says otherwise", d.Wider)
			}
		})
	}
}

func canonicalJSON(t *testing.T, s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDiffShape(t *testing.T) {
	m := mustParse(t, readFile(t, every))
	// Against nothing published, everything is added.
	d := Diff(nil, m)
	if !d.Wider || len(d.AddedTools) != 3 || len(d.AddedBotScopes) != 5 || d.ExternalAuth != AuthAdded || d.ModelDataPolicy == nil || len(d.AddedCommands) != 2 {
		t.Fatalf("Diff(nil, m) = %+v", d)
	}
	// Lists are never null, and modelDataPolicy is null when unchanged.
	b, _ := json.Marshal(Diff(m, m))
	want := `{"addedBotScopes":[],"removedBotScopes":[],"addedUserScopes":[],"removedUserScopes":[],"addedTools":[],"removedTools":[],"changedTools":[],` +
		`"addedEvents":[],"removedEvents":[],"addedCommands":[],"removedCommands":[],"externalAuth":"unchanged","modelDataPolicy":null,"wider":false}`
	if string(b) != want {
		t.Fatalf("Diff(m, m) =\n%s\nwant\n%s", b, want)
	}
	if d := Diff(m, nil); d.Wider || len(d.RemovedTools) != 3 {
		t.Fatalf("Diff(m, nil) = %+v", d)
	}
}

func BenchmarkValidate(b *testing.B) {
	text := readFile(b, "big.json")
	prevDoc := docOf(b, "big.json")
	set(prevDoc, "version", "2.9.0")
	set(prevDoc, "tools", get(prevDoc, "tools").([]any)[:45])
	set(prevDoc, "tools.0.access", "read")
	prev, problems := Parse(encode(b, prevDoc))
	if problems != nil {
		b.Fatal(problems)
	}
	b.SetBytes(int64(len(text)))
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, p := Parse(text); p != nil {
				b.Fatal(p)
			}
		}
	})
	m, _ := Parse(text)
	b.Run("ConsentSummary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.ConsentSummary(SummaryOptions{Available: true})
		}
	})
	b.Run("Diff", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !Diff(prev, m).Wider {
				b.Fatal("not wider")
			}
		}
	})
	b.Run("ParseSummaryDiffWarningsHosts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, p := Parse(text)
			if p != nil {
				b.Fatal(p)
			}
			m.ConsentSummary(SummaryOptions{Available: true})
			Diff(prev, m)
			m.Warnings()
			m.EndpointHosts()
			m.Hash()
		}
	})
}

func TestBenchmarkManifestSize(t *testing.T) {
	text := readFile(t, "big.json")
	m := mustParse(t, text)
	if len(text) < 55000 || len(text) > MaxTextLen || len(m.Tools) != MaxTools {
		t.Fatalf("big.json: %d bytes, %d tools", len(text), len(m.Tools))
	}
}
