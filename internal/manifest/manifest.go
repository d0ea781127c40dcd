// Package manifest owns the shape and rules of a Kit manifest: the JSON
// document that says what a Kit is and may do (SPEC.md section 2 "Manifest",
// OPERATIONS.md section 4). It parses and strictly validates manifest text,
// reports every problem by field path without echoing submitted values, and
// derives the canonical form and hashes that versions and consent are keyed
// on. It never stores anything and knows nothing about HTTP; slug ownership,
// reserved slugs, domain verification and consent diffs belong to callers.
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

// IncomingWebhooks enables incoming webhooks (SPEC.md 4.9).
type IncomingWebhooks struct {
	MaxPerInstallation int
}

// OAuth configures the authorization code flow (SPEC.md 5).
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
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Problems lists problems in document order.
type Problems []Problem

// Limits of the manifest and its fields.
const (
	MinTextLen  = 2     // characters of the manifest text (SPEC.md 8)
	MaxTextLen  = 65536 // characters of the manifest text (SPEC.md 8)
	MaxProblems = 100   // at most this many problems are returned

	maxPathLen    = 200 // SPEC.md 4.10 validate response
	maxMessageLen = 300
	maxURLLen     = 2000
	maxHostLen    = 253 // SPEC.md "Domain"
	maxScopes     = 20  // ConsentSummary botScopes / userScopes
	maxRedirects  = 10
	maxWebhooks   = 20 // SPEC.md 8
)

// Distributions a manifest may name; the first is the default.
var distributions = []string{"private", "unlisted", "directory"}

var (
	langRe = regexp.MustCompile(`^[a-z]{2}(-[A-Z]{2})?$`)
	// keyRe: keys that may appear in a path. Others are left out of paths so
	// that arbitrary submitted text never comes back (SPEC.md 7).
	keyRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
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
	// A syntax pass first: it gives the byte offset of the error, and
	// afterwards the tree builder cannot fail half-way.
	var raw json.RawMessage
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, Problems{{Path: "", Message: "manifest is not valid JSON (error at byte " + strconv.FormatInt(se.Offset, 10) + ")"}}
		}
		return nil, Problems{{Path: "", Message: "manifest is not valid JSON"}}
	}
	root, err := parseTree(text)
	if err != nil {
		return nil, Problems{{Path: "", Message: "manifest is not valid JSON"}}
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
	seen := make(map[string]bool, len(n.members))
	for _, mb := range n.members {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == mb.key })
		switch {
		case seen[mb.key]:
			c.add(mb.off, c.keyPath(path, mb.key), "duplicate key")
		case i < 0:
			if keyRe.MatchString(mb.key) {
				c.add(mb.off, join(path, mb.key), "unknown key")
			} else {
				c.add(mb.off, path, "has an unknown key (name not shown)")
			}
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

// keyPath is the path of a member whose key may be arbitrary text.
func (c *checker) keyPath(path, key string) string {
	if keyRe.MatchString(key) {
		return join(path, key)
	}
	return path
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
	if l := utf8.RuneCountInString(s); l < lo || l > hi {
		c.add(n.off, path, "must be "+strconv.Itoa(lo)+"-"+strconv.Itoa(hi)+" characters")
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		c.add(n.off, path, "must not be blank")
		return "", false
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		// Bidirectional overrides could make a consent screen read
		// differently from what was submitted.
		if unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			if multiline {
				c.add(n.off, path, "must not contain control characters other than line breaks and tabs")
			} else {
				c.add(n.off, path, "must not contain control characters")
			}
			return "", false
		}
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
		p := c.keyPath(path, mb.key)
		if _, dup := out[mb.key]; dup {
			c.add(mb.off, p, "duplicate key")
			ok = false
			continue
		}
		if !langRe.MatchString(mb.key) {
			c.add(mb.off, p, "language code must look like en or en-US")
			ok = false
			out[mb.key] = "" // still catch a later duplicate of this key
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
	return m
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
	switch {
	case s[0] < 'a' || s[0] > 'z':
		return "must start with a letter"
	case s[len(s)-1] == '-':
		return "must not end with a hyphen"
	case strings.Contains(s, "--"):
		return "must not contain two hyphens in a row"
	}
	return ""
}
