package manifest

import "slices"

// knownScopes are the scopes docs/api.md "Scopes" names. The platform knows no
// others, so a manifest asking for any other scope is rejected rather than
// silently granted nothing.
var knownScopes = []string{
	"conversations:read",
	"files:read",
	"files:write",
	"incoming-webhook",
	"messages:read",
	"messages:write",
	"reactions:write",
	"runs:read",
	"users:read",
	"users:read.email",
}

// KnownScope reports whether s is a scope the platform knows.
func KnownScope(s string) bool {
	_, found := slices.BinarySearch(knownScopes, s)
	return found
}

// KnownScopes returns every known scope, sorted.
func KnownScopes() []string { return slices.Clone(knownScopes) }

// botOnlyScopes cannot be granted to a user token: an incoming webhook always
// posts as the Kit bot (docs/api.md "Incoming webhooks").
var botOnlyScopes = map[string]bool{"incoming-webhook": true}

// userOnlyScopes are accepted on a bot but useless there in v1 (docs/api.md "Versioning":
// bots cannot add reactions or upload files; runs take user tokens only), so
// they produce a warning, not a problem.
var userOnlyScopes = map[string]bool{"reactions:write": true, "files:write": true, "runs:read": true}

// impliedBy maps a scope to the scope it needs in the same list: an email
// address is an attribute of a user the token must be able to read at all.
var impliedBy = map[string]string{"users:read.email": "users:read"}
