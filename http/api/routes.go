package api

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/limits"
)

// routes is every route of every host: who may call it (tokens, scope), the
// bucket it spends (family), the per-address bucket its failures spend
// (peers), its body limit and its handler. serve does the
// checks a row names, in the order of docs/api.md "Authentication" (token, type, scope), before the
// handler runs; the handler checks the rest (path ids, the idempotency key,
// the body) in its own order. Rows are matched in order: a literal segment
// is listed before a parameter that would also match it (/users/me before
// /users/{id}).
var routes = [...]route{
	// method, path, host, tokens, scope, family, peers, body, handler, page

	// Web API (docs/api.md "Endpoints").
	{"GET", "/api/v1/auth/test", hostAPI, botOrUser, "", limits.Read, "", maxJSONBody, (*Server).authTest, nil},
	{"POST", "/api/v1/auth/rotate", hostAPI, bot, "", limits.Write, "", maxJSONBody, (*Server).rotateBotToken, nil},
	{"POST", "/api/v1/oauth/kit.access", hostAPI, noToken, "", "", limits.KitAccessFailure, maxJSONBody, (*Server).kitAccess, nil},
	{"GET", "/api/v1/conversations", hostAPI, botOrUser, "conversations:read", limits.Read, "", maxJSONBody, (*Server).listConversations, nil},
	{"GET", "/api/v1/conversations/{id}", hostAPI, botOrUser, "conversations:read", limits.Read, "", maxJSONBody, (*Server).getConversation, nil},
	{"GET", "/api/v1/conversations/{id}/members", hostAPI, botOrUser, "conversations:read", limits.Read, "", maxJSONBody, (*Server).listMembers, nil},
	{"GET", "/api/v1/conversations/{id}/messages", hostAPI, botOrUser, "messages:read", limits.Read, "", maxJSONBody, (*Server).listMessages, nil},
	{"POST", "/api/v1/messages", hostAPI, botOrUser, "messages:write", limits.Write, "", maxJSONBody, (*Server).postMessage, nil},
	{"GET", "/api/v1/messages/{id}", hostAPI, botOrUser, "messages:read", limits.Read, "", maxJSONBody, (*Server).getMessage, nil},
	{"PATCH", "/api/v1/messages/{id}", hostAPI, botOrUser, "messages:write", limits.Write, "", maxJSONBody, (*Server).editMessage, nil},
	{"DELETE", "/api/v1/messages/{id}", hostAPI, botOrUser, "messages:write", limits.Write, "", maxJSONBody, (*Server).deleteMessage, nil},
	{"GET", "/api/v1/messages/{id}/replies", hostAPI, botOrUser, "messages:read", limits.Read, "", maxJSONBody, (*Server).listReplies, nil},
	{"POST", "/api/v1/reactions", hostAPI, user, "reactions:write", limits.Write, "", maxJSONBody, (*Server).addReaction, nil},
	{"DELETE", "/api/v1/reactions", hostAPI, user, "reactions:write", limits.Write, "", maxJSONBody, (*Server).removeReaction, nil},
	{"POST", "/api/v1/files", hostAPI, user, "files:write", limits.Files, "", maxFilesBody, (*Server).uploadFile, nil},
	{"GET", "/api/v1/files/{id}", hostAPI, botOrUser, "files:read", limits.Read, "", maxJSONBody, (*Server).getFile, nil},
	{"GET", "/api/v1/files/{id}/content", hostAPI, botOrUser, "files:read", limits.Files, "", maxJSONBody, (*Server).fileContent, nil},
	{"GET", "/api/v1/users", hostAPI, botOrUser, "users:read", limits.Read, "", maxJSONBody, (*Server).listUsers, nil},
	{"GET", "/api/v1/users/me", hostAPI, botOrUser, "", limits.Read, "", maxJSONBody, (*Server).usersMe, nil},
	{"GET", "/api/v1/users/{id}", hostAPI, botOrUser, "users:read", limits.Read, "", maxJSONBody, (*Server).getUser, nil},
	{"GET", "/api/v1/runs/{id}", hostAPI, user, "runs:read", limits.Read, "", maxJSONBody, (*Server).getRun, nil},
	{"GET", "/api/v1/installation", hostAPI, botOrUser, "", limits.Read, "", maxJSONBody, (*Server).getInstallation, nil},
	{"GET", "/api/v1/openapi.json", hostAPI, noToken, "", "", "", maxJSONBody, (*Server).webAPIDocument, nil},

	// Developer API (docs/api.md "Developer API"; domains and install links:
	// docs/decisions.md).
	{"GET", "/api/v1/dev/me", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).devMe, nil},
	{"GET", "/api/v1/dev/kits", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).listKits, nil},
	{"POST", "/api/v1/dev/kits/validate", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).validateManifest, nil},
	{"POST", "/api/v1/dev/kits/versions", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).uploadVersion, nil},
	{"GET", "/api/v1/dev/kits/{kitId}", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).kitDetail, nil},
	{"GET", "/api/v1/dev/kits/{kitId}/logs", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).kitLogs, nil},
	{"POST", "/api/v1/dev/kits/{kitId}/versions/{version}/publish", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).publishVersion, nil},
	{"POST", "/api/v1/dev/kits/{kitId}/domains", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).addDomain, nil},
	{"POST", "/api/v1/dev/kits/{kitId}/domains/{domain}/verify", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).verifyDomain, nil},
	{"DELETE", "/api/v1/dev/kits/{kitId}/domains/{domain}", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).removeDomain, nil},
	{"POST", "/api/v1/dev/kits/{kitId}/install-link", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).createInstallLink, nil},
	{"DELETE", "/api/v1/dev/kits/{kitId}/install-link", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).deleteInstallLink, nil},
	{"POST", "/api/v1/dev/kits/{kitId}/test-events", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).triggerEvent, nil},
	{"GET", "/api/v1/dev/installations/{installationId}/deliveries", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).listDeliveries, nil},
	{"POST", "/api/v1/dev/installations/{installationId}/deliveries/redeliver", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).redeliver, nil},
	{"POST", "/api/v1/dev/sandbox/dev-install", hostDev, developer, "", limits.Developer, "", maxJSONBody, (*Server).devInstall, nil},
	{"GET", "/api/v1/dev/openapi.json", hostDev, noToken, "", "", "", maxJSONBody, (*Server).devAPIDocument, nil},

	// Incoming webhooks (docs/api.md "Incoming webhooks"): the URL is the credential, and the
	// webhook actor takes the bucket with the post.
	// A responseUrl (docs/deliveries.md "Member actions"): listed before
	// the webhook row, whose pattern it would also match.
	{"POST", "/hooks/v1/responses/{installationId}/{token}", hostHooks, noToken, "", "", limits.WebhookNotFound, maxHookBody, (*Server).responsePost, nil},
	{"POST", "/hooks/v1/{installationId}/{webhookId}/{secret}", hostHooks, noToken, "", limits.Webhook, limits.WebhookNotFound, maxHookBody, (*Server).hookPost, nil},

	// Operator API (OPERATIONS.md 2): the operator token is checked before
	// the route is looked up.
	{"POST", "/ops/v1/workspaces", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateWorkspace, nil},
	{"POST", "/ops/v1/workspaces/{wsId}/users", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateUser, nil},
	{"POST", "/ops/v1/workspaces/{wsId}/conversations", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateConversation, nil},
	{"POST", "/ops/v1/workspaces/{wsId}/installations", hostOps, operator, "", "", "", maxJSONBody, (*Server).opInstall, nil},
	{"DELETE", "/ops/v1/users/{userId}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opDeactivateUser, nil},
	{"POST", "/ops/v1/users/{userId}/sessions", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateSession, nil},
	{"POST", "/ops/v1/users/{userId}/developer-tokens", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateDeveloperToken, nil},
	{"DELETE", "/ops/v1/sessions/{sessionId}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opEndSession, nil},
	{"DELETE", "/ops/v1/developer-tokens/{id}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRevokeDeveloperToken, nil},
	{"POST", "/ops/v1/conversations/{id}/members", hostOps, operator, "", "", "", maxJSONBody, (*Server).opAddMember, nil},
	{"DELETE", "/ops/v1/conversations/{id}/members/{userId}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRemoveMember, nil},
	{"POST", "/ops/v1/conversations/{id}/archive", hostOps, operator, "", "", "", maxJSONBody, (*Server).opArchive, nil},
	{"DELETE", "/ops/v1/installations/{id}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opUninstall, nil},
	{"POST", "/ops/v1/installations/{id}/channels", hostOps, operator, "", "", "", maxJSONBody, (*Server).opAddChannel, nil},
	{"DELETE", "/ops/v1/installations/{id}/channels/{conversationId}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRemoveChannel, nil},
	{"POST", "/ops/v1/installations/{id}/bot-tokens", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateBotToken, nil},
	{"POST", "/ops/v1/installations/{id}/webhooks", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCreateWebhook, nil},
	{"DELETE", "/ops/v1/webhooks/{id}", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRevokeWebhook, nil},
	{"POST", "/ops/v1/kits/{kitId}/client-secret", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRotateClientSecret, nil},
	{"POST", "/ops/v1/kits/{kitId}/signing-secret", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRotateSigningSecret, nil},
	{"POST", "/ops/v1/kits/{kitId}/suspend", hostOps, operator, "", "", "", maxJSONBody, (*Server).opSuspendKit, nil},
	{"POST", "/ops/v1/kits/{kitId}/resume", hostOps, operator, "", "", "", maxJSONBody, (*Server).opResumeKit, nil},
	{"POST", "/ops/v1/tokens/revoke", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRevoke, nil},
	{"POST", "/ops/v1/clock/advance", hostOps, operator, "", "", "", maxJSONBody, (*Server).opAdvanceClock, nil},
	{"GET", "/ops/v1/cluster", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCluster, nil},
	{"GET", "/ops/v1/backup", hostOps, operator, "", "", "", maxJSONBody, (*Server).opBackup, nil},

	// App host (OPERATIONS.md 3): HTML pages behind the session cookie,
	// which each page checks itself; their errors are pages too.
	{"GET", "/app/", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Home},
	{"GET", "/app/signin", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SignInForm},
	{"POST", "/app/signin", hostApp, noToken, "", "", limits.SignInFailure, maxJSONBody, nil, (*app.Server).SignIn},
	{"POST", "/app/signout", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SignOut},
	{"GET", "/app/kits/authorize", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).AuthorizePage},
	{"POST", "/app/kits/authorize", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Authorize},
	{"GET", "/app/kits/install", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).InstallPage},
	{"POST", "/app/kits/install", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Install},
	// The member's home page and the API access page of an installation
	// (docs/decisions.md "Home and API access pages"); {id} reaches the page as its app.PathParam.
	{"POST", "/app/authorizations/revoke", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).RevokeAuthorization},
	{"GET", "/app/installations/{id}", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).AccessPage},
	{"POST", "/app/installations/{id}/channels", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).AddChannel},
	{"POST", "/app/installations/{id}/channels/remove", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).RemoveChannel},
	{"POST", "/app/installations/{id}/bot-tokens", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).CreateBotToken},
	{"POST", "/app/installations/{id}/bot-tokens/revoke", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).RevokeBotToken},
	{"POST", "/app/installations/{id}/webhooks", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).CreateWebhook},
	{"POST", "/app/installations/{id}/webhooks/revoke", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).RevokeWebhook},
	{"POST", "/app/installations/{id}/client-secret", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).ClientSecret},
	{"POST", "/app/installations/{id}/signing-secret", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SigningSecret},
	{"GET", "/app/installations/{id}/uninstall", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).UninstallPage},
	{"POST", "/app/installations/{id}/uninstall", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Uninstall},

	// Member actions (OPERATIONS.md section 6): JSON routes of the app
	// host behind the session cookie, and X-CSRF-Token on every write.
	{"GET", "/app/api/session", hostMember, signedIn, "", "", "", maxJSONBody, (*Server).memberSession, nil},
	// The member's buckets (interactions, slash_commands) are the
	// installation's, which is known only once the body is read: the
	// handler takes them (actors/installation_actions.go).
	{"POST", "/app/api/commands", hostMember, signedIn, "", "", "", maxJSONBody, (*Server).memberCommand, nil},
	{"POST", "/app/api/interactions", hostMember, signedIn, "", "", "", maxJSONBody, (*Server).memberInteraction, nil},
	// A tool call spends the member's interactions bucket, which the
	// installation takes (docs/deliveries.md "Tool calls and runs").
	{"POST", "/app/api/tools/invoke", hostMember, signedIn, "", "", "", maxJSONBody, (*Server).invokeTool, nil},

	// Metrics in the Prometheus text format (docs/decisions.md
	// "Metrics"): the operator token, checked before the route is looked
	// up as on the operator API.
	{"GET", "/metrics", hostMetrics, operator, "", "", "", maxJSONBody, (*Server).metricsPage, nil},

	// Probes (OPERATIONS.md sections 1 and 8): no credential, and any
	// method, as /healthz has always answered.
	{anyMethod, "/livez", hostHealth, noToken, "", "", "", maxJSONBody, (*Server).livez, nil},
	{anyMethod, "/readyz", hostHealth, noToken, "", "", "", maxJSONBody, (*Server).readyz, nil},
	{anyMethod, "/healthz", hostHealth, noToken, "", "", "", maxJSONBody, (*Server).readyz, nil},

	// The root sends whoever opens the server in a browser to the app
	// (OPERATIONS.md section 8).
	{"GET", "/", hostRoot, noToken, "", "", "", maxJSONBody, (*Server).rootRedirect, nil},
}

// anyMethod is the method of a row that takes every method.
const anyMethod = "*"

// route is one row of routes.
type route struct {
	method string
	path   string // from the root; {name} is one path parameter
	host   host
	tokens tokens      // who may call it
	scope  string      // "": none needed
	family limits.Name // the bucket one call spends; "": none
	peers  limits.Name // the per-source-address bucket its failures spend (peers.go); "": none
	body   int         // the largest JSON body decode takes (413 above it)
	handle func(*Server, call) (reply, error)
	page   func(*app.Server, *fasthttp.RequestCtx) // the app host's pages answer themselves
}

// host is the surface a route belongs to. Each authenticates in its own way
// and answers a path it does not know in its own way.
type host uint8

const (
	hostNone    host = iota // no host: 404 route
	hostAPI                 // {base_url}: bot and user tokens
	hostDev                 // {base_url}/dev: developer tokens
	hostHooks               // {hooks_url}: the URL is the credential
	hostOps                 // the operator API: the operator token
	hostApp                 // {app_url}/app: HTML pages and a session cookie
	hostHealth              // /livez, /readyz, /healthz: no credential
	hostMetrics             // /metrics: the operator or the metrics token
	hostMember              // {app_url}/app/api: JSON member actions, the session cookie
	hostRoot                // /: a redirect to the app
)

// hostPrefix is what every path of a host starts with; the routes of a
// host are matched on the rest. The Web API and the developer API share
// theirs.
var hostPrefix = [...]string{
	hostAPI:    "/api/v1/",
	hostDev:    "/api/v1/",
	hostHooks:  "/hooks/",
	hostOps:    "/ops/v1/",
	hostApp:    "/app/",
	hostMember: "/app/api/",
	// Their paths are the prefix without its slash (resolve).
	hostMetrics: "/",
	hostHealth:  "/",
	hostRoot:    "/",
}

// tokens is a set of the credentials a route accepts.
type tokens uint8

const (
	bot tokens = 1 << iota
	user
	developer
	operator
	// signedIn: the session cookie of a signed-in member, and on every
	// method but GET the X-CSRF-Token of that session (member.go).
	signedIn

	botOrUser = bot | user
	// noToken: the route checks its own credential (the client secret in
	// the body, the webhook URL, the session cookie) or needs none.
	noToken tokens = 0
)

// maxParams is the most path parameters a route has.
const maxParams = 3

// paramNames is the names of the path parameters of each row of routes,
// in the order of its pattern: the route table is their one source.
var paramNames = func() (names [len(routes)][maxParams]string) {
	for i, rt := range routes {
		n := 0
		for _, seg := range strings.Split(rt.path, "/") {
			name, ok := strings.CutPrefix(seg, "{")
			if !ok {
				continue
			}
			name, ok = strings.CutSuffix(name, "}")
			if !ok || name == "" || n == maxParams || slices.Contains(names[i][:n], name) {
				panic("api: route " + rt.method + " " + rt.path + ": a malformed, repeated or extra parameter {" + name + "}")
			}
			names[i][n] = name
			n++
		}
	}
	return names
}()
