package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kitd/kitd/internal/jsontext"
)

// Canonical returns the canonical JSON form of the manifest, which
// Hash is taken over: object keys sorted, no insignificant whitespace,
// integers in plain decimal, strings escaped minimally (RFC 8785 style; all
// keys are ASCII, so byte order equals its UTF-16 order). Arrays keep the
// order written. It is a normalized form: the default distribution is
// written out, and an empty oauth.userScopes, empty lists (tools, events,
// commands, categories), an empty endpoints object, sample false and
// modelDataPolicy none are left out, so manifests that mean the same have
// the same form (and manifests written before those fields existed keep
// their hash). Parse accepts it and yields an equal manifest.
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
		doc["bot"] = obj{"scopes": strs(m.Bot.Scopes)}.with(len(m.Bot.DisplayName) > 0, "displayName", langObj(m.Bot.DisplayName))
	}
	if m.IncomingWebhooks != nil {
		doc["incomingWebhooks"] = obj{"maxPerInstallation": m.IncomingWebhooks.MaxPerInstallation}
	}
	if m.OAuth != nil {
		doc["oauth"] = obj{"redirectUrls": strs(m.OAuth.RedirectURLs)}.with(len(m.OAuth.UserScopes) > 0, "userScopes", strs(m.OAuth.UserScopes))
	}
	if m.Interactivity != nil {
		doc["interactivity"] = obj{"url": m.Interactivity.URL}
	}
	if m.IconURL != "" {
		doc["iconUrl"] = m.IconURL
	}
	if len(m.Categories) > 0 {
		doc["categories"] = strs(m.Categories)
	}
	if m.Sample {
		doc["sample"] = true
	}
	if len(m.Tools) > 0 {
		doc["tools"] = objs(m.Tools, toolObj)
	}
	if len(m.Events) > 0 {
		doc["events"] = strs(m.Events)
	}
	if len(m.Commands) > 0 {
		doc["commands"] = objs(m.Commands, func(c Command) obj {
			return obj{"name": c.Name, "description": langObj(c.Description)}.with(len(c.Usage) > 0, "usage", langObj(c.Usage))
		})
	}
	if a := m.ExternalAuth; a != nil {
		doc["externalAuth"] = externalAuthObj(a, slices.Clone)
	}
	if p := m.modelDataPolicy(); p != modelDataPolicies[0] {
		doc["modelDataPolicy"] = p
	}
	if e := m.endpointsObj(); len(e) > 0 {
		doc["endpoints"] = e
	}
	var b bytes.Buffer
	b.Grow(4096)
	writeCanonical(&b, doc)
	return b.Bytes()
}

// externalAuthObj is the externalAuth object, its scope lists put in
// order by order (the consent form sorts them: order grants nothing).
func externalAuthObj(a *ExternalAuth, order func([]string) []string) obj {
	return obj{
		"displayName":    langObj(a.DisplayName),
		"authorizeUrl":   a.AuthorizeURL,
		"tokenUrl":       a.TokenURL,
		"requiredScopes": strs(order(a.RequiredScopes)),
		"optionalScopes": strs(order(a.OptionalScopes)),
	}
}

func toolObj(t Tool) obj {
	return obj{
		"name":        t.Name,
		"displayName": langObj(t.DisplayName),
		"description": langObj(t.Description),
		"access":      t.Access,
		"dataClass":   t.DataClass,
		"audience":    t.Audience,
	}
}

func (m *Manifest) endpointsObj() obj {
	e := obj{}
	for _, kv := range [...]struct{ k, v string }{{"events", m.Endpoints.Events}, {"commands", m.Endpoints.Commands}, {"tools", m.Endpoints.Tools}} {
		if kv.v != "" {
			e[kv.k] = kv.v
		}
	}
	return e
}

// modelDataPolicy returns the model data policy with the default filled in.
func (m *Manifest) modelDataPolicy() string {
	if m.ModelDataPolicy == "" {
		return modelDataPolicies[0]
	}
	return m.ModelDataPolicy
}

// Hash is the lowercase hex SHA-256 of Canonical (a Version's manifestHash).
func (m *Manifest) Hash() string { return sha256Hex(m.Canonical()) }

// ConsentHash is the lowercase hex SHA-256 of the canonical form of what a
// member consents to: slug, display name, description, developer, privacy
// policy URL, bot and user scopes (sorted: order grants nothing), and
// whether interactivity is declared (its URL is not shown to members), and,
// only when declared: the icon URL, the tools (sorted by name, every field),
// event kinds and command names (sorted), external auth (scopes sorted,
// provider URLs included: another provider is another consent) and model
// data policy answer. The version, distribution, redirect URLs, webhook
// count, bot display name, endpoint URLs, command descriptions, categories
// and sample are left out, so a new version that asks for nothing new keeps
// the consent of the old one. Fields added later must be left out when
// empty, or every existing consent hash would change.
func (m *Manifest) ConsentHash() string {
	var b bytes.Buffer
	b.Grow(4096)
	writeCanonical(&b, m.consentDoc())
	return sha256Hex(b.Bytes())
}

func (m *Manifest) consentDoc() obj {
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
	if m.IconURL != "" {
		doc["iconUrl"] = m.IconURL
	}
	if len(m.Tools) > 0 {
		tools := slices.Clone(m.Tools)
		slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
		doc["tools"] = objs(tools, toolObj)
	}
	if len(m.Events) > 0 {
		doc["events"] = strs(sortedCopy(m.Events))
	}
	if len(m.Commands) > 0 {
		doc["commands"] = strs(sortedCopy(m.commandNames()))
	}
	if a := m.ExternalAuth; a != nil {
		doc["externalAuth"] = externalAuthObj(a, sortedCopy)
	}
	if p := m.modelDataPolicy(); p != modelDataPolicies[0] {
		doc["modelDataPolicy"] = p
	}
	return doc
}

func (m *Manifest) commandNames() []string {
	out := make([]string, len(m.Commands))
	for i, c := range m.Commands {
		out[i] = c.Name
	}
	return out
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
// exactly (docs/api.md "The authorization code flow": no prefix or normalized matching).
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
// interactivity.url, oauth.redirectUrls and endpoints.events, .commands and
// .tools. developer.url, privacyPolicyUrl and iconUrl are only shown (as
// links or an image), and the externalAuth URLs belong to a third-party
// provider whose domain the developer cannot prove, so none of them needs a
// verified domain.
func (m *Manifest) EndpointHosts() []string {
	urls := m.endpointURLs()
	hosts := make([]string, 0, len(urls))
	for _, e := range urls {
		if h := hostOf(e.url); h != "" {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

type pathURL struct{ path, url string }

// endpointURLs lists the endpoint URLs with their paths, in field order.
func (m *Manifest) endpointURLs() []pathURL {
	var urls []pathURL
	if m.OAuth != nil {
		for i, u := range m.OAuth.RedirectURLs {
			urls = append(urls, pathURL{index("oauth.redirectUrls", i), u})
		}
	}
	if m.Interactivity != nil {
		urls = append(urls, pathURL{"interactivity.url", m.Interactivity.URL})
	}
	for _, kv := range [...]struct{ k, v string }{{"events", m.Endpoints.Events}, {"commands", m.Endpoints.Commands}, {"tools", m.Endpoints.Tools}} {
		if kv.v != "" {
			urls = append(urls, pathURL{"endpoints." + kv.k, kv.v})
		}
	}
	return urls
}

func hostOf(s string) string {
	if u, err := url.Parse(s); err == nil {
		return strings.ToLower(u.Hostname())
	}
	return ""
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

// with sets o[k] to v when present: the canonical form leaves an empty
// optional member out.
func (o obj) with(present bool, k string, v any) obj {
	if present {
		o[k] = v
	}
	return o
}

// objs is the array of the objects f makes of xs.
func objs[T any](xs []T, f func(T) obj) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

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
		writeSeq(b, '{', '}', len(keys), func(i int) {
			writeString(b, keys[i])
			b.WriteByte(':')
			writeCanonical(b, v[keys[i]])
		})
	case []any:
		writeSeq(b, '[', ']', len(v), func(i int) { writeCanonical(b, v[i]) })
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

// writeSeq writes the n members of an object or array between start and
// end, comma-separated, each by member.
func writeSeq(b *bytes.Buffer, start, end byte, n int, member func(i int)) {
	b.WriteByte(start)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		member(i)
	}
	b.WriteByte(end)
}

// writeString escapes only what JSON requires (jsontext.Minimal): quote,
// backslash and control characters, with the short escapes where JSON has
// them. Everything else, including non-ASCII, is written as UTF-8, so
// "\u00e9" and "é" in the submitted text give the same form.
func writeString(b *bytes.Buffer, s string) {
	b.Write(jsontext.AppendString(b.AvailableBuffer(), s, jsontext.Minimal))
}
