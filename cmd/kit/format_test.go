package main

import (
	"bytes"
	"context"
	"github.com/kitd/kitd/kitclient/dev"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// lines checks that out holds every want line (each trimmed of trailing
// spaces, in this order, other lines between them allowed) and none of the
// lines or fragments in absent.
func checkOutput(t *testing.T, out string, want, absent []string) {
	t.Helper()
	got := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for i < len(got) && got[i] != w {
			i++
		}
		if i == len(got) {
			t.Fatalf("output lacks the line %q (or has it out of order):\n%s", w, out)
		}
		i++
	}
	for _, a := range absent {
		if strings.Contains(out, a) {
			t.Errorf("output must not contain %q:\n%s", a, out)
		}
	}
	for _, l := range got {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("line ends in spaces: %q", l)
		}
	}
}

func TestFormatValidation(t *testing.T) {
	t.Parallel()
	consent := &dev.ConsentSummary{Slug: "deploy-desk", Version: "1.1.0", BotScopes: []string{"messages:read"}, UserScopes: []string{"reactions:write"},
		Tools:                    []dev.ToolSummary{{Name: "lookup", ToolAccess: dev.ToolAccess{Access: "read", DataClass: "standard", Audience: "any"}}},
		ExternalAuth:             &dev.ExternalAuth{DisplayName: "GitHub", RequiredScopes: []string{"repo"}},
		RequestedModelDataPolicy: "answer"}
	fullDiff := &dev.ConsentDiff{
		AddedBotScopes: []string{"files:read"}, RemovedBotScopes: []string{"users:read"},
		AddedUserScopes: []string{"reactions:write"}, RemovedUserScopes: []string{"files:write"},
		AddedTools:   []dev.ToolGrant{{Name: "deploy", ToolAccess: dev.ToolAccess{Access: "write", DataClass: "personal", Audience: "private"}}},
		RemovedTools: []string{"gone"},
		ChangedTools: []dev.ToolChange{{Name: "lookup", From: dev.ToolAccess{Access: "read", DataClass: "standard", Audience: "any"}, To: dev.ToolAccess{Access: "write", DataClass: "standard", Audience: "any"}, Wider: true}},
		AddedEvents:  []string{"message.posted"}, RemovedEvents: []string{"bot.mentioned"},
		AddedCommands: []string{"/deploy"}, RemovedCommands: []string{"/old"},
		ExternalAuth: "widened", ModelDataPolicy: &dev.PolicyChange{From: "none", To: "answer"}, Wider: true,
	}
	tests := []struct {
		name         string
		v            dev.Validation
		want, absent []string
	}{
		{"a valid new Kit says valid and lists what installers consent to", dev.Validation{Valid: true, Consent: consent}, []string{
			"valid: deploy-desk 1.1.0 (a new Kit)",
			"Consent (nothing published yet; installers are asked for all of it):",
			"  KIND               NAME             DETAIL",
			"  bot scope          messages:read",
			"  user scope         reactions:write",
			"  tool               lookup           access=read dataClass=standard audience=any",
			"  external auth      GitHub           required=repo optional=none",
			"  model data policy                   answer",
		}, []string{"wider:", "Problems:"}},
		{"a new version of an existing Kit names the Kit", dev.Validation{Valid: true, Consent: consent, ExistingKitID: ptr("k-1"), Diff: &dev.ConsentDiff{ExternalAuth: "unchanged"}},
			[]string{"valid: deploy-desk 1.1.0 (a new version of Kit k-1)"}, nil},
		{"problems are a table of path and message, and the first line says how many", dev.Validation{Problems: []dev.Problem{{Path: "bot.colour", Message: "unknown key"}, {Path: "slug", Message: "is reserved"}}},
			[]string{"invalid: 2 problems", "", "Problems:", "  PATH        MESSAGE", "  bot.colour  unknown key", "  slug        is reserved"}, []string{"Consent"}},
		{"one problem is singular; an empty path names the manifest", dev.Validation{Problems: []dev.Problem{{Path: "", Message: "is not JSON"}}},
			[]string{"invalid: 1 problem", "  (manifest)  is not JSON"}, nil},
		{"an invalid manifest shows no consent even when the server sent one", dev.Validation{Problems: []dev.Problem{{Path: "slug", Message: "belongs to another Kit"}}, Consent: consent},
			[]string{"invalid: 1 problem"}, []string{"Consent", "messages:read"}},
		{"warnings are their own table", dev.Validation{Valid: true, Warnings: []dev.Problem{{Path: "endpoints.events", Message: "nothing is sent to it"}}},
			[]string{"valid", "Warnings:", "  PATH              MESSAGE", "  endpoints.events  nothing is sent to it"}, []string{"Problems:"}},
		{"hosts and unverified hosts are listed", dev.Validation{Valid: true, Hosts: []string{"a.example.com", "b.example.com"}, UnverifiedHosts: []string{"b.example.com"}},
			[]string{"Endpoint hosts: a.example.com, b.example.com", "Unverified hosts: b.example.com"}, nil},
		{"every verified host says none unverified", dev.Validation{Valid: true, Hosts: []string{"a.example.com"}, UnverifiedHosts: []string{}},
			[]string{"Unverified hosts: none"}, nil},
		{"an empty diff says there are no changes and wider: no", dev.Validation{Valid: true, Consent: consent, Diff: &dev.ConsentDiff{ExternalAuth: "unchanged"}},
			[]string{"Consent: no changes since the latest published version", "wider: no (installers are not asked to consent again)"}, []string{"CHANGE", "nothing published"}},
		{"the diff lists every kind of change and wider: yes", dev.Validation{Valid: true, Consent: consent, Diff: fullDiff}, []string{
			"Consent changes since the latest published version:",
			"  CHANGE   KIND               NAME             DETAIL",
			"  added    bot scope          files:read",
			"  removed  bot scope          users:read",
			"  added    user scope         reactions:write",
			"  removed  user scope         files:write",
			"  added    tool               deploy           access=write dataClass=personal audience=private",
			"  removed  tool               gone",
			"  changed  tool               lookup           access=read->write dataClass=standard audience=any (wider)",
			"  added    event              message.posted",
			"  removed  event              bot.mentioned",
			"  added    command            /deploy",
			"  removed  command            /old",
			"  widened  external auth",
			"  changed  model data policy                   none -> answer",
			"wider: yes (installers will be asked to consent again)",
		}, nil},
		{"a narrowed tool is not marked wider", dev.Validation{Valid: true, Diff: &dev.ConsentDiff{ChangedTools: []dev.ToolChange{{Name: "t", From: dev.ToolAccess{Access: "write", DataClass: "personal", Audience: "any"}, To: dev.ToolAccess{Access: "read", DataClass: "personal", Audience: "any"}}}}},
			[]string{"  changed  tool  t     access=write->read dataClass=personal audience=any", "wider: no (installers are not asked to consent again)"}, []string{"(wider)"}},
		{"control characters in server text do not break the table", dev.Validation{Problems: []dev.Problem{{Path: "a\tb", Message: "line\nbreak"}}},
			[]string{"  a b   line break"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatValidation(&b, &tt.v); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, tt.absent)
		})
	}
}

func TestFormatVersionResult(t *testing.T) {
	t.Parallel()
	draft := dev.Version{Version: "1.2.0", Distribution: "private", ConsentHash: "abc"}
	published := dev.Version{Version: "1.2.0", Distribution: "unlisted", Published: true, PublishedAt: ptr("2025-01-02T03:04:05Z")}
	tests := []struct {
		name, action string
		r            dev.VersionResult
		want, absent []string
	}{
		{"a new draft says how to publish it", "upload", dev.VersionResult{KitID: "k1", Created: true, Version: draft},
			[]string{"uploaded version 1.2.0", "kit           k1", "state         draft (publish it with: kit versions publish k1 1.2.0)", "consent hash  abc"}, []string{"installation"}},
		{"upload with --publish says published and when", "upload", dev.VersionResult{KitID: "k1", Created: true, Version: published},
			[]string{"uploaded and published version 1.2.0", "state         published 2025-01-02T03:04:05Z", "distribution  unlisted"}, nil},
		{"the same manifest again changes nothing", "upload", dev.VersionResult{KitID: "k1", Version: draft},
			[]string{"version 1.2.0 was already uploaded with this manifest: nothing changed"}, nil},
		{"publish says published", "publish", dev.VersionResult{KitID: "k1", Version: published, InstallationID: ptr("i1")},
			[]string{"published version 1.2.0", "installation  i1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatVersionResult(&b, tt.action, &tt.r); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, tt.absent)
		})
	}
}

func TestFormatKits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kits []dev.Kit
		want []string
	}{
		{"no Kits says how to make one", nil, []string{"no Kits yet: kit versions upload FILE creates one"}},
		{"one line per Kit; a missing version is a dash", []dev.Kit{
			{KitID: "k1", Slug: "one", DisplayName: "One", Distribution: "private", State: "active", LatestVersion: ptr("1.0.0"), LatestPublishedVersion: ptr("1.0.0"), InstalledHere: true},
			{KitID: "k2", Slug: "two", DisplayName: "Two", Distribution: "private", State: "active", LatestVersion: ptr("0.1.0")},
		}, []string{
			"ID  SLUG  NAME  DISTRIBUTION  STATE   LATEST  PUBLISHED  INSTALLED",
			"k1  one   One   private       active  1.0.0   1.0.0      yes",
			"k2  two   Two   private       active  0.1.0   -          no",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatKits(&b, tt.kits); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, nil)
		})
	}
}

func TestFormatKitDetail(t *testing.T) {
	t.Parallel()
	base := dev.KitDetail{
		Kit:             dev.Kit{KitID: "k1", Slug: "one", DisplayName: "One", Distribution: "private", State: "active", LatestVersion: ptr("1.1.0"), LatestPublishedVersion: ptr("1.0.0")},
		Versions:        []dev.Version{{Version: "1.0.0", Published: true, PublishedAt: ptr("P"), Distribution: "private", CreatedAt: "C", ConsentHash: strings.Repeat("ab", 32)}, {Version: "1.1.0", Distribution: "private", CreatedAt: "C2", ConsentHash: "short"}},
		EndpointHosts:   []string{"api.example.com"},
		UnverifiedHosts: []string{},
	}
	withSecrets := base
	withSecrets.Credentials.ClientSecret = &struct {
		CreatedAt string `json:"createdAt"`
	}{"T1"}
	withSecrets.Credentials.SigningSecret = &struct {
		Generation        int     `json:"generation"`
		CreatedAt         string  `json:"createdAt"`
		PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
	}{2, "T2", ptr("T3")}
	withDomains := base
	withDomains.Domains = []dev.Domain{{Domain: "example.com", Method: "dns", Verified: true, VerifiedAt: ptr("T4")}, {Domain: "other.example", Method: "well_known"}}
	tests := []struct {
		name         string
		d            dev.KitDetail
		want, absent []string
	}{
		{"the Kit, its versions oldest first with short consent hashes, hosts", base, []string{
			"One (one)", "id                k1", "latest version    1.1.0", "latest published  1.0.0", "installed here    no",
			"client secret     none", "signing secret    none", "install link      none",
			"endpoint hosts    api.example.com", "unverified hosts  none",
			"Versions:",
			"  VERSION  STATE        DISTRIBUTION  CREATED  CONSENT HASH",
			"  1.0.0    published P  private       C        abababababab",
			"  1.1.0    draft        private       C2       short",
			"Domains: none",
		}, []string{strings.Repeat("ab", 7)}},
		{"secrets show when they were made, never a value", withSecrets, []string{
			"client secret     created T1", "signing secret    generation 2, created T2, previous one works until T3",
		}, nil},
		{"domains show their method and verification", withDomains, []string{
			"Domains:", "  DOMAIN         METHOD      VERIFIED", "  example.com    dns         yes T4", "  other.example  well_known  no",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatKitDetail(&b, &tt.d); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, tt.absent)
		})
	}
}

func TestFormatLogLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    dev.LogEntry
		want string
	}{
		{"an audit entry: time, source, level, event, status", dev.LogEntry{At: "2025-01-02T03:04:05.5Z", Source: "audit", Level: "info", Event: "version.uploaded", Status: ptr("1.0.0")},
			"2025-01-02T03:04:05.500Z  audit      info   version.uploaded status=1.0.0"},
		{"a delivery shows its error, HTTP status, attempt, duration and installation", dev.LogEntry{At: "2025-01-02T03:04:05Z", Source: "delivery", Level: "error", Event: "webhook.post",
			ErrorCode: ptr("rate_limited"), HTTPStatus: ptr(429), Attempt: ptr(2), DurationMs: ptr(int64(12)), InstallationID: ptr("i1")},
			"2025-01-02T03:04:05.000Z  delivery   error  webhook.post error=rate_limited http=429 attempt=2 duration=12ms installation=i1"},
		{"a time with an offset is shown in UTC", dev.LogEntry{At: "2025-01-02T05:04:05+02:00", Source: "tool_call", Level: "info", Event: "e"},
			"2025-01-02T03:04:05.000Z  tool_call  info   e"},
		{"a time that does not parse is shown as is", dev.LogEntry{At: "yesterday", Source: "audit", Level: "info", Event: "e"},
			"yesterday  audit      info   e"},
		{"control characters become spaces", dev.LogEntry{At: "t", Source: "audit", Level: "info", Event: "a\x1b[2Jb", Status: ptr("x\ny")},
			"t  audit      info   a [2Jb status=x y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatLogLine(&b, &tt.e); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(b.String(), "\n"); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFormatLogPage(t *testing.T) {
	t.Parallel()
	e := func(at, event string) dev.LogEntry {
		return dev.LogEntry{At: at, Source: "audit", Level: "info", Event: event}
	}
	tests := []struct {
		name string
		p    dev.LogPage
		want []string
	}{
		{"an empty page says so", dev.LogPage{}, []string{"no log entries"}},
		{"entries print oldest first (the API sends newest first)", dev.LogPage{Entries: []dev.LogEntry{e("2025-01-01T00:00:02Z", "second"), e("2025-01-01T00:00:01Z", "first")}},
			[]string{"2025-01-01T00:00:01.000Z  audit      info   first", "2025-01-01T00:00:02.000Z  audit      info   second"}},
		{"a page with older entries says how to get them", dev.LogPage{Entries: []dev.LogEntry{e("t", "x")}, NextCursor: ptr("CUR")},
			[]string{"t  audit      info   x", "older entries: kit logs my-kit --cursor CUR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatLogPage(&b, "my-kit", LogQuery{}, &tt.p); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, nil)
		})
	}
}

func TestFormatDomain(t *testing.T) {
	t.Parallel()
	d := dev.Domain{Domain: "example.com", Method: "dns", Challenge: "CH"}
	d.Proof.DNS.Type, d.Proof.DNS.Host, d.Proof.DNS.Value = "TXT", "_kit-challenge.example.com", "kit-verification=CH"
	d.Proof.WellKnown.URL = "https://example.com/.well-known/kit-verification.json"
	d.Proof.WellKnown.Body.KitID, d.Proof.WellKnown.Body.Token = "k1", "CH"
	wk := d
	wk.Method = "well_known"
	verified := d
	verified.Verified, verified.VerifiedAt = true, ptr("T")
	tests := []struct {
		name         string
		d            dev.Domain
		added        bool
		want, absent []string
	}{
		{"an added dns domain prints the TXT record and the verify command", d, true, []string{
			"added example.com (method dns); it is not verified yet",
			"To prove it, publish this DNS record, then run: kit domains verify my-kit example.com",
			"  type   TXT", "  host   _kit-challenge.example.com", "  value  kit-verification=CH",
		}, []string{"well-known"}},
		{"a well_known domain prints the URL and the JSON body to serve", wk, false, []string{
			"example.com (method well_known) is not verified yet",
			"To prove it, serve this JSON at the URL (status 200, no redirect), then run: kit domains verify my-kit example.com",
			"  url   https://example.com/.well-known/kit-verification.json",
			`  body  {"kitId":"k1","token":"CH"}`,
		}, []string{"TXT"}},
		{"a verified domain prints no proof", verified, false, []string{"example.com is verified (T, method dns)"}, []string{"To prove it", "kit-verification=CH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatDomain(&b, "my-kit", &tt.d, tt.added); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, tt.absent)
		})
	}
}

func TestFormatDevInstall(t *testing.T) {
	t.Parallel()
	first := dev.DevInstall{KitID: "k1", Slug: "one", Version: "1.0.0", InstallationID: "i1", Endpoints: []string{"https://t.example/events", "https://t.example/tools"}}
	first.SigningSecret = &struct {
		SigningSecret     string  `json:"signingSecret"`
		Generation        int     `json:"generation"`
		PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
	}{SigningSecret: "kss_SECRET", Generation: 1}
	later := first
	later.SigningSecret = nil
	later.Endpoints = nil
	tests := []struct {
		name         string
		r            dev.DevInstall
		want, absent []string
	}{
		{"the first dev-install shows the endpoints and the signing secret once", first, []string{
			"installed one 1.0.0 in the sandbox", "kit             k1", "installation    i1",
			"endpoints       https://t.example/events", "                https://t.example/tools",
			"signing secret  kss_SECRET  (shown once: store it now)",
		}, nil},
		{"a later dev-install has no secret to show", later, []string{"endpoints     none"}, []string{"signing secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatDevInstall(&b, &tt.r); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, tt.absent)
		})
	}
}

func TestFormatMe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    dev.Me
		want []string
	}{
		{"a workspace token", dev.Me{WorkspaceID: "w1", UserID: "u1", Token: dev.DevToken{ID: "t1", Name: "laptop", ExpiresAt: "E"}},
			[]string{"workspace  w1", "member     u1", "token      laptop (t1), expires E"}},
		{"a sandbox token says so", dev.Me{WorkspaceID: "w1", Sandbox: true}, []string{"workspace  w1 (developer sandbox)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := formatMe(&b, &tt.m); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b.String(), tt.want, nil)
		})
	}
}

func TestAPIErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    APIError
		want string
	}{
		{"an error body: message, code and correlation id", APIError{Status: 404, Code: "not_found", Message: "kit not found", CorrelationID: "c-1"},
			"kit not found (not_found, correlation id c-1)"},
		{"a 429 adds the Retry-After seconds", APIError{Status: 429, Code: "rate_limited", Message: "slow down", CorrelationID: "c-2", RetryAfter: 7},
			"slow down (rate_limited, correlation id c-2); retry after 7 s"},
		{"an answer without an error body says what came", APIError{Status: 502},
			"server answered HTTP 502 Bad Gateway without an error body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.e.Error(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFormatNewInstallLink(t *testing.T) {
	t.Parallel()
	var r dev.InstallLinkResult
	created := "2026-11-22T04:00:00Z"
	r.InstallLink.Active, r.InstallLink.CreatedAt = true, &created
	r.InstallLink.URL = "https://app.example/app/kits/install?link=kil_SECRET\x1b[2J"
	var b bytes.Buffer
	if err := formatNewInstallLink(&b, &r); err != nil {
		t.Fatal(err)
	}
	checkOutput(t, b.String(), []string{
		"install link created 2026-11-22T04:00:00Z; any link made before no longer works",
		"url  https://app.example/app/kits/install?link=kil_SECRET [2J",
		"This URL is shown once: an admin of any workspace who opens it can install the Kit.",
	}, []string{"\x1b"})
}

func TestAKitIDIsTakenInEitherCase(t *testing.T) {
	const id = "0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5b"
	for _, arg := range []string{id, strings.ToUpper(id)} {
		got, err := resolveKit(context.Background(), nil, arg) // an id asks no one
		if err != nil || got != id {
			t.Fatalf("resolveKit(%q) = %q, %v; want %q", arg, got, err, id)
		}
	}
}
