package manifest

import (
	"regexp"
	"slices"
)

// Tool is one tool the Kit offers (tools[]): a named call the service makes
// to endpoints.tools on a member's behalf. Access, DataClass and Audience are
// what a member consents to; ConsentDiff compares them.
type Tool struct {
	Name        string            // ^[a-z][a-z0-9_]{0,63}$, unique in the manifest
	DisplayName map[string]string // language code -> name, 1-80 characters
	Description map[string]string // language code -> text, 1-1000 characters
	Access      string            // read or write
	DataClass   string            // aggregate, standard, personal or sensitive
	Audience    string            // private or any
}

// Command is one slash command (commands[]), delivered to endpoints.commands.
type Command struct {
	Name        string            // "/deploy": ^/[a-z][a-z0-9_-]{0,31}$, unique
	Description map[string]string // language code -> text, 1-200 characters
	Usage       map[string]string // nil: none; language code -> hint, 1-100 characters
}

// ExternalAuth declares an account at a third-party provider that members
// connect to the Kit (externalAuth). The service runs the provider's
// authorization code flow; the provider's client credentials are Kit
// credentials, never part of the manifest.
type ExternalAuth struct {
	DisplayName    map[string]string // language code -> provider name, 1-80 characters
	AuthorizeURL   string            // the provider's authorization endpoint
	TokenURL       string            // the provider's token endpoint
	RequiredScopes []string          // provider scopes, as written; never nil
	OptionalScopes []string          // provider scopes, as written; never nil
}

// Endpoints are the Kit's receiving URLs for deliveries (endpoints). "" means
// not set. interactivity.url stays where OPERATIONS.md section 4 fixes it.
type Endpoints struct {
	Events   string // events[] are delivered here
	Commands string // commands[] are delivered here
	Tools    string // tools[] are called here
}

// Limits of the fields added with tools, events and commands.
const (
	MaxTools          = 50
	MaxCommands       = 25
	MaxCategories     = 5
	MaxProviderScopes = 10
)

// Tool access, data classes and audiences, narrowest first: the index is the
// rank ConsentDiff compares.
var (
	toolAccess    = []string{"read", "write"}
	toolDataClass = []string{"aggregate", "standard", "personal", "sensitive"}
	toolAudience  = []string{"private", "any"}
)

// Model data policies, narrowest first; the first is the default.
var modelDataPolicies = []string{"none", "answer"}

// eventKinds are the event kinds a Kit may subscribe to (events[]), sorted,
// with the bot scope each needs: "" needs nothing, "bot" needs a Kit bot
// (the event is about the bot itself), anything else is a bot scope (which
// also needs a bot).
var eventKinds = []struct{ name, needs string }{
	{"bot.added", "bot"},
	{"bot.mentioned", "bot"},
	{"bot.removed", "bot"},
	{"channel.archived", "conversations:read"},
	{"channel.created", "conversations:read"},
	{"channel.member_joined", "conversations:read"},
	{"channel.member_left", "conversations:read"},
	{"channel.renamed", "conversations:read"},
	{"file.shared", "files:read"},
	{"installation.uninstalled", ""},
	{"installation.updated", ""},
	{"message.deleted", "messages:read"},
	{"message.edited", "messages:read"},
	{"message.posted", "messages:read"},
	{"reaction.added", "messages:read"},
	{"reaction.removed", "messages:read"},
	{"user.joined", "users:read"},
	{"user.updated", "users:read"},
}

// eventNeeds returns what an event kind needs and whether the kind is known.
func eventNeeds(kind string) (needs string, known bool) {
	i, found := slices.BinarySearchFunc(eventKinds, kind, func(e struct{ name, needs string }, k string) int {
		switch {
		case e.name < k:
			return -1
		case e.name > k:
			return 1
		}
		return 0
	})
	if !found {
		return "", false
	}
	return eventKinds[i].needs, true
}

// EventNeeds says what the Kit bot needs to receive an event of kind: ""
// nothing, "bot" a bot, anything else that bot scope; known is false for a
// kind that is not one of EventKinds.
func EventNeeds(kind string) (needs string, known bool) { return eventNeeds(kind) }

// EventKinds returns every event kind a manifest may name, sorted.
func EventKinds() []string {
	out := make([]string, len(eventKinds))
	for i, e := range eventKinds {
		out[i] = e.name
	}
	return out
}

// categories are the directory categories a manifest may name, sorted.
var categories = []string{
	"analytics",
	"communication",
	"customer-support",
	"design",
	"developer-tools",
	"education",
	"finance",
	"hr",
	"marketing",
	"other",
	"productivity",
	"project-management",
	"sales",
	"security",
}

// Categories returns every directory category, sorted.
func Categories() []string { return slices.Clone(categories) }

var (
	toolNameRe      = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	commandNameRe   = regexp.MustCompile(`^/[a-z][a-z0-9_-]{0,31}$`)
	providerScopeRe = regexp.MustCompile(`^[!-~]{1,200}$`)
)

// reservedSlugs may not be registered by developers: they name the service,
// its surfaces and roles, or invite impersonation. Sorted.
var reservedSlugs = []string{
	"about", "account", "admin", "administrator", "api", "app", "apps",
	"assistant", "auth", "billing", "bot", "bots", "dev", "developer",
	"developers", "directory", "docs", "everyone", "help", "here", "hooks",
	"internal", "kit", "kits", "login", "logout", "marketplace", "me",
	"null", "oauth", "official", "operator", "ops", "owner", "root",
	"sandbox", "security", "settings", "signin", "signout", "signup",
	"staff", "status", "store", "support", "system", "team", "undefined",
	"webhook", "webhooks", "workspace", "www",
}

// ReservedSlug reports whether s is a reserved slug (exact match). Parse
// does not reject reserved slugs: the developer API does, at validate and
// upload, because the list may grow and stored versions are parsed again
// later (see docs/manifest.md "Reserved slugs").
func ReservedSlug(s string) bool {
	_, found := slices.BinarySearch(reservedSlugs, s)
	return found
}

// ReservedSlugs returns every reserved slug, sorted.
func ReservedSlugs() []string { return slices.Clone(reservedSlugs) }
