// Package manifest owns the shape and rules of a Kit manifest: the JSON
// document that says what a Kit is and may do (docs/api.md "Manifest",
// OPERATIONS.md section 4). It parses and strictly validates manifest text,
// reports every problem by field path without echoing submitted values, and
// derives the canonical form and hashes that versions and consent are keyed
// on, the consent summary a member is shown and the consent diff between two
// versions. It never stores anything and knows nothing about HTTP; slug
// ownership, the reserved-slug check and domain verification belong to
// callers (ReservedSlug gives them the list).
//
// The rules and the decisions behind them are written down in
// docs/manifest.md.
package manifest

import (
	"cmp"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kitd/kitd/internal/plaintext"
	"github.com/kitd/kitd/kitclient/dev"
)

// Manifest is a validated Kit manifest. Parse only returns manifests that
// satisfy every rule; Canonical and the hashes depend on that.
type Manifest struct {
	SchemaVersion    int
	Slug             string
	Version          Version
	DisplayName      map[string]string // language code -> text
	Description      map[string]string // language code -> text
	Developer        Developer
	PrivacyPolicyURL string
	Bot              *Bot              // nil: the Kit has no bot
	IncomingWebhooks *IncomingWebhooks // nil: no incoming webhooks
	OAuth            *OAuth            // nil: no authorization code flow
	Interactivity    *Interactivity    // nil: interactive Blocks are removed
	Distribution     string            // private, unlisted or directory

	// Fields designed with the developer API (docs/manifest.md). Empty
	// values mean "not declared"; they are left out of the canonical form
	// and of the consent hash, so the hashes of older manifests stay put.
	IconURL         string        // "": no icon
	Categories      []string      // directory categories, as written
	Sample          bool          // a sample Kit, shown with a badge
	Tools           []Tool        // as written
	Events          []string      // event kinds, as written
	Commands        []Command     // as written
	ExternalAuth    *ExternalAuth // nil: no third-party account
	ModelDataPolicy string        // none (also "") or answer
	Endpoints       Endpoints     // delivery URLs of events, commands and tools
}

// Developer names who builds the Kit.
type Developer struct {
	Name string
	URL  string
}

// Bot is the Kit bot of every installation.
type Bot struct {
	DisplayName map[string]string // nil: the manifest's displayName is used
	Scopes      []string          // as written (order kept); never nil
}

// IncomingWebhooks enables incoming webhooks (docs/api.md "Incoming webhooks").
type IncomingWebhooks struct {
	MaxPerInstallation int
}

// OAuth configures the authorization code flow (docs/api.md "The authorization code flow").
type OAuth struct {
	RedirectURLs []string // as written; a redirect_uri must equal one exactly
	UserScopes   []string // as written; nil or empty: no user tokens
}

// Interactivity declares that the Kit handles interactive Blocks.
type Interactivity struct {
	URL string
}

// Problem is one validation problem. Path names the field ("bot.scopes[2]";
// "" is the document itself); Message never contains the submitted value.
// It is the developer API's type, as the consent summary is (consent.go).
type Problem = dev.Problem

// Problems lists problems in document order.
type Problems []Problem

// Limits of the manifest and its fields.
const (
	MinTextLen  = 2     // characters of the manifest text (docs/api.md "Field and size limits")
	MaxTextLen  = 65536 // characters of the manifest text (docs/api.md "Field and size limits")
	MaxProblems = 100   // at most this many problems are returned

	maxPathLen    = 200 // docs/api.md "Developer API" validate response
	maxMessageLen = 300
	maxURLLen     = 2000
	maxHostLen    = 253 // docs/api.md "Domain"
	maxScopes     = 20  // ConsentSummary botScopes / userScopes
	maxRedirects  = 10
	maxWebhooks   = 20 // docs/api.md "Field and size limits"
)

// Distributions a manifest may name; the first is the default.
var distributions = []string{"private", "unlisted", "directory"}

var (
	langRe = regexp.MustCompile(`^[a-z]{2}(-[A-Z]{2})?$`)
	// intRe: integers must be written as integers; 1.0 and 1e0 are rejected.
	intRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// Parse validates the manifest text and returns the manifest, or every
// problem found (up to MaxProblems) in document order. m is nil when
// problems is non-empty.
func Parse(text string) (m *Manifest, problems Problems) {
	if n := utf8.RuneCountInString(text); n < MinTextLen || n > MaxTextLen {
		return nil, Problems{{Path: "", Message: "manifest must be 2-65536 characters"}}
	}
	if !utf8.ValidString(text) {
		return nil, Problems{{Path: "", Message: "manifest is not valid UTF-8 (at byte " + strconv.Itoa(invalidUTF8At(text)) + ")"}}
	}
	// One strict pass builds the tree. Only when it refuses the text does
	// encoding/json look at it, for the byte offset of the error.
	root, err := parseTree(text)
	if err != nil {
		var raw json.RawMessage
		if err := json.Unmarshal([]byte(text), &raw); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, Problems{{Path: "", Message: "manifest is not valid JSON (error at byte " + strconv.FormatInt(se.Offset, 10) + ")"}}
			}
			return nil, Problems{{Path: "", Message: "manifest is not valid JSON"}}
		}
		// The scanner refused what encoding/json accepts: a bug in the
		// scanner, never expected; the reference builder decides.
		if root, err = parseTreeDecoder(text); err != nil {
			return nil, Problems{{Path: "", Message: "manifest is not valid JSON"}}
		}
	}
	c := &checker{}
	m = c.manifest(root)
	if len(c.problems) > 0 {
		return nil, c.result()
	}
	return m, nil
}

// invalidUTF8At returns the byte offset of the first invalid UTF-8 sequence.
func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}

// checker collects problems with the offset they concern, so that problems
// found late (missing keys, cross-field rules) still come out in document
// order.
type checker struct {
	problems []located
	// shape, when not nil, records the fields of every object checked, by
	// path with array indexes written as "[]". The schema test compares it
	// with docs/manifest.schema.json.
	shape map[string][]field
}

type located struct {
	off int64
	Problem
}

func (c *checker) add(off int64, path, msg string) {
	c.problems = append(c.problems, located{off, Problem{Path: clip(path, maxPathLen), Message: clip(msg, maxMessageLen)}})
}

func (c *checker) result() Problems {
	slices.SortStableFunc(c.problems, func(a, b located) int { return cmp.Compare(a.off, b.off) })
	out := make(Problems, 0, min(len(c.problems), MaxProblems))
	for i, p := range c.problems {
		if i == MaxProblems-1 && len(c.problems) > MaxProblems {
			out = append(out, Problem{Path: "", Message: "more problems were found; fix these first"})
			break
		}
		out = append(out, p.Problem)
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// maxNamedKey is the longest unknown key a problem names.
const maxNamedKey = 64

// plainKey reports whether an unknown key may be named in a problem: at
// most maxNamedKey letters, digits, '_', '-' and '.', what a field name
// with a typo looks like.
func plainKey(k string) bool {
	if k == "" || len(k) > maxNamedKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// field is one allowed key of an object and the check of its value.
type field struct {
	name     string
	required bool
	check    func(path string, n *node)
}

// object checks that n is an object whose keys are all among fields, each at
// most once, with every required field present. It runs each field's check
// in document order and reports whether n was an object at all.
func (c *checker) object(path string, n *node, fields []field) bool {
	if n.kind != kindObject {
		c.add(n.off, path, "must be an object")
		return false
	}
	if c.shape != nil {
		c.shape[shapePath(path)] = fields
	}
	seen := make(map[string]bool, len(n.members))
	for _, mb := range n.members {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == mb.key })
		// A key is input too: only the schema's own names appear in paths,
		// and an unknown key is named in the message only when it looks
		// like a name (a typo to fix), never when it could be anything.
		switch {
		case i < 0 && plainKey(mb.key):
			c.add(mb.off, path, `unknown key "`+mb.key+`"`)
		case i < 0:
			c.add(mb.off, path, "has an unknown key")
		case seen[mb.key]:
			c.add(mb.off, join(path, mb.key), "duplicate key")
		default:
			fields[i].check(join(path, mb.key), mb.val)
		}
		seen[mb.key] = true
	}
	for _, f := range fields {
		if f.required && !seen[f.name] {
			c.add(n.end, join(path, f.name), "is required")
		}
	}
	return true
}

func (c *checker) str(path string, n *node) (string, bool) {
	if n.kind != kindString {
		c.add(n.off, path, "must be a string")
		return "", false
	}
	return n.str, true
}

// intRange checks an integer written as an integer literal within [lo, hi].
func (c *checker) intRange(path string, n *node, lo, hi int) (int, bool) {
	if n.kind != kindNumber || !intRe.MatchString(n.str) {
		c.add(n.off, path, "must be an integer")
		return 0, false
	}
	v, err := strconv.Atoi(n.str)
	if err != nil || v < lo || v > hi {
		if lo == hi {
			c.add(n.off, path, "must be "+strconv.Itoa(lo))
		} else {
			c.add(n.off, path, "must be between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi))
		}
		return 0, false
	}
	return v, true
}

// text checks a human-readable string of lo-hi characters that is not blank.
// Names (multiline false) contain no control characters at all; longer
// texts may contain line breaks and tabs.
func (c *checker) text(path string, n *node, lo, hi int, multiline bool) (string, bool) {
	s, ok := c.str(path, n)
	if !ok {
		return "", false
	}
	// One pass: length, blankness and control characters, reported in
	// that order.
	l, blank, control := 0, true, false
	for _, r := range s {
		l++
		if blank && !unicode.IsSpace(r) {
			blank = false
		}
		if plaintext.Forbidden(r, multiline) {
			control = true
		}
	}
	switch {
	case l < lo || l > hi:
		c.add(n.off, path, "must be "+strconv.Itoa(lo)+"-"+strconv.Itoa(hi)+" characters")
		return "", false
	case blank:
		c.add(n.off, path, "must not be blank")
		return "", false
	case control && multiline:
		c.add(n.off, path, "must not contain control characters other than line breaks and tabs")
		return "", false
	case control:
		c.add(n.off, path, "must not contain control characters")
		return "", false
	}
	return s, true
}

// langMap checks an object of language code -> text with at least one entry.
func (c *checker) langMap(path string, n *node, hi int, multiline bool) (map[string]string, bool) {
	if n.kind != kindObject {
		c.add(n.off, path, "must be an object keyed by language code")
		return nil, false
	}
	if len(n.members) == 0 {
		c.add(n.off, path, "must have at least one language")
		return nil, false
	}
	out := make(map[string]string, len(n.members))
	ok := true
	for _, mb := range n.members {
		// A language code is named in paths only once it is one: any
		// other key is input that could carry anything.
		if !langRe.MatchString(mb.key) {
			c.add(mb.off, path, "has a key that is not a language code like en or en-US")
			ok = false
			continue
		}
		p := join(path, mb.key)
		if _, dup := out[mb.key]; dup {
			c.add(mb.off, p, "duplicate key")
			ok = false
			continue
		}
		s, good := c.text(p, mb.val, 1, hi, multiline)
		ok = ok && good
		out[mb.key] = s
	}
	return out, ok
}

// urlValue checks a URL: https, a valid host, no user information, printable
// ASCII only, at most 2000 characters; endpoints also carry no fragment.
func (c *checker) urlValue(path string, n *node, endpoint bool) (string, bool) {
	s, ok := c.str(path, n)
	if !ok {
		return "", false
	}
	if msg := urlProblem(s, endpoint); msg != "" {
		c.add(n.off, path, msg)
		return "", false
	}
	return s, true
}

func urlProblem(s string, endpoint bool) string {
	if len(s) > maxURLLen {
		return "must be at most 2000 characters"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return "must contain only printable ASCII characters (no spaces; encode others)"
		}
	}
	// The literal lowercase prefix: no other scheme spelling, and no
	// scheme-relative or opaque forms.
	if !strings.HasPrefix(s, "https://") {
		return "must be an https URL"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "must be a valid URL"
	}
	if u.User != nil {
		return "must not contain user information"
	}
	if endpoint && strings.Contains(s, "#") {
		return "must not have a fragment"
	}
	if !validHost(u.Hostname()) {
		return "must have a valid host name or IP address"
	}
	if p := u.Port(); p != "" {
		if v, err := strconv.Atoi(p); err != nil || v < 1 || v > 65535 {
			return "must have a port between 1 and 65535"
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "must not have an empty port"
	}
	return ""
}

// ValidHost reports whether h (a URL's host name, no port or brackets) is
// what a manifest URL's host must be (docs/manifest.md "URLs"): callers
// that build endpoint URLs, such as dev-install's origin, check it first.
func ValidHost(h string) bool { return validHost(h) }

// validHost accepts an IP address or a DNS name of letter/digit/hyphen labels.
func validHost(h string) bool {
	if h == "" || len(h) > maxHostLen {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-') {
				return false
			}
		}
	}
	return true
}

// scopeList checks an array of at most maxScopes unique known scopes. It
// returns the scopes and their nodes, or ok false when n is not an array.
func (c *checker) scopeList(path string, n *node, user bool) (scopes []string, elems []*node, ok bool) {
	if n.kind != kindArray {
		c.add(n.off, path, "must be an array of scopes")
		return nil, nil, false
	}
	if len(n.elems) > maxScopes {
		c.add(n.off, path, "must have at most 20 scopes")
	}
	seen := make(map[string]bool, len(n.elems))
	scopes = make([]string, 0, len(n.elems))
	for i, e := range n.elems {
		p := index(path, i)
		s, good := c.str(p, e)
		switch {
		case !good:
		case !KnownScope(s):
			c.add(e.off, p, "unknown scope")
		case seen[s]:
			c.add(e.off, p, "scope is listed more than once")
		case user && botOnlyScopes[s]:
			c.add(e.off, p, "this scope can only be granted to the Kit bot")
		default:
			seen[s] = true
			scopes = append(scopes, s)
			elems = append(elems, e)
			continue
		}
		elems = append(elems, nil)
		scopes = append(scopes, "")
	}
	// A scope that needs another one in the same list.
	for i, s := range scopes {
		if need, has := impliedBy[s]; has && !seen[need] {
			c.add(elems[i].off, index(path, i), "needs scope "+need+" in the same list")
		}
	}
	return scopes, elems, true
}

// manifest checks the whole document.
func (c *checker) manifest(root *node) *Manifest {
	m := &Manifest{Distribution: distributions[0]}
	var (
		botScopes      []string
		botScopeNodes  []*node
		botScopesOK    bool
		webhooksNode   *node
		webhooksObject bool
		lists          = map[string]*node{} // tools, events, commands: their nodes
		endpointsOK    = true               // endpoints absent, or an object
		endpointKeys   = map[string]bool{}  // keys written in endpoints
		events         []string             // "" where an entry was wrong
		eventNodes     []*node
	)
	ok := c.object("", root, []field{
		{"schemaVersion", true, func(p string, n *node) {
			m.SchemaVersion, _ = c.intRange(p, n, 1, 1)
		}},
		{"slug", true, func(p string, n *node) {
			if s, ok := c.str(p, n); ok {
				if msg := slugProblem(s); msg != "" {
					c.add(n.off, p, msg)
				} else {
					m.Slug = s
				}
			}
		}},
		{"version", true, func(p string, n *node) {
			if s, ok := c.str(p, n); ok {
				v, err := ParseVersion(s)
				if err != nil {
					c.add(n.off, p, err.Error())
				}
				m.Version = v
			}
		}},
		{"displayName", true, func(p string, n *node) {
			m.DisplayName, _ = c.langMap(p, n, 60, false)
		}},
		{"description", true, func(p string, n *node) {
			m.Description, _ = c.langMap(p, n, 500, true)
		}},
		{"developer", true, func(p string, n *node) {
			c.object(p, n, []field{
				{"name", true, func(p string, n *node) { m.Developer.Name, _ = c.text(p, n, 1, 80, false) }},
				{"url", true, func(p string, n *node) { m.Developer.URL, _ = c.urlValue(p, n, false) }},
			})
		}},
		{"privacyPolicyUrl", true, func(p string, n *node) {
			m.PrivacyPolicyURL, _ = c.urlValue(p, n, false)
		}},
		{"bot", false, func(p string, n *node) {
			b := &Bot{Scopes: []string{}}
			m.Bot = b
			c.object(p, n, []field{
				{"displayName", false, func(p string, n *node) { b.DisplayName, _ = c.langMap(p, n, 80, false) }},
				{"scopes", true, func(p string, n *node) {
					botScopes, botScopeNodes, botScopesOK = c.scopeList(p, n, false)
					b.Scopes = botScopes
				}},
			})
		}},
		{"incomingWebhooks", false, func(p string, n *node) {
			w := &IncomingWebhooks{}
			m.IncomingWebhooks = w
			webhooksNode = n
			webhooksObject = c.object(p, n, []field{
				{"maxPerInstallation", true, func(p string, n *node) {
					w.MaxPerInstallation, _ = c.intRange(p, n, 1, maxWebhooks)
				}},
			})
		}},
		{"oauth", false, func(p string, n *node) {
			o := &OAuth{}
			m.OAuth = o
			c.object(p, n, []field{
				{"redirectUrls", true, func(p string, n *node) { o.RedirectURLs = c.redirectURLs(p, n) }},
				{"userScopes", false, func(p string, n *node) {
					o.UserScopes, _, _ = c.scopeList(p, n, true)
				}},
			})
		}},
		{"interactivity", false, func(p string, n *node) {
			i := &Interactivity{}
			m.Interactivity = i
			c.object(p, n, []field{
				{"url", true, func(p string, n *node) { i.URL, _ = c.urlValue(p, n, true) }},
			})
		}},
		{"distribution", false, func(p string, n *node) {
			if s, ok := c.str(p, n); ok {
				if !slices.Contains(distributions, s) {
					c.add(n.off, p, "must be private, unlisted or directory")
				}
				m.Distribution = s
			}
		}},
		{"iconUrl", false, func(p string, n *node) { m.IconURL, _ = c.urlValue(p, n, true) }},
		{"categories", false, func(p string, n *node) { m.Categories = c.categories(p, n) }},
		{"sample", false, func(p string, n *node) {
			if n.kind != kindBool {
				c.add(n.off, p, "must be true or false")
				return
			}
			m.Sample = n.str == "true"
		}},
		{"tools", false, func(p string, n *node) {
			lists[p] = n
			m.Tools = c.tools(p, n)
		}},
		{"events", false, func(p string, n *node) {
			lists[p] = n
			events, eventNodes = c.events(p, n)
			for _, e := range events {
				if e != "" {
					m.Events = append(m.Events, e)
				}
			}
		}},
		{"commands", false, func(p string, n *node) {
			lists[p] = n
			m.Commands = c.commands(p, n)
		}},
		{"externalAuth", false, func(p string, n *node) {
			a := &ExternalAuth{RequiredScopes: []string{}, OptionalScopes: []string{}}
			m.ExternalAuth = a
			var required []string
			c.object(p, n, []field{
				{"displayName", true, func(p string, n *node) { a.DisplayName, _ = c.langMap(p, n, 80, false) }},
				{"authorizeUrl", true, func(p string, n *node) { a.AuthorizeURL, _ = c.urlValue(p, n, true) }},
				{"tokenUrl", true, func(p string, n *node) { a.TokenURL, _ = c.urlValue(p, n, true) }},
				{"requiredScopes", false, func(p string, n *node) {
					required = c.providerScopes(p, n, nil)
					a.RequiredScopes = required
				}},
				{"optionalScopes", false, func(p string, n *node) {
					// Checked against the required scopes after the object:
					// the keys may come in either order.
					a.OptionalScopes = nil
					lists[p] = n
				}},
			})
			if on := lists["externalAuth.optionalScopes"]; on != nil {
				a.OptionalScopes = c.providerScopes("externalAuth.optionalScopes", on, required)
			}
		}},
		{"modelDataPolicy", false, func(p string, n *node) {
			m.ModelDataPolicy, _ = c.enum(p, n, modelDataPolicies)
		}},
		{"endpoints", false, func(p string, n *node) {
			e := &m.Endpoints
			endpointsOK = c.object(p, n, []field{
				{"events", false, func(p string, n *node) { endpointKeys["events"] = true; e.Events, _ = c.urlValue(p, n, true) }},
				{"commands", false, func(p string, n *node) { endpointKeys["commands"] = true; e.Commands, _ = c.urlValue(p, n, true) }},
				{"tools", false, func(p string, n *node) { endpointKeys["tools"] = true; e.Tools, _ = c.urlValue(p, n, true) }},
			})
		}},
	})
	if !ok {
		return nil
	}
	// Incoming webhooks need both halves: the bot scope grants posting, and
	// maxPerInstallation bounds how many webhooks an admin may create.
	hasWebhookScope := slices.Contains(botScopes, "incoming-webhook")
	if webhooksObject && botScopesOK && !hasWebhookScope {
		c.add(webhooksNode.off, "incomingWebhooks", "needs bot scope incoming-webhook")
	}
	if webhooksObject && m.Bot == nil {
		c.add(webhooksNode.off, "incomingWebhooks", "needs a bot with scope incoming-webhook")
	}
	if hasWebhookScope && m.IncomingWebhooks == nil {
		i := slices.Index(botScopes, "incoming-webhook")
		c.add(botScopeNodes[i].off, index("bot.scopes", i), "needs incomingWebhooks.maxPerInstallation")
	}
	// Declared tools, events and commands need the endpoint they are sent
	// to. An endpoint key that was written but wrong already has a problem.
	for _, key := range []string{"tools", "events", "commands"} {
		if n := lists[key]; n != nil && n.kind == kindArray && len(n.elems) > 0 && endpointsOK && !endpointKeys[key] {
			c.add(n.off, key, "needs endpoints."+key)
		}
	}
	// Events are delivered as the Kit bot sees them: an event about
	// messages needs the bot scope that reads messages, and so on.
	for i, e := range events {
		needs, _ := eventNeeds(e)
		p := index("events", i)
		switch {
		case e == "" || needs == "":
		case m.Bot == nil && needs == "bot":
			c.add(eventNodes[i].off, p, "needs a bot")
		case m.Bot == nil:
			c.add(eventNodes[i].off, p, "needs a bot with scope "+needs)
		case needs != "bot" && botScopesOK && !slices.Contains(botScopes, needs):
			c.add(eventNodes[i].off, p, "needs bot scope "+needs)
		}
	}
	return m
}

// enum checks a string that must be one of allowed.
func (c *checker) enum(path string, n *node, allowed []string) (string, bool) {
	s, ok := c.str(path, n)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		msg := "must be "
		for i, a := range allowed {
			switch {
			case i == 0:
			case i == len(allowed)-1:
				msg += " or "
			default:
				msg += ", "
			}
			msg += a
		}
		c.add(n.off, path, msg)
		return "", false
	}
	return s, true
}

// array checks that n is an array of at most max elements; what is the
// plural noun of the elements for the messages.
func (c *checker) array(path string, n *node, max int, what string) bool {
	if n.kind != kindArray {
		c.add(n.off, path, "must be an array of "+what)
		return false
	}
	if len(n.elems) > max {
		c.add(n.off, path, "must have at most "+strconv.Itoa(max)+" "+what)
	}
	return true
}

// uniqueName checks a name against its pattern and the names seen before
// it in the same list; it returns "" for a name with a problem.
func (c *checker) uniqueName(p string, n *node, re *regexp.Regexp, patternMsg, what string, seen map[string]bool) string {
	s, ok := c.str(p, n)
	switch {
	case !ok:
		return ""
	case !re.MatchString(s):
		c.add(n.off, p, patternMsg)
		return ""
	case seen[s]:
		c.add(n.off, p, what+" name is used more than once")
		return ""
	}
	seen[s] = true
	return s
}

// nameRule is what the name of a listed object must be: unique in its
// list, and matching re (else the problem is msg).
type nameRule struct {
	what string // tool, command
	re   *regexp.Regexp
	msg  string
}

// namedObjects checks an array (list) of at most max objects, each with a
// required name by rule, then the keys of fields, which names the element
// it fills and where its name goes.
func namedObjects[T any](c *checker, path string, n *node, max int, list string, rule nameRule, fields func(v *T) (*string, []field)) []T {
	if !c.array(path, n, max, list) {
		return nil
	}
	out := make([]T, 0, len(n.elems))
	seen := make(map[string]bool, len(n.elems))
	for i, e := range n.elems {
		var v T
		name, rest := fields(&v)
		c.object(index(path, i), e, append([]field{{"name", true, func(p string, n *node) {
			*name = c.uniqueName(p, n, rule.re, rule.msg, rule.what, seen)
		}}}, rest...))
		out = append(out, v)
	}
	return out
}

// tools checks tools[]: objects with every key required, unique names.
func (c *checker) tools(path string, n *node) []Tool {
	rule := nameRule{"tool", toolNameRe, "must be 1-64 characters from a-z, 0-9 and _, starting with a letter"}
	return namedObjects(c, path, n, MaxTools, "tools", rule, func(t *Tool) (*string, []field) {
		return &t.Name, []field{
			{"displayName", true, func(p string, n *node) { t.DisplayName, _ = c.langMap(p, n, 80, false) }},
			{"description", true, func(p string, n *node) { t.Description, _ = c.langMap(p, n, 1000, true) }},
			{"access", true, func(p string, n *node) { t.Access, _ = c.enum(p, n, toolAccess) }},
			{"dataClass", true, func(p string, n *node) { t.DataClass, _ = c.enum(p, n, toolDataClass) }},
			{"audience", true, func(p string, n *node) { t.Audience, _ = c.enum(p, n, toolAudience) }},
		}
	})
}

// events checks events[]: known kinds, each listed once. It returns the
// entries with "" for wrong ones, and their nodes.
func (c *checker) events(path string, n *node) ([]string, []*node) {
	out, ok := c.uniqueStrings(path, n, len(eventKinds), "event kinds", "event kind", func(s string) string {
		if _, known := eventNeeds(s); !known {
			return "unknown event kind"
		}
		return ""
	})
	if !ok {
		return nil, nil
	}
	return out, n.elems
}

// commands checks commands[]: unique names, a description, an optional usage.
func (c *checker) commands(path string, n *node) []Command {
	rule := nameRule{"command", commandNameRe, "must be / and 1-32 characters from a-z, 0-9, _ and -, starting with a letter"}
	return namedObjects(c, path, n, MaxCommands, "commands", rule, func(cmd *Command) (*string, []field) {
		return &cmd.Name, []field{
			{"description", true, func(p string, n *node) { cmd.Description, _ = c.langMap(p, n, 200, false) }},
			{"usage", false, func(p string, n *node) { cmd.Usage, _ = c.langMap(p, n, 100, false) }},
		}
	})
}

// categories checks categories: known categories, each listed once.
func (c *checker) categories(path string, n *node) []string {
	out, _ := c.uniqueStrings(path, n, MaxCategories, "categories", "category", func(s string) string {
		if !slices.Contains(categories, s) {
			return "unknown category"
		}
		return ""
	})
	return kept(out)
}

// providerScopes checks a list of a provider's scopes: 1-200 printable ASCII
// characters without spaces, each listed once, and none of them in
// required (optional scopes repeat no required one).
func (c *checker) providerScopes(path string, n *node, required []string) []string {
	out, ok := c.uniqueStrings(path, n, MaxProviderScopes, "scopes", "scope", func(s string) string {
		switch {
		case !providerScopeRe.MatchString(s):
			return "must be 1-200 printable ASCII characters without spaces"
		case slices.Contains(required, s):
			return "is already a required scope"
		}
		return ""
	})
	if !ok {
		return []string{}
	}
	return kept(out)
}

// uniqueStrings checks an array (list) of at most max strings, each without
// a problem (what problem says of it, "" for none) and listed once. It
// returns an entry per element, "" for a wrong one, and whether n was such
// an array. A wrong entry is never taken for the first of a repeated pair,
// so the order of the checks does not change a message.
func (c *checker) uniqueStrings(path string, n *node, max int, list, what string, problem func(string) string) ([]string, bool) {
	if !c.array(path, n, max, list) {
		return nil, false
	}
	out := make([]string, len(n.elems))
	for i, e := range n.elems {
		p := index(path, i)
		s, ok := c.str(p, e)
		if !ok {
			continue
		}
		if msg := problem(s); msg != "" {
			c.add(e.off, p, msg)
		} else if slices.Contains(out[:i], s) {
			c.add(e.off, p, what+" is listed more than once")
		} else {
			out[i] = s
		}
	}
	return out, true
}

// kept drops the wrong ("") entries of a uniqueStrings answer; it is
// never nil.
func kept(s []string) []string {
	return slices.DeleteFunc(s, func(v string) bool { return v == "" })
}

// shapePath writes array indexes of a path as "[]".
func shapePath(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		b.WriteByte(path[i])
		if path[i] == '[' {
			for i+1 < len(path) && path[i+1] != ']' {
				i++
			}
		}
	}
	return b.String()
}

func (c *checker) redirectURLs(path string, n *node) []string {
	if n.kind != kindArray {
		c.add(n.off, path, "must be an array of URLs")
		return nil
	}
	if len(n.elems) == 0 || len(n.elems) > maxRedirects {
		c.add(n.off, path, "must have 1-10 URLs")
	}
	seen := make(map[string]bool, len(n.elems))
	out := make([]string, 0, len(n.elems))
	for i, e := range n.elems {
		p := index(path, i)
		s, ok := c.urlValue(p, e, true)
		if !ok {
			continue
		}
		if seen[s] {
			c.add(e.off, p, "URL is listed more than once")
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// slugProblem returns what is wrong with a slug, or "".
func slugProblem(s string) string {
	if l := utf8.RuneCountInString(s); l < 2 || l > 40 {
		return "must be 2-40 characters"
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return "must contain only lowercase letters, digits and hyphens"
		}
	}
	if s[0] < 'a' || s[0] > 'z' {
		return "must start with a letter"
	}
	return ""
}
