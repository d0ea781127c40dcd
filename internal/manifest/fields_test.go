package manifest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// everything.json uses every key Parse accepts; these rows edit it.
const every = "everything.json"

// get returns the value at a dotted path of d (see set).
func get(d doc, path string) any {
	var cur any = d
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			n, _ := strconv.Atoi(p)
			cur = c[n]
		}
	}
	return cur
}

// deepCopy copies a generic JSON value.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// nTools replaces tools with n copies of tools[0], named t0, t1, ...
func nTools(n int) func(doc) {
	return func(d doc) {
		first := get(d, "tools.0")
		s := arr()
		for i := range n {
			t := deepCopy(first).(map[string]any)
			t["name"] = "t" + strconv.Itoa(i)
			s = append(s, t)
		}
		set(d, "tools", s)
	}
}

// nCommands replaces commands with n commands /c0, /c1, ...
func nCommands(n int) func(doc) {
	return func(d doc) {
		s := arr()
		for i := range n {
			s = append(s, map[string]any{"name": "/c" + strconv.Itoa(i), "description": map[string]any{"en": "C"}})
		}
		set(d, "commands", s)
	}
}

func strArr(s []string) []any {
	out := arr()
	for _, v := range s {
		out = append(out, v)
	}
	return out
}

func all(edits ...func(doc)) func(doc) {
	return func(d doc) {
		for _, e := range edits {
			e(d)
		}
	}
}

// newFieldRows are the rules of the fields designed with the developer API.
func newFieldRows() []ruleRow {
	rows := []ruleRow{
		{name: "manifest with every field is accepted", edit: func(doc) {}},

		// tools.
		{name: "empty tools without a tools endpoint is accepted", edit: all(edit("tools", arr()), edit("endpoints.tools", deleted))},
		{name: "50 tools are accepted", edit: nTools(50)},
		{name: "51 tools are rejected", edit: nTools(51), want: []string{"tools"}},
		{name: "tools as an object is rejected", edit: edit("tools", map[string]any{}), want: []string{"tools"}},
		{name: "tool as a string is rejected", edit: edit("tools.0", secret), want: []string{"tools[0]"}},
		{name: "tool name of 64 characters is accepted", edit: edit("tools.0.name", "a"+strings.Repeat("_", 63))},
		{name: "tool name of 65 characters is rejected", edit: edit("tools.0.name", "a"+strings.Repeat("q", 64)), want: []string{"tools[0].name"}},
		{name: "tool name with uppercase letters is rejected", edit: edit("tools.0.name", "qqSecretqq"), want: []string{"tools[0].name"}},
		{name: "tool name with a hyphen is rejected", edit: edit("tools.0.name", "qq-secretqq"), want: []string{"tools[0].name"}},
		{name: "tool name starting with a digit is rejected", edit: edit("tools.0.name", "1qqsecretqq"), want: []string{"tools[0].name"}},
		{name: "empty tool name is rejected", edit: edit("tools.0.name", ""), want: []string{"tools[0].name"}},
		{name: "tool name used twice is rejected", edit: edit("tools.2.name", "list_deploys"), want: []string{"tools[2].name"}, schemaLooser: true},
		{name: "tool without a name is rejected", edit: edit("tools.0.name", deleted), want: []string{"tools[0].name"}},
		{name: "tool without access is rejected", edit: edit("tools.0.access", deleted), want: []string{"tools[0].access"}},
		{name: "tool without dataClass is rejected", edit: edit("tools.1.dataClass", deleted), want: []string{"tools[1].dataClass"}},
		{name: "tool without audience is rejected", edit: edit("tools.2.audience", deleted), want: []string{"tools[2].audience"}},
		{name: "tool without displayName is rejected", edit: edit("tools.0.displayName", deleted), want: []string{"tools[0].displayName"}},
		{name: "tool without description is rejected", edit: edit("tools.0.description", deleted), want: []string{"tools[0].description"}},
		{name: "tool access admin is rejected", edit: edit("tools.0.access", secret), want: []string{"tools[0].access"}},
		{name: "tool access in uppercase is rejected", edit: edit("tools.0.access", "READ"), want: []string{"tools[0].access"}},
		{name: "tool dataClass secret is rejected", edit: edit("tools.0.dataClass", secret), want: []string{"tools[0].dataClass"}},
		{name: "tool audience public is rejected", edit: edit("tools.0.audience", "public"), want: []string{"tools[0].audience"}},
		{name: "tool audience as a boolean is rejected", edit: edit("tools.0.audience", true), want: []string{"tools[0].audience"}},
		{name: "tool displayName as a plain string is rejected", edit: edit("tools.0.displayName", "List"), want: []string{"tools[0].displayName"}},
		{name: "tool displayName of 80 characters is accepted", edit: edit("tools.0.displayName.en", strings.Repeat("d", 80))},
		{name: "tool displayName of 81 characters is rejected", edit: edit("tools.0.displayName.en", strings.Repeat("q", 81)), want: []string{"tools[0].displayName.en"}},
		{name: "tool displayName with a line break is rejected", edit: edit("tools.0.displayName.en", "qq\nsecretqq"), want: []string{"tools[0].displayName.en"}},
		{name: "tool description of 1000 characters with line breaks is accepted", edit: edit("tools.0.description.en", strings.Repeat("abc\n", 250))},
		{name: "tool description of 1001 characters is rejected", edit: edit("tools.0.description.en", strings.Repeat("q", 1001)), want: []string{"tools[0].description.en"}},
		{name: "blank tool description is rejected", edit: edit("tools.0.description.en", " \n "), want: []string{"tools[0].description.en"}},
		{name: "unknown tool key is rejected", edit: edit("tools.0.colour", secret), want: []string{"tools[0]"}},
		{name: "tools without a tools endpoint are rejected", edit: edit("endpoints.tools", deleted), want: []string{"tools"}},
		{name: "tools with a wrong tools endpoint give one problem", edit: edit("endpoints.tools", "http://qqsecretqq.example/t"), want: []string{"endpoints.tools"}},
		{name: "tools without any endpoints are rejected", edit: all(edit("endpoints", deleted), edit("events", deleted), edit("commands", deleted)), want: []string{"tools"}},

		// events.
		{name: "empty events without an events endpoint are accepted", edit: all(edit("events", arr()), edit("endpoints.events", deleted))},
		{name: "unknown event kind is rejected", edit: edit("events.0", secret), want: []string{"events[0]"}},
		{name: "event kind in uppercase is rejected", edit: edit("events.0", "Message.Posted"), want: []string{"events[0]"}},
		{name: "event kind as a number is rejected", edit: edit("events.0", 3), want: []string{"events[0]"}},
		{name: "event kind listed twice is rejected", edit: edit("events.1", "message.posted"), want: []string{"events[1]"}},
		{name: "events as a string is rejected", edit: edit("events", "message.posted"), want: []string{"events"}},
		{name: "events without an events endpoint are rejected", edit: edit("endpoints.events", deleted), want: []string{"events"}},
		{name: "every event kind is accepted with the scopes it needs", edit: all(
			edit("bot.scopes", arr("incoming-webhook", "messages:read", "conversations:read", "files:read", "users:read")),
			edit("events", strArr(EventKinds())))},
		{name: "message event without bot scope messages:read is rejected", edit: edit("bot.scopes", arr("incoming-webhook", "conversations:read")), want: []string{"events[0]"}},
		{name: "channel event without bot scope conversations:read is rejected", edit: edit("bot.scopes", arr("incoming-webhook", "messages:read")), want: []string{"events[2]"}},
		{name: "file event without bot scope files:read is rejected", edit: edit("events", arr("file.shared")), want: []string{"events[0]"}},
		{name: "user event without bot scope users:read is rejected", edit: all(edit("bot.scopes", arr("incoming-webhook")), edit("events", arr("user.joined"))), want: []string{"events[0]"}},
		{name: "bot event without a bot is rejected", edit: all(edit("bot", deleted), edit("incomingWebhooks", deleted), edit("events", arr("bot.mentioned"))), want: []string{"events[0]"}},
		{name: "message event without a bot is rejected", edit: all(edit("bot", deleted), edit("incomingWebhooks", deleted), edit("events", arr("installation.updated", "message.posted"))), want: []string{"events[1]"}},
		{name: "installation events without a bot are accepted", edit: all(edit("bot", deleted), edit("incomingWebhooks", deleted), edit("events", arr("installation.updated", "installation.uninstalled")))},
		{name: "events with wrong bot scopes give no event problems", edit: edit("bot.scopes", "messages:read"), want: []string{"bot.scopes"}},

		// commands.
		{name: "empty commands without a commands endpoint are accepted", edit: all(edit("commands", arr()), edit("endpoints.commands", deleted))},
		{name: "25 commands are accepted", edit: nCommands(25)},
		{name: "26 commands are rejected", edit: nCommands(26), want: []string{"commands"}},
		{name: "command name without a slash is rejected", edit: edit("commands.0.name", "qqsecretqq"), want: []string{"commands[0].name"}},
		{name: "command name with uppercase letters is rejected", edit: edit("commands.0.name", "/qqSecretqq"), want: []string{"commands[0].name"}},
		{name: "command name of a slash alone is rejected", edit: edit("commands.0.name", "/"), want: []string{"commands[0].name"}},
		{name: "command name of 32 characters after the slash is accepted", edit: edit("commands.0.name", "/d"+strings.Repeat("-", 31))},
		{name: "command name of 33 characters after the slash is rejected", edit: edit("commands.0.name", "/q"+strings.Repeat("q", 32)), want: []string{"commands[0].name"}},
		{name: "command name used twice is rejected", edit: edit("commands.1.name", "/deploy"), want: []string{"commands[1].name"}, schemaLooser: true},
		{name: "command without a description is rejected", edit: edit("commands.0.description", deleted), want: []string{"commands[0].description"}},
		{name: "command description of 201 characters is rejected", edit: edit("commands.0.description.en", strings.Repeat("q", 201)), want: []string{"commands[0].description.en"}},
		{name: "command without usage is accepted", edit: edit("commands.0.usage", deleted)},
		{name: "command usage of 101 characters is rejected", edit: edit("commands.0.usage.en", strings.Repeat("q", 101)), want: []string{"commands[0].usage.en"}},
		{name: "unknown command key is rejected", edit: edit("commands.0.url", "https://a.example/c"), want: []string{"commands[0]"}},
		{name: "commands without a commands endpoint are rejected", edit: edit("endpoints.commands", deleted), want: []string{"commands"}},

		// externalAuth.
		{name: "external auth without scopes is accepted", edit: all(edit("externalAuth.requiredScopes", deleted), edit("externalAuth.optionalScopes", deleted))},
		{name: "external auth without a token URL is rejected", edit: edit("externalAuth.tokenUrl", deleted), want: []string{"externalAuth.tokenUrl"}},
		{name: "external auth without an authorize URL is rejected", edit: edit("externalAuth.authorizeUrl", deleted), want: []string{"externalAuth.authorizeUrl"}},
		{name: "external auth without a display name is rejected", edit: edit("externalAuth.displayName", deleted), want: []string{"externalAuth.displayName"}},
		{name: "external auth display name as a plain string is rejected", edit: edit("externalAuth.displayName", "GitHub"), want: []string{"externalAuth.displayName"}},
		{name: "http external auth authorize URL is rejected", edit: edit("externalAuth.authorizeUrl", "http://qqsecretqq.example/a"), want: []string{"externalAuth.authorizeUrl"}},
		{name: "external auth token URL with a fragment is rejected", edit: edit("externalAuth.tokenUrl", "https://a.example/t#qqsecretqq"), want: []string{"externalAuth.tokenUrl"}},
		{name: "10 required external scopes are accepted", edit: edit("externalAuth.requiredScopes", arr("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"))},
		{name: "11 required external scopes are rejected", edit: edit("externalAuth.requiredScopes", arr("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")), want: []string{"externalAuth.requiredScopes"}},
		{name: "11 optional external scopes are rejected", edit: edit("externalAuth.optionalScopes", arr("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")), want: []string{"externalAuth.optionalScopes"}},
		{name: "external scope with a space is rejected", edit: edit("externalAuth.requiredScopes.0", "qq secretqq"), want: []string{"externalAuth.requiredScopes[0]"}},
		{name: "empty external scope is rejected", edit: edit("externalAuth.requiredScopes.0", ""), want: []string{"externalAuth.requiredScopes[0]"}},
		{name: "external scope that is a URL is accepted", edit: edit("externalAuth.requiredScopes.0", "https://www.googleapis.com/auth/drive.readonly")},
		{name: "external scope of 201 characters is rejected", edit: edit("externalAuth.optionalScopes.0", strings.Repeat("q", 201)), want: []string{"externalAuth.optionalScopes[0]"}},
		{name: "external scope listed twice is rejected", edit: edit("externalAuth.requiredScopes.1", "repo:status"), want: []string{"externalAuth.requiredScopes[1]"}},
		{name: "optional external scope that is also required is rejected", edit: edit("externalAuth.optionalScopes.0", "read:org"), want: []string{"externalAuth.optionalScopes[0]"}, schemaLooser: true},
		{name: "external scopes as a string are rejected", edit: edit("externalAuth.requiredScopes", "repo"), want: []string{"externalAuth.requiredScopes"}},
		{name: "unknown external auth key is rejected", edit: edit("externalAuth.clientSecret", secret), want: []string{"externalAuth"}},

		// modelDataPolicy.
		{name: "model data policy none is accepted", edit: edit("modelDataPolicy", "none")},
		{name: "model data policy train is rejected", edit: edit("modelDataPolicy", "train"), want: []string{"modelDataPolicy"}},
		{name: "model data policy as a boolean is rejected", edit: edit("modelDataPolicy", false), want: []string{"modelDataPolicy"}},

		// categories, iconUrl, sample.
		{name: "5 categories are accepted", edit: edit("categories", arr("analytics", "design", "finance", "hr", "sales"))},
		{name: "6 categories are rejected", edit: edit("categories", arr("analytics", "design", "finance", "hr", "sales", "other")), want: []string{"categories"}},
		{name: "empty categories are accepted", edit: all(edit("categories", arr()), edit("distribution", "unlisted"))},
		{name: "unknown category is rejected", edit: edit("categories.1", secret), want: []string{"categories[1]"}},
		{name: "category listed twice is rejected", edit: edit("categories.1", "developer-tools"), want: []string{"categories[1]"}},
		{name: "categories as a string are rejected", edit: edit("categories", "finance"), want: []string{"categories"}},
		{name: "http icon URL is rejected", edit: edit("iconUrl", "http://qqsecretqq.example/i.png"), want: []string{"iconUrl"}},
		{name: "icon URL with a fragment is rejected", edit: edit("iconUrl", "https://a.example/i.png#qqsecretqq"), want: []string{"iconUrl"}},
		{name: "icon URL of 2001 characters is rejected", edit: edit("iconUrl", "https://a.example/"+strings.Repeat("q", 2001-18)), want: []string{"iconUrl"}},
		{name: "icon URL of 2000 characters is accepted", edit: edit("iconUrl", "https://a.example/"+strings.Repeat("i", 2000-18))},
		{name: "sample true is accepted", edit: edit("sample", true)},
		{name: "sample as a string is rejected", edit: edit("sample", "true"), want: []string{"sample"}},
		{name: "sample null is rejected", edit: edit("sample", nil), want: []string{"sample"}},

		// endpoints.
		{name: "empty endpoints without declarations are accepted", edit: all(edit("endpoints", map[string]any{}), edit("tools", deleted), edit("events", deleted), edit("commands", deleted))},
		{name: "endpoints as a string is rejected", edit: edit("endpoints", "https://a.example"), want: []string{"endpoints"}},
		{name: "unknown endpoints key is rejected", edit: edit("endpoints.interactivity", "https://a.example/i"), want: []string{"endpoints"}},
		{name: "http events endpoint is rejected", edit: edit("endpoints.events", "http://qqsecretqq.example/e"), want: []string{"endpoints.events"}},
		{name: "commands endpoint with a fragment is rejected", edit: edit("endpoints.commands", "https://a.example/c#qqsecretqq"), want: []string{"endpoints.commands"}},
		{name: "tools endpoint with user information is rejected", edit: edit("endpoints.tools", "https://qq:secretqq@a.example/t"), want: []string{"endpoints.tools"}},
		{name: "endpoint with an IP address is accepted", edit: edit("endpoints.events", "https://192.0.2.7:8443/e")},
		{name: "endpoint with port 0 is rejected", edit: edit("endpoints.events", "https://a.example:0/e"), want: []string{"endpoints.events"}, schemaLooser: true},
		{name: "endpoint with a host label of 64 characters is rejected", edit: edit("endpoints.events", "https://"+strings.Repeat("q", 64)+".example/e"), want: []string{"endpoints.events"}},
		{name: "endpoint with a host label starting with a hyphen is rejected", edit: edit("endpoints.events", "https://-qq.example/e"), want: []string{"endpoints.events"}},
		{name: "endpoint with a bad percent escape is rejected", edit: edit("endpoints.events", "https://a.example/%zz"), want: []string{"endpoints.events"}, schemaLooser: true},

		// Problems of several new fields come in document order.
		{name: "problems of new fields are in document order", edit: all(edit("categories.0", secret), edit("events.0", secret), edit("tools.1.access", secret), edit("sample", 1)),
			want: []string{"categories[0]", "events[0]", "sample", "tools[1].access"}},
	}
	for i := range rows {
		rows[i].base = every
	}
	return rows
}

// TestManyNewFieldProblems pins problems and messages of the new fields.
func TestManyNewFieldProblems(t *testing.T) {
	_, problems := Parse(readFile(t, "many_problems_fields.json"))
	var b strings.Builder
	for _, p := range problems {
		b.WriteString(p.Path + "\t" + p.Message + "\n")
	}
	if want := readFile(t, "many_problems_fields.golden"); b.String() != want {
		t.Fatalf("problems:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestParseEverything(t *testing.T) {
	m := mustParse(t, readFile(t, every))
	if len(m.Tools) != 3 || m.Tools[1].Name != "start_deploy" || m.Tools[1].Access != "write" || m.Tools[1].Audience != "private" || m.Tools[1].DisplayName["de"] != "Deployment starten" {
		t.Errorf("Tools = %+v", m.Tools)
	}
	if !slices.Equal(m.Events, []string{"message.posted", "bot.mentioned", "channel.member_joined", "installation.uninstalled"}) {
		t.Errorf("Events = %q", m.Events)
	}
	if len(m.Commands) != 2 || m.Commands[0].Name != "/deploy" || m.Commands[0].Usage["en"] != "/deploy SERVICE [ENV]" || m.Commands[1].Usage != nil {
		t.Errorf("Commands = %+v", m.Commands)
	}
	a := m.ExternalAuth
	if a == nil || a.AuthorizeURL != "https://github.com/login/oauth/authorize" || !slices.Equal(a.RequiredScopes, []string{"repo:status", "read:org"}) || !slices.Equal(a.OptionalScopes, []string{"repo"}) {
		t.Errorf("ExternalAuth = %+v", a)
	}
	if m.ModelDataPolicy != "answer" || m.Sample || m.IconURL != "https://cdn.desk.example.com/icon-512.png" || !slices.Equal(m.Categories, []string{"developer-tools", "productivity"}) {
		t.Errorf("policy %q, sample %v, icon %q, categories %q", m.ModelDataPolicy, m.Sample, m.IconURL, m.Categories)
	}
	if m.Endpoints != (Endpoints{Events: "https://api.desk.example.com/events", Commands: "https://api.desk.example.com/commands", Tools: "https://api.desk.example.com/tools"}) {
		t.Errorf("Endpoints = %+v", m.Endpoints)
	}
	if w := m.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %+v", w)
	}
	// The external auth provider's hosts are not endpoint hosts.
	if got, want := m.EndpointHosts(), []string{"api.desk.example.com", "desk.example.com"}; !slices.Equal(got, want) {
		t.Errorf("EndpointHosts = %q, want %q", got, want)
	}
	// Minimal manifests get the defaults.
	min := mustParse(t, readFile(t, "minimal.json"))
	if min.ModelDataPolicy != "" || min.ExternalAuth != nil || min.Tools != nil || min.Endpoints != (Endpoints{}) {
		t.Errorf("minimal manifest has new fields: %+v", min)
	}
}

func TestEndpointHostsCoverEveryEndpointURL(t *testing.T) {
	d := docOf(t, every)
	set(d, "oauth.redirectUrls", arr("https://R.example.com/cb"))
	set(d, "interactivity.url", "https://i.example.com/i")
	set(d, "endpoints.events", "https://e.example.com:8443/e")
	set(d, "endpoints.commands", "https://[2001:db8::1]/c")
	set(d, "endpoints.tools", "https://t.example.com/t")
	set(d, "iconUrl", "https://icon.example.com/i.png")
	m := mustParse(t, encode(t, d))
	want := []string{"2001:db8::1", "e.example.com", "i.example.com", "r.example.com", "t.example.com"}
	if got := m.EndpointHosts(); !slices.Equal(got, want) {
		t.Fatalf("EndpointHosts = %q, want %q", got, want)
	}
}

func TestWarnings(t *testing.T) {
	rows := []struct {
		name string
		edit func(doc)
		want []string
	}{
		{"no warnings for a careful manifest", func(doc) {}, nil},
		{"write tool on sensitive data", all(edit("tools.1.dataClass", "sensitive"), edit("modelDataPolicy", "none")), []string{"tools[1]"}},
		{"personal data shown to a whole conversation", edit("tools.0.dataClass", "personal"), []string{"tools[0].audience"}},
		{"sensitive data shown to a whole conversation", edit("tools.2.dataClass", "sensitive"), []string{"tools[2].audience", "modelDataPolicy"}},
		{"model answers with a sensitive tool", all(edit("tools.1.dataClass", "sensitive"), edit("tools.1.access", "read")), []string{"modelDataPolicy"}},
		{"sensitive tool without model answers", all(edit("tools.1.dataClass", "sensitive"), edit("tools.1.access", "read"), edit("modelDataPolicy", "none")), nil},
		{"endpoint host that is an IP address", edit("endpoints.events", "https://192.0.2.7/e"), []string{"endpoints.events"}},
		{"endpoint host localhost", edit("interactivity.url", "https://localhost:8443/i"), []string{"interactivity.url"}},
		{"endpoint host in a special-use domain", edit("oauth.redirectUrls.0", "https://dev.desk.test/cb"), []string{"oauth.redirectUrls[0]"}},
		{"endpoint forwarding to plain http", edit("endpoints.tools", "https://relay.example.com/fwd?to=http://10.0.0.1/t"), []string{"endpoints.tools"}},
		{"endpoint forwarding to an escaped plain http URL", edit("endpoints.tools", "https://relay.example.com/fwd?to=HTTP%3A%2F%2Fx"), []string{"endpoints.tools"}},
		{"link URLs are not endpoints", edit("developer.url", "https://192.0.2.7/"), nil},
		{"endpoint nothing is sent to", edit("commands", deleted), []string{"endpoints.commands"}},
		{"bot scope a bot cannot use", edit("bot.scopes.0", "files:write"), []string{"bot.scopes[0]"}},
		{"directory Kit without icon and categories", all(edit("iconUrl", deleted), edit("categories", deleted)), []string{"iconUrl", "categories"}},
		{"directory Kit without English texts", all(edit("displayName", map[string]any{"de": "D"}), edit("description", map[string]any{"de": "D"})), []string{"displayName", "description"}},
		{"directory sample Kit", edit("sample", true), []string{"sample"}},
		{"unlisted sample Kit without icon is fine", all(edit("sample", true), edit("iconUrl", deleted), edit("distribution", "unlisted")), nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			d := docOf(t, every)
			row.edit(d)
			m := mustParse(t, encode(t, d))
			var got []string
			for _, w := range m.Warnings() {
				got = append(got, w.Path)
				if w.Message == "" || len(w.Message) > 300 {
					t.Errorf("warning %+v", w)
				}
			}
			if !slices.Equal(got, row.want) {
				t.Fatalf("warning paths = %q, want %q\n%+v", got, row.want, m.Warnings())
			}
		})
	}
}

func TestReservedSlug(t *testing.T) {
	for _, s := range []string{"kit", "admin", "api", "app", "system", "www", "help", "support", "ops", "dev", "root", "security", "billing", "status", "official"} {
		if !ReservedSlug(s) {
			t.Errorf("ReservedSlug(%q) = false", s)
		}
		// Reserved slugs are valid slugs: the developer API refuses them,
		// Parse does not (stored versions are parsed again).
		if msg := slugProblem(s); msg != "" {
			t.Errorf("reserved slug %q is not a valid slug: %s", s, msg)
		}
	}
	for _, s := range []string{"", "kit-radar", "admins", "my-api", "Kit", "release-radar"} {
		if ReservedSlug(s) {
			t.Errorf("ReservedSlug(%q) = true", s)
		}
	}
	list := ReservedSlugs()
	if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
		t.Errorf("ReservedSlugs not sorted and unique: %q", list)
	}
	d := baseDoc(t)
	set(d, "slug", "admin")
	mustParse(t, encode(t, d))
}

func TestListsAreSortedAndUnique(t *testing.T) {
	for name, l := range map[string][]string{"EventKinds": EventKinds(), "Categories": Categories(), "KnownScopes": KnownScopes()} {
		if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
			t.Errorf("%s not sorted and unique: %q", name, l)
		}
	}
	for _, e := range eventKinds {
		if e.needs != "" && e.needs != "bot" && !KnownScope(e.needs) {
			t.Errorf("event %s needs unknown scope %s", e.name, e.needs)
		}
	}
	if got := slices.Sorted(maps.Keys(userOnlyScopes)); len(got) != 3 {
		t.Errorf("userOnlyScopes = %q", got)
	}
}
