package api

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/limits"
)

// specRoutes is docs/api.md "Endpoints" transcribed by hand, one row per
// endpoint, then the routes other documents define. Every row of routes
// must be here with the same tokens, scope and family, and every row here
// must be in routes.
var specRoutes = []struct {
	rule   string
	method string
	path   string
	tokens tokens
	scope  string
	family limits.Name
}{
	// docs/api.md "Auth"
	{"auth.test takes a bot or user token, no scope, read", "GET", "/api/v1/auth/test", botOrUser, "", limits.Read},
	{"rotate takes a bot token only, no scope, write", "POST", "/api/v1/auth/rotate", bot, "", limits.Write},
	{"kit.access takes no token and has no bucket", "POST", "/api/v1/oauth/kit.access", noToken, "", ""},
	// docs/api.md "Conversations"
	{"listing conversations needs conversations:read, read", "GET", "/api/v1/conversations", botOrUser, "conversations:read", limits.Read},
	{"a conversation needs conversations:read, read", "GET", "/api/v1/conversations/{id}", botOrUser, "conversations:read", limits.Read},
	{"members need conversations:read, read", "GET", "/api/v1/conversations/{id}/members", botOrUser, "conversations:read", limits.Read},
	// docs/api.md "Messages"
	{"history needs messages:read, read", "GET", "/api/v1/conversations/{id}/messages", botOrUser, "messages:read", limits.Read},
	{"a message needs messages:read, read", "GET", "/api/v1/messages/{id}", botOrUser, "messages:read", limits.Read},
	{"replies need messages:read, read", "GET", "/api/v1/messages/{id}/replies", botOrUser, "messages:read", limits.Read},
	{"posting needs messages:write, write (and the conversation's own bucket, in its actor)", "POST", "/api/v1/messages", botOrUser, "messages:write", limits.Write},
	{"editing needs messages:write, write", "PATCH", "/api/v1/messages/{id}", botOrUser, "messages:write", limits.Write},
	{"deleting needs messages:write, write", "DELETE", "/api/v1/messages/{id}", botOrUser, "messages:write", limits.Write},
	// docs/api.md "Reactions"
	{"adding a reaction takes a user token only, reactions:write, write", "POST", "/api/v1/reactions", user, "reactions:write", limits.Write},
	{"removing a reaction takes a user token only, reactions:write, write", "DELETE", "/api/v1/reactions", user, "reactions:write", limits.Write},
	// docs/api.md "Files"
	{"uploading takes a user token only, files:write, files", "POST", "/api/v1/files", user, "files:write", limits.Files},
	{"a file needs files:read, read", "GET", "/api/v1/files/{id}", botOrUser, "files:read", limits.Read},
	{"a file's content needs files:read, files", "GET", "/api/v1/files/{id}/content", botOrUser, "files:read", limits.Files},
	// docs/api.md "Users, runs and the installation"
	{"listing users needs users:read, read", "GET", "/api/v1/users", botOrUser, "users:read", limits.Read},
	{"users/me needs no scope, read", "GET", "/api/v1/users/me", botOrUser, "", limits.Read},
	{"a user needs users:read, read", "GET", "/api/v1/users/{id}", botOrUser, "users:read", limits.Read},
	// docs/api.md "Users, runs and the installation"
	// docs/api.md "Users, runs and the installation"
	{"a run: user tokens only, runs:read, read", "GET", "/api/v1/runs/{id}", user, "runs:read", limits.Read},
	{"the installation needs no scope, read", "GET", "/api/v1/installation", botOrUser, "", limits.Read},
	// docs/openapi: the descriptions are public
	{"the Web API's OpenAPI document takes no token and no bucket", "GET", "/api/v1/openapi.json", noToken, "", ""},
	{"the developer API's OpenAPI document takes no token and no bucket", "GET", "/api/v1/dev/openapi.json", noToken, "", ""},
	// docs/api.md "Incoming webhooks"
	{"a webhook post takes no token (the URL is the credential), webhook bucket", "POST", "/hooks/v1/{installationId}/{webhookId}/{secret}", noToken, "", limits.Webhook},
	{"a responseUrl post takes no token (the URL is the credential); the installation takes its response_url bucket", "POST", "/hooks/v1/responses/{installationId}/{token}", noToken, "", ""},
	// docs/api.md "Developer API"
	{"dev/me takes a developer token, developer bucket", "GET", "/api/v1/dev/me", developer, "", limits.Developer},
	{"dev/kits takes a developer token, developer bucket", "GET", "/api/v1/dev/kits", developer, "", limits.Developer},
	{"a Kit's detail takes a developer token, developer bucket", "GET", "/api/v1/dev/kits/{kitId}", developer, "", limits.Developer},
	{"validate takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/validate", developer, "", limits.Developer},
	{"uploading a version takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/versions", developer, "", limits.Developer},
	{"publishing takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/{kitId}/versions/{version}/publish", developer, "", limits.Developer},
	{"logs take a developer token, developer bucket", "GET", "/api/v1/dev/kits/{kitId}/logs", developer, "", limits.Developer},
	{"dev-install takes a developer token, developer bucket", "POST", "/api/v1/dev/sandbox/dev-install", developer, "", limits.Developer},
	// docs/decisions.md "Domains" and "Install links": developer API too.
	{"adding a domain takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/{kitId}/domains", developer, "", limits.Developer},
	{"verifying a domain takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/{kitId}/domains/{domain}/verify", developer, "", limits.Developer},
	{"removing a domain takes a developer token, developer bucket", "DELETE", "/api/v1/dev/kits/{kitId}/domains/{domain}", developer, "", limits.Developer},
	{"making an install link takes a developer token, developer bucket", "POST", "/api/v1/dev/kits/{kitId}/install-link", developer, "", limits.Developer},
	{"deleting an install link takes a developer token, developer bucket", "DELETE", "/api/v1/dev/kits/{kitId}/install-link", developer, "", limits.Developer},
	{"listing deliveries takes a developer token, developer bucket (docs/deliveries.md)", "GET", "/api/v1/dev/installations/{installationId}/deliveries", developer, "", limits.Developer},
	{"redelivering takes a developer token, developer bucket (docs/deliveries.md)", "POST", "/api/v1/dev/installations/{installationId}/deliveries/redeliver", developer, "", limits.Developer},
	{"a test event takes a developer token, developer bucket (kit trigger)", "POST", "/api/v1/dev/kits/{kitId}/test-events", developer, "", limits.Developer},
	// OPERATIONS.md 2: the operator token, no bucket.
	{"ops: create a workspace", "POST", "/ops/v1/workspaces", operator, "", ""},
	{"ops: create a user", "POST", "/ops/v1/workspaces/{wsId}/users", operator, "", ""},
	{"ops: deactivate a user", "DELETE", "/ops/v1/users/{userId}", operator, "", ""},
	{"ops: create a conversation", "POST", "/ops/v1/workspaces/{wsId}/conversations", operator, "", ""},
	{"ops: add a member", "POST", "/ops/v1/conversations/{id}/members", operator, "", ""},
	{"ops: remove a member", "DELETE", "/ops/v1/conversations/{id}/members/{userId}", operator, "", ""},
	{"ops: archive a conversation", "POST", "/ops/v1/conversations/{id}/archive", operator, "", ""},
	{"ops: create a session", "POST", "/ops/v1/users/{userId}/sessions", operator, "", ""},
	{"ops: end a session", "DELETE", "/ops/v1/sessions/{sessionId}", operator, "", ""},
	{"ops: create a developer token", "POST", "/ops/v1/users/{userId}/developer-tokens", operator, "", ""},
	{"ops: revoke a developer token", "DELETE", "/ops/v1/developer-tokens/{id}", operator, "", ""},
	{"ops: install a Kit", "POST", "/ops/v1/workspaces/{wsId}/installations", operator, "", ""},
	{"ops: uninstall", "DELETE", "/ops/v1/installations/{id}", operator, "", ""},
	{"ops: add the Kit bot to a channel", "POST", "/ops/v1/installations/{id}/channels", operator, "", ""},
	{"ops: remove the Kit bot from a channel", "DELETE", "/ops/v1/installations/{id}/channels/{conversationId}", operator, "", ""},
	{"ops: create a bot token", "POST", "/ops/v1/installations/{id}/bot-tokens", operator, "", ""},
	{"ops: revoke any token", "POST", "/ops/v1/tokens/revoke", operator, "", ""},
	{"ops: create a webhook", "POST", "/ops/v1/installations/{id}/webhooks", operator, "", ""},
	{"ops: revoke a webhook", "DELETE", "/ops/v1/webhooks/{id}", operator, "", ""},
	{"ops: a new client secret", "POST", "/ops/v1/kits/{kitId}/client-secret", operator, "", ""},
	{"ops: a new signing secret", "POST", "/ops/v1/kits/{kitId}/signing-secret", operator, "", ""},
	{"ops: suspend a Kit", "POST", "/ops/v1/kits/{kitId}/suspend", operator, "", ""},
	{"ops: resume a Kit", "POST", "/ops/v1/kits/{kitId}/resume", operator, "", ""},
	{"ops: advance the test clock", "POST", "/ops/v1/clock/advance", operator, "", ""},
	{"ops: the cluster view (OPERATIONS.md 7)", "GET", "/ops/v1/cluster", operator, "", ""},
	{"ops: a backup (OPERATIONS.md 8)", "GET", "/ops/v1/backup", operator, "", ""},
	// OPERATIONS.md 3: pages behind the session cookie, no bearer token.
	{"app: home", "GET", "/app/", noToken, "", ""},
	{"app: the sign-in form", "GET", "/app/signin", noToken, "", ""},
	{"app: sign in", "POST", "/app/signin", noToken, "", ""},
	{"app: sign out", "POST", "/app/signout", noToken, "", ""},
	{"app: the consent page", "GET", "/app/kits/authorize", noToken, "", ""},
	{"app: approve or deny", "POST", "/app/kits/authorize", noToken, "", ""},
	{"app: the install page", "GET", "/app/kits/install", noToken, "", ""},
	{"app: install", "POST", "/app/kits/install", noToken, "", ""},
	// docs/decisions.md "Home and API access pages": the home page's revocation and the API access page.
	{"app: revoke an authorization", "POST", "/app/authorizations/revoke", noToken, "", ""},
	{"app: the API access page", "GET", "/app/installations/{id}", noToken, "", ""},
	{"app: add the Kit bot to a channel", "POST", "/app/installations/{id}/channels", noToken, "", ""},
	{"app: remove the Kit bot from a channel", "POST", "/app/installations/{id}/channels/remove", noToken, "", ""},
	{"app: create a bot token", "POST", "/app/installations/{id}/bot-tokens", noToken, "", ""},
	{"app: revoke a bot token", "POST", "/app/installations/{id}/bot-tokens/revoke", noToken, "", ""},
	{"app: create a webhook", "POST", "/app/installations/{id}/webhooks", noToken, "", ""},
	{"app: revoke a webhook", "POST", "/app/installations/{id}/webhooks/revoke", noToken, "", ""},
	{"app: generate a client secret", "POST", "/app/installations/{id}/client-secret", noToken, "", ""},
	{"app: rotate the signing secret", "POST", "/app/installations/{id}/signing-secret", noToken, "", ""},
	{"app: the uninstall confirmation", "GET", "/app/installations/{id}/uninstall", noToken, "", ""},
	{"app: uninstall", "POST", "/app/installations/{id}/uninstall", noToken, "", ""},

	// OPERATIONS.md 6: member actions, JSON behind the session cookie.
	{"member: the session and its CSRF token", "GET", "/app/api/session", signedIn, "", ""},
	{"member: a slash command (its bucket is the installation's, taken by the handler)", "POST", "/app/api/commands", signedIn, "", ""},
	{"member: an interaction (its bucket is the installation's, taken by the handler)", "POST", "/app/api/interactions", signedIn, "", ""},
	{"member: a tool call", "POST", "/app/api/tools/invoke", signedIn, "", ""},

	// Metrics behind the operator token (docs/decisions.md "Metrics").
	{"metrics take the operator token, no bucket", "GET", "/metrics", operator, "", ""},

	// OPERATIONS.md sections 1 and 8: probes without a credential, any method.
	{"liveness takes no token", anyMethod, "/livez", noToken, "", ""},
	{"readiness takes no token", anyMethod, "/readyz", noToken, "", ""},
	{"healthz, readiness's older name, takes no token", anyMethod, "/healthz", noToken, "", ""},
	{"the root redirects to the app without a token", "GET", "/", noToken, "", ""},
}

func TestRoutesFollowTheSpec(t *testing.T) {
	for _, sr := range specRoutes {
		t.Run(sr.rule, func(t *testing.T) {
			var found []*route
			for i := range routes {
				if routes[i].method == sr.method && routes[i].path == sr.path {
					found = append(found, &routes[i])
				}
			}
			if len(found) != 1 {
				t.Fatalf("%s %s: %d rows, want 1", sr.method, sr.path, len(found))
			}
			rt := found[0]
			if rt.tokens != sr.tokens || rt.scope != sr.scope || rt.family != sr.family {
				t.Fatalf("%s %s: tokens %04b scope %q family %q, want %04b %q %q",
					sr.method, sr.path, rt.tokens, rt.scope, rt.family, sr.tokens, sr.scope, sr.family)
			}
		})
	}
	t.Run("every route is in the spec", func(t *testing.T) {
		for _, rt := range routes {
			covered := false
			for _, sr := range specRoutes {
				covered = covered || sr.method == rt.method && sr.path == rt.path
			}
			if !covered {
				t.Errorf("%s %s is not in specRoutes", rt.method, rt.path)
			}
		}
	})
}

func TestRouteTableIsWellFormed(t *testing.T) {
	for i, rt := range routes {
		name := rt.method + " " + rt.path
		if !strings.HasPrefix(rt.path, hostPrefix[rt.host]) {
			t.Errorf("%s: not under its host's prefix %q", name, hostPrefix[rt.host])
		}
		if (rt.host == hostDev) != strings.HasPrefix(rt.path, "/api/v1/dev/") {
			t.Errorf("%s: the developer host is /api/v1/dev", name)
		}
		wantTokens := map[host]tokens{hostDev: developer, hostOps: operator, hostHooks: noToken, hostApp: noToken, hostMetrics: operator, hostMember: signedIn, hostHealth: noToken, hostRoot: noToken}
		public := rt.method == "GET" && strings.HasSuffix(rt.path, "/openapi.json") // the API descriptions
		if want, ok := wantTokens[rt.host]; ok && rt.tokens != want && !public {
			t.Errorf("%s: tokens %04b, want %04b for its host", name, rt.tokens, want)
		}
		if (rt.host == hostApp) != (rt.page != nil) || (rt.page != nil) == (rt.handle != nil) {
			t.Errorf("%s: the app host's rows have a page, the others a handler", name)
		}
		if strings.Count(rt.path, "{") > maxParams {
			t.Errorf("%s: more than %d parameters", name, maxParams)
		}
		if rt.body <= 0 {
			t.Errorf("%s: no body limit", name)
		}
		// A row that an earlier row of the same host and method matches
		// whatever its parameters are would never be reached.
		var at [maxParams]span
		for _, earlier := range routes[:i] {
			if earlier.host != rt.host || earlier.method != rt.method {
				continue
			}
			pattern := []byte(rt.path[len(hostPrefix[rt.host]):])
			if _, ok := match(earlier.path[len(hostPrefix[earlier.host]):], pattern, &at); ok {
				t.Errorf("%s: the earlier row %s %s takes all its requests", name, earlier.method, earlier.path)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		rule, method, path string
		host               host
		route              string // the path of the row; "" for none
		params             []string
	}{
		{"a Web API route", "POST", "/api/v1/messages", hostAPI, "/api/v1/messages", nil},
		{"a trailing slash is another path", "POST", "/api/v1/messages/", hostAPI, "", nil},
		{"a trailing slash after a literal is no route", "GET", "/api/v1/users/me/", hostAPI, "", nil},
		{"a trailing slash after a list is an empty id", "GET", "/api/v1/users/", hostAPI, "/api/v1/users/{id}", []string{""}},
		{"a developer route's trailing slash is no route", "GET", "/api/v1/dev/me/", hostDev, "", nil},
		{"an operator route's trailing slash is no route", "POST", "/ops/v1/workspaces/", hostOps, "", nil},
		{"a webhook URL's trailing slash is no route", "POST", "/hooks/v1/i/w/s/", hostHooks, "", nil},
		{"an app page takes a trailing slash", "GET", "/app/signin/", hostApp, "/app/signin", nil},
		{"a parameter is one segment", "GET", "/api/v1/messages/m1/replies", hostAPI, "/api/v1/messages/{id}/replies", []string{"m1"}},
		{"fasthttp folds a double slash", "GET", "/api/v1/conversations//members", hostAPI, "/api/v1/conversations/{id}", []string{"members"}},
		{"a literal comes before a parameter", "GET", "/api/v1/users/me", hostAPI, "/api/v1/users/me", nil},
		{"another method is no route", "PUT", "/api/v1/messages", hostAPI, "", nil},
		{"HEAD is the GET route", "HEAD", "/api/v1/users/me", hostAPI, "/api/v1/users/me", nil},
		{"HEAD of a path GET does not take is no route", "HEAD", "/api/v1/messages", hostAPI, "", nil},
		{"HEAD of an app page is its GET", "HEAD", "/app/signin", hostApp, "/app/signin", nil},
		{"a longer path is no route", "GET", "/api/v1/messages/m1/replies/x", hostAPI, "", nil},
		{"/api/v1/dev is the developer host", "GET", "/api/v1/dev/kits/k1", hostDev, "/api/v1/dev/kits/{kitId}", []string{"k1"}},
		{"a responseUrl is not a webhook URL", "POST", "/hooks/v1/responses/i/t", hostHooks, "/hooks/v1/responses/{installationId}/{token}", []string{"i", "t"}},
		{"a webhook URL has three parameters", "POST", "/hooks/v1/i/w/s", hostHooks, "/hooks/v1/{installationId}/{webhookId}/{secret}", []string{"i", "w", "s"}},
		{"an operator route", "DELETE", "/ops/v1/installations/i/channels/c", hostOps, "/ops/v1/installations/{id}/channels/{conversationId}", []string{"i", "c"}},
		{"/app is the app's home", "GET", "/app", hostApp, "/app/", nil},
		{"/app// is the app's home", "GET", "/app//", hostApp, "/app/", nil},
		{"/app//signin is the sign-in form", "GET", "/app//signin", hostApp, "/app/signin", nil},
		{"/app/api/ is the member actions' host", "GET", "/app/api/session", hostMember, "/app/api/session", nil},
		{"/healthz takes any method", "HEAD", "/healthz", hostHealth, "/healthz", nil},
		{"/livez", "GET", "/livez", hostHealth, "/livez", nil},
		{"/readyz takes any method", "POST", "/readyz", hostHealth, "/readyz", nil},
		{"/livez/ is no host", "GET", "/livez/", hostNone, "", nil},
		{"/ is the root", "GET", "/", hostRoot, "/", nil},
		{"/ takes GET only", "POST", "/", hostRoot, "", nil},
		{"/metrics", "GET", "/metrics", hostMetrics, "/metrics", nil},
		{"/metrics/x is no host", "GET", "/metrics/x", hostNone, "", nil},
		{"/api/v1 without a slash is no host", "GET", "/api/v1", hostNone, "", nil},
		{"/apps is no host", "GET", "/apps", hostNone, "", nil},
		{"a .. segment is no route, not the route it resolves to", "DELETE", "/api/v1/messages/../conversations/c1/bot", hostNone, "", nil},
		{"a . segment is no route", "GET", "/api/v1/./users/me", hostNone, "", nil},
		{"a .. segment at the end is no route", "GET", "/api/v1/users/me/..", hostNone, "", nil},
		{"an encoded slash is no route", "GET", "/api/v1/conversations/x%2F..%2Fc1", hostNone, "", nil},
		{"an encoded slash in lower case is no route", "GET", "/api/v1/conversations/x%2f..%2fc1", hostNone, "", nil},
		{"an encoded dot is no route", "GET", "/api/v1/messages/%2e%2e/conversations/c1", hostNone, "", nil},
		{"an encoded backslash is no route", "GET", "/api/v1/conversations/x%5C..%5Cc1", hostNone, "", nil},
		{"a dot inside a segment is plain", "POST", "/api/v1/dev/kits/k1/versions/1.0.0/publish", hostDev, "/api/v1/dev/kits/{kitId}/versions/{version}/publish", []string{"k1", "1.0.0"}},
		{"a segment that begins with dots is plain", "GET", "/api/v1/users/..x", hostAPI, "/api/v1/users/{id}", []string{"..x"}},
		{"an app page's dot segment is no route either", "GET", "/app/../app/signin", hostNone, "", nil},
		{"a webhook URL's dot segment is the hooks host's 404", "POST", "/hooks/v1/i/w/../s", hostHooks, "", nil},
		{"a webhook URL's encoded slash is the hooks host's 404", "POST", "/hooks/v1/i/w%2Fs/x", hostHooks, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(tt.method)
			ctx.Request.SetRequestURI(tt.path)
			got := resolve(&ctx)
			if got.host != tt.host {
				t.Fatalf("host %d, want %d", got.host, tt.host)
			}
			path := ""
			if got.route != nil {
				path = got.route.path
			}
			if path != tt.route {
				t.Fatalf("route %q, want %q", path, tt.route)
			}
			var params []string
			for _, a := range got.at[:got.n] {
				params = append(params, string(got.rest[a.from:a.to]))
			}
			if strings.Join(params, ",") != strings.Join(tt.params, ",") || len(params) != len(tt.params) {
				t.Fatalf("params %q, want %q", params, tt.params)
			}
		})
	}
}

// The hot paths find their route without allocating.
func TestResolveAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	for _, path := range []string{"/api/v1/messages", "/hooks/v1/0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c/0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8d/secret"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(path)
		if n := testing.AllocsPerRun(100, func() {
			if resolve(&ctx).route == nil {
				t.Fatalf("%s: no route", path)
			}
		}); n != 0 {
			t.Errorf("POST %s: %v allocations, want 0", path, n)
		}
	}
}

// The unauthenticated routes that a scanner could hammer spend a bucket per
// source address when they fail (docs/decisions.md "Rate
// limits"), and only they; each bucket the table names says which answers
// are failures and has a rate in the spec table.
func TestPerAddressBuckets(t *testing.T) {
	want := map[string]limits.Name{
		"POST /api/v1/oauth/kit.access":                        limits.KitAccessFailure,
		"POST /hooks/v1/{installationId}/{webhookId}/{secret}": limits.WebhookNotFound,
		"POST /hooks/v1/responses/{installationId}/{token}":    limits.WebhookNotFound,
		"POST /app/signin":                                     limits.SignInFailure,
	}
	for _, rt := range routes {
		name := rt.method + " " + rt.path
		if rt.peers != want[name] {
			t.Errorf("%s: per-address bucket %q, want %q", name, rt.peers, want[name])
		}
		if rt.peers == "" {
			continue
		}
		if _, ok := peerFailures[rt.peers]; !ok {
			t.Errorf("%s: no rule says which answers spend %q", name, rt.peers)
		}
		if _, ok := limits.Spec()[rt.peers]; !ok {
			t.Errorf("%s: %q has no rate", name, rt.peers)
		}
	}
}
