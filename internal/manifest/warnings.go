package manifest

import (
	"net"
	"slices"
	"strings"
)

// Warnings returns advice about a valid manifest that is not a problem, in
// field order (bot, oauth, interactivity, endpoints, tools, model data
// policy, distribution):
//
//   - bot scopes a bot token cannot use in v1 (docs/api.md "Versioning"; they need a user
//     token);
//   - endpoint URLs whose host cannot be a verified domain (an IP address, a
//     single label such as localhost, or a special-use name such as
//     *.local or *.test) or that look like they forward to a plain http URL;
//   - an endpoint that nothing is sent to (endpoints.events without events,
//     and so on);
//   - a write tool on sensitive data, and a tool whose personal or
//     sensitive results may be shown to a whole conversation (audience any);
//   - model data policy answer together with a sensitive tool;
//   - what a directory Kit still lacks (DirectoryProblems).
//
// Paths index lists as written.
func (m *Manifest) Warnings() Problems {
	var w Problems
	for i, s := range m.BotScopes() {
		if userOnlyScopes[s] {
			w = append(w, Problem{Path: index("bot.scopes", i), Message: "bot tokens cannot use this scope in v1; it needs a user token (oauth.userScopes)"})
		}
	}
	for _, e := range m.endpointURLs() {
		if msg := hostWarning(e.url); msg != "" {
			w = append(w, Problem{Path: e.path, Message: msg})
		}
	}
	for _, e := range [...]struct {
		key  string
		url  string
		used bool
	}{
		{"events", m.Endpoints.Events, len(m.Events) > 0},
		{"commands", m.Endpoints.Commands, len(m.Commands) > 0},
		{"tools", m.Endpoints.Tools, len(m.Tools) > 0},
	} {
		if e.url != "" && !e.used {
			w = append(w, Problem{Path: "endpoints." + e.key, Message: "nothing is sent here: the manifest declares no " + e.key})
		}
	}
	sensitive := false
	for i, t := range m.Tools {
		p := index("tools", i)
		if t.DataClass == "sensitive" {
			sensitive = true
		}
		if t.Access == "write" && t.DataClass == "sensitive" {
			w = append(w, Problem{Path: p, Message: "a write tool on sensitive data asks for a lot of trust; split it into a read tool and a narrower write tool if you can"})
		}
		if t.Audience == "any" && (t.DataClass == "personal" || t.DataClass == "sensitive") {
			w = append(w, Problem{Path: index("tools", i) + ".audience", Message: "results with personal or sensitive data may be shown to a whole conversation; consider audience private"})
		}
	}
	if sensitive && m.modelDataPolicy() == "answer" {
		w = append(w, Problem{Path: "modelDataPolicy", Message: "answer lets results of sensitive tools be used in model answers"})
	}
	if m.distribution() == "directory" {
		w = append(w, m.DirectoryProblems()...)
	}
	return w
}

// DirectoryProblems lists what a manifest lacks to be published with
// distribution directory: an icon, at least one category, an English
// display name and description, and not being a sample. Parse does not
// require them (stored versions are parsed again, and a draft may be
// incomplete); the developer API refuses to publish a directory version
// while this is not empty, and Warnings reports them for directory
// manifests.
func (m *Manifest) DirectoryProblems() Problems {
	var p Problems
	if m.IconURL == "" {
		p = append(p, Problem{Path: "iconUrl", Message: "a directory Kit needs an icon"})
	}
	if len(m.Categories) == 0 {
		p = append(p, Problem{Path: "categories", Message: "a directory Kit needs at least one category"})
	}
	if _, ok := m.DisplayName["en"]; !ok {
		p = append(p, Problem{Path: "displayName", Message: "a directory Kit needs an en display name"})
	}
	if _, ok := m.Description["en"]; !ok {
		p = append(p, Problem{Path: "description", Message: "a directory Kit needs an en description"})
	}
	if m.Sample {
		p = append(p, Problem{Path: "sample", Message: "a sample Kit cannot be listed in the directory"})
	}
	return p
}

// specialUseTLDs name networks that no public domain can be verified in
// (RFC 6761, RFC 6762, RFC 8375, ICANN's .internal).
var specialUseTLDs = []string{"example", "home.arpa", "internal", "invalid", "local", "localhost", "test"}

// hostWarning returns advice about an endpoint URL, or "". The URL is valid.
func hostWarning(s string) string {
	h := hostOf(s)
	switch {
	case net.ParseIP(h) != nil:
		return "an IP address cannot be a verified domain; use a DNS name"
	case !strings.Contains(h, "."):
		return "a single-label host such as localhost cannot be a verified domain"
	}
	if slices.ContainsFunc(specialUseTLDs, func(t string) bool { return strings.HasSuffix(h, "."+t) }) {
		return "a special-use domain (.local, .test, .example, ...) cannot be verified"
	}
	rest := strings.ToLower(s[len("https://"):])
	if strings.Contains(rest, "http:") || strings.Contains(rest, "http%3a") {
		return "this URL looks like it forwards to a plain http URL"
	}
	return ""
}
