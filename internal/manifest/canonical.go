package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Canonical returns the canonical JSON form of the manifest, which
// Hash is taken over: object keys sorted, no insignificant whitespace,
// integers in plain decimal, strings escaped minimally (RFC 8785 style; all
// keys are ASCII, so byte order equals its UTF-16 order). Arrays keep the
// order written. It is a normalized form: the default distribution is
// written out and an empty oauth.userScopes is left out, so manifests that
// mean the same have the same form. Parse accepts it and yields an equal
// manifest.
func (m *Manifest) Canonical() []byte {
	doc := obj{
		"schemaVersion":    m.SchemaVersion,
		"slug":             m.Slug,
		"version":          m.Version.String(),
		"displayName":      langObj(m.DisplayName),
		"description":      langObj(m.Description),
		"developer":        obj{"name": m.Developer.Name, "url": m.Developer.URL},
		"privacyPolicyUrl": m.PrivacyPolicyURL,
		"distribution":     m.distribution(),
	}
	if m.Bot != nil {
		b := obj{"scopes": strs(m.Bot.Scopes)}
		if len(m.Bot.DisplayName) > 0 {
			b["displayName"] = langObj(m.Bot.DisplayName)
		}
		doc["bot"] = b
	}
	if m.IncomingWebhooks != nil {
		doc["incomingWebhooks"] = obj{"maxPerInstallation": m.IncomingWebhooks.MaxPerInstallation}
	}
	if m.OAuth != nil {
		o := obj{"redirectUrls": strs(m.OAuth.RedirectURLs)}
		if len(m.OAuth.UserScopes) > 0 {
			o["userScopes"] = strs(m.OAuth.UserScopes)
		}
		doc["oauth"] = o
	}
	if m.Interactivity != nil {
		doc["interactivity"] = obj{"url": m.Interactivity.URL}
	}
	var b bytes.Buffer
	writeCanonical(&b, doc)
	return b.Bytes()
}

// Hash is the lowercase hex SHA-256 of Canonical (a Version's manifestHash).
func (m *Manifest) Hash() string { return sha256Hex(m.Canonical()) }

// ConsentHash is the lowercase hex SHA-256 of the canonical form of what a
// member consents to: slug, display name, description, developer, privacy
// policy URL, bot and user scopes (sorted: order grants nothing), and
// whether interactivity is declared (its URL is not shown to members). The
// version, distribution, redirect URLs and webhook count are left out, so a
// new version that asks for nothing new keeps the consent of the old one.
// Fields added later must be left out when empty, or every existing consent
// hash would change.
func (m *Manifest) ConsentHash() string {
	doc := obj{
		"slug":             m.Slug,
		"displayName":      langObj(m.DisplayName),
		"description":      langObj(m.Description),
		"developer":        obj{"name": m.Developer.Name, "url": m.Developer.URL},
		"privacyPolicyUrl": m.PrivacyPolicyURL,
		"botScopes":        strs(sortedCopy(m.BotScopes())),
		"userScopes":       strs(sortedCopy(m.UserScopes())),
		"interactivity":    m.Interactivity != nil,
	}
	var b bytes.Buffer
	writeCanonical(&b, doc)
	return sha256Hex(b.Bytes())
}

// BotScopes returns the bot's scopes as written, or nil without a bot.
func (m *Manifest) BotScopes() []string {
	if m.Bot == nil {
		return nil
	}
	return m.Bot.Scopes
}

// UserScopes returns oauth.userScopes as written, or nil.
func (m *Manifest) UserScopes() []string {
	if m.OAuth == nil {
		return nil
	}
	return m.OAuth.UserScopes
}

// AllowsRedirect reports whether uri equals one of oauth.redirectUrls
// exactly (SPEC.md 5: no prefix or normalized matching).
func (m *Manifest) AllowsRedirect(uri string) bool {
	return m.OAuth != nil && slices.Contains(m.OAuth.RedirectURLs, uri)
}

// DefaultDisplayName returns the "en" display name, or else the one with the
// smallest language code.
func (m *Manifest) DefaultDisplayName() string { return pickLang(m.DisplayName) }

// BotDisplayName returns the bot's default display name, falling back to the
// manifest's, or "" without a bot.
func (m *Manifest) BotDisplayName() string {
	if m.Bot == nil {
		return ""
	}
	if len(m.Bot.DisplayName) > 0 {
		return pickLang(m.Bot.DisplayName)
	}
	return m.DefaultDisplayName()
}

func pickLang(t map[string]string) string {
	if s, ok := t["en"]; ok {
		return s
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return ""
	}
	return t[slices.Min(keys)]
}

// EndpointHosts returns the sorted unique host names (lowercase, no port) of
// the URLs the service sends requests or members to on the Kit's behalf:
// interactivity.url and oauth.redirectUrls. developer.url and
// privacyPolicyUrl are only shown as links, so they need no verified domain.
func (m *Manifest) EndpointHosts() []string {
	var urls []string
	if m.Interactivity != nil {
		urls = append(urls, m.Interactivity.URL)
	}
	if m.OAuth != nil {
		urls = append(urls, m.OAuth.RedirectURLs...)
	}
	hosts := make([]string, 0, len(urls))
	for _, s := range urls {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			hosts = append(hosts, strings.ToLower(u.Hostname()))
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func (m *Manifest) distribution() string {
	if m.Distribution == "" {
		return distributions[0]
	}
	return m.Distribution
}

// obj is a JSON object of the canonical form; values are obj, []any,
// string, int or bool.
type obj map[string]any

func langObj(t map[string]string) obj {
	o := make(obj, len(t))
	for k, v := range t {
		o[k] = v
	}
	return o
}

func strs(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case obj:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case string:
		writeString(b, v)
	case int:
		b.WriteString(strconv.Itoa(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	default:
		panic("manifest: canonical form of unexpected type")
	}
}

// writeString escapes only what JSON requires: quote, backslash and control
// characters, with the short escapes where JSON has them. Everything else,
// including non-ASCII, is written as UTF-8, so "\u00e9" and "é" in the
// submitted text give the same form.
func writeString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r) // validated text is valid UTF-8
			i += size
			continue
		}
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
		i++
	}
	b.WriteByte('"')
}

// Warnings returns advice about a valid manifest that is not a problem:
// bot scopes a bot token cannot use in v1 (SPEC.md 9; they need a user
// token). Paths index bot.scopes as written.
func (m *Manifest) Warnings() Problems {
	var w Problems
	for i, s := range m.BotScopes() {
		if userOnlyScopes[s] {
			w = append(w, Problem{Path: index("bot.scopes", i), Message: "bot tokens cannot use this scope in v1; it needs a user token (oauth.userScopes)"})
		}
	}
	return w
}
