package api

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// routes is every route of every host: who may call it (tokens, scope), the
// bucket it spends (family), the per-address bucket its failures spend
// (peers), its body limit and its handler. serve does the
// checks a row names, in the order of SPEC.md section 5, before the
// handler runs; the handler checks the rest (path ids, the idempotency key,
// the body) in its own order. Rows are matched in order: a literal segment
// is listed before a parameter that would also match it (/users/me before
// /users/{id}).
var routes = [...]route{
	// method, path, host, tokens, scope, family, peers, body, handler, page

	// Web API (SPEC.md 4.1-4.8).
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

	// Developer API (SPEC.md 4.10; domains and install links:
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

	// Incoming webhooks (SPEC.md 4.9): the URL is the credential, and the
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
	{"POST", "/ops/v1/tokens/revoke", hostOps, operator, "", "", "", maxJSONBody, (*Server).opRevoke, nil},
	{"POST", "/ops/v1/clock/advance", hostOps, operator, "", "", "", maxJSONBody, (*Server).opAdvanceClock, nil},
	{"GET", "/ops/v1/cluster", hostOps, operator, "", "", "", maxJSONBody, (*Server).opCluster, nil},
	{"GET", "/ops/v1/backup", hostOps, operator, "", "", "", maxJSONBody, (*Server).opBackup, nil},

	// App host (OPERATIONS.md 3): HTML pages behind the session cookie,
	// which each page checks itself; their errors are pages too.
	{"GET", "/app/", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Home},
	{"GET", "/app/signin", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SignInForm},
	{"POST", "/app/signin", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SignIn},
	{"POST", "/app/signout", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).SignOut},
	{"GET", "/app/kits/authorize", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).AuthorizePage},
	{"POST", "/app/kits/authorize", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Authorize},
	{"GET", "/app/kits/install", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).InstallPage},
	{"POST", "/app/kits/install", hostApp, noToken, "", "", "", maxJSONBody, nil, (*app.Server).Install},
	// The member's home page and the API access page of an installation
	// (issue 18); {id} reaches the page as its app.PathParam.
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

	// Metrics in the Prometheus text format (issue 16; docs/decisions.md
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

// span is where a path parameter is in the path.
type span struct{ from, to int }

// call is what a handler gets: the call, the principal of its bearer
// token (nil on routes without one) and the path parameters, which it
// reads by name (param).
type call struct {
	ctx    *fasthttp.RequestCtx
	p      *actors.Principal
	member *actors.WebSession // member actions: the signed-in member
	names  *[maxParams]string // the parameters' names, of the route's pattern
	params [maxParams]string  // their values, in the same order
	body   int                // the route's body limit
}

// param is the value of the path parameter {name} of the route's pattern,
// as net/http's Request.PathValue reads one. A name the pattern lacks is a
// mistake in the code, not in the request: it panics rather than read as
// "", and TestHandlersReadTheirRoutesParameters finds it before a request
// can.
func (in call) param(name string) string {
	if in.names != nil {
		for i, n := range in.names {
			if n == name && n != "" {
				return in.params[i]
			}
		}
	}
	panic("api: the route has no path parameter {" + name + "}")
}

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

// decode reads the route's JSON object body into v (decode).
func (in call) decode(v any) error { return decode(in.ctx, v, in.body, false) }

// decodeOptional is decode that takes an empty body as {}.
func (in call) decodeOptional(v any) error { return decode(in.ctx, v, in.body, true) }

// reply is a handler's answer: a value encoded as JSON, or a JSON body the
// handler built in the response's own buffer (bodyBuffer), the hot answers'
// way. It is ignored when the handler returns an error.
type reply struct {
	status int
	json   any
	raw    []byte
}

// answered is the return of a handler that wrote the response itself (a
// stream of bytes, a refused body).
func answered() (reply, error) { return reply{}, nil }

func jsonReply(status int, v any) (reply, error) { return reply{status: status, json: v}, nil }

func rawReply(status int, body []byte) (reply, error) { return reply{status: status, raw: body}, nil }

var okBody = struct {
	OK bool `json:"ok"`
}{true}

// okOr answers {"ok":true} unless err.
func okOr(err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, okBody)
}

// target is where a request goes: its host, the row of its route (nil for
// a path the host does not know) and its parameters within rest.
type target struct {
	host  host
	route *route
	row   int    // the index of route in routes
	rest  []byte // the path after the host's prefix, without a trailing slash
	at    [maxParams]span
	n     int // parameters in at
}

// resolve finds the target of a request. It only reads the request.
func resolve(ctx *fasthttp.RequestCtx) target {
	path := ctx.Path()
	var t target
	switch {
	case hasPrefix(path, "/api/v1/"):
		t.host = hostAPI
		if rest := path[len("/api/v1/"):]; hasPrefix(rest, "dev/") || string(rest) == "dev" {
			t.host = hostDev
		}
	case hasPrefix(path, "/ops/v1/"):
		t.host = hostOps
	case hasPrefix(path, "/hooks/"):
		t.host = hostHooks
	case hasPrefix(path, "/app/api/"):
		t.host = hostMember
	case string(path) == "/app" || hasPrefix(path, "/app/"):
		t.host = hostApp
	case string(path) == "/healthz" || string(path) == "/livez" || string(path) == "/readyz":
		t.host = hostHealth
	case string(path) == "/metrics":
		t.host = hostMetrics
	case string(path) == "/":
		t.host = hostRoot
	default:
		return t
	}
	if t.host == hostApp {
		// /app//x is /app/x, and /app is /app/.
		t.rest = path[len("/app"):]
		if len(t.rest) > 0 {
			t.rest = t.rest[1:]
		}
	} else {
		t.rest = path[len(hostPrefix[t.host]):]
	}
	if n := len(t.rest); n > 0 && t.rest[n-1] == '/' {
		t.rest = t.rest[:n-1]
	}
	method := ctx.Method()
	for i := range routes {
		rt := &routes[i]
		if rt.host != t.host || string(method) != rt.method && rt.method != anyMethod {
			continue
		}
		if n, ok := match(rt.path[len(hostPrefix[rt.host]):], t.rest, &t.at); ok {
			t.route, t.row, t.n = rt, i, n
			break
		}
	}
	return t
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// match reports whether rest fits pattern, segment by segment, and notes
// where the parameters are. A parameter matches any one segment, an empty
// one too (its handler then answers what an id that names nothing gets).
func match(pattern string, rest []byte, at *[maxParams]span) (int, bool) {
	if pattern == "" || len(rest) == 0 {
		return 0, pattern == "" && len(rest) == 0
	}
	n, from := 0, 0
	for pattern != "" {
		if from > len(rest) {
			return 0, false // fewer segments than the pattern
		}
		var p string
		p, pattern, _ = strings.Cut(pattern, "/")
		to := len(rest)
		if k := bytes.IndexByte(rest[from:], '/'); k >= 0 {
			to = from + k
		}
		if p[0] == '{' {
			at[n] = span{from, to}
			n++
		} else if string(rest[from:to]) != p {
			return 0, false
		}
		from = to + 1
	}
	return n, from == len(rest)+1
}

// handle is the server's handler: it serves the request, then counts it
// and logs its line (record).
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	r := served{client: s.clientOf(ctx)}
	s.dispatch(ctx, &r)
	s.record(ctx, &r)
}

// served is what record needs to know of a request once it is answered.
type served struct {
	t      target
	p      *actors.Principal // nil unless a bearer token was authenticated
	client netip.Addr        // who sent it (clientOf)
}

// dispatch finds the route, reads the body the way the route takes it,
// then serves the route on its host.
func (s *Server) dispatch(ctx *fasthttp.RequestCtx, r *served) {
	if len(ctx.Request.Header.RequestURI()) > maxURL {
		// Its body, if any, is not read: the connection closes.
		s.fail(ctx, kiterr.New(kiterr.URITooLong, "request URL is longer than "+strconv.Itoa(maxURL)+" bytes"))
		ctx.SetConnectionClose()
		return
	}
	r.t = resolve(ctx)
	t := &r.t
	if ctx.Request.IsBodyStream() {
		streamed, ok := s.readBody(ctx, t.route)
		if !ok {
			return
		}
		if streamed {
			defer drainBody(ctx)
		}
	}
	if l := s.peerLimitOf(t); l != nil && l.table != nil {
		k, refused := s.peerRefused(ctx, l, r.client)
		if refused {
			return
		}
		defer s.peerAnswered(ctx, l, k)
	}
	switch t.host {
	case hostNone:
		s.fail(ctx, kiterr.Absent("route"))
	case hostApp:
		if t.route == nil {
			s.app.NotFound(ctx)
			return
		}
		if t.n > 0 {
			ctx.SetUserValue(app.PathParam, string(t.rest[t.at[0].from:t.at[0].to]))
		}
		t.route.page(s.app, ctx)
	case hostHooks:
		if t.route == nil {
			// Every way a webhook URL is unknown answers alike (hookPost).
			s.fail(ctx, actors.ErrHookNotFound)
			return
		}
		s.serve(ctx, t, nil)
	case hostMember:
		if t.route == nil {
			s.fail(ctx, kiterr.Absent("route"))
			return
		}
		sess, ok := s.memberOf(ctx)
		if !ok {
			return
		}
		s.serveMember(ctx, t, sess)
	case hostOps, hostMetrics:
		if !(t.host == hostMetrics && s.metricsToken(ctx)) && !s.operatorToken(ctx) {
			return
		}
		fallthrough
	default:
		if t.route == nil {
			s.fail(ctx, kiterr.Absent("route"))
			return
		}
		if t.route.tokens&(bot|user|developer) != 0 {
			if r.p = s.authorize(ctx, t.route); r.p == nil {
				return
			}
		}
		s.serve(ctx, t, r.p)
	}
}

// serve runs the route's handler and writes its reply or its error.
func (s *Server) serve(ctx *fasthttp.RequestCtx, t *target, p *actors.Principal) {
	s.serveCall(ctx, t, call{ctx: ctx, p: p, names: &paramNames[t.row], body: t.route.body})
}

// serveMember is serve for a member action of the session's member.
func (s *Server) serveMember(ctx *fasthttp.RequestCtx, t *target, sess *actors.WebSession) {
	s.serveCall(ctx, t, call{ctx: ctx, member: sess, names: &paramNames[t.row], body: t.route.body})
}

func (s *Server) serveCall(ctx *fasthttp.RequestCtx, t *target, in call) {
	p := in.p
	if t.n > 0 {
		// One copy of the path for all the parameters.
		path := string(t.rest)
		for i, a := range t.at[:t.n] {
			in.params[i] = path[a.from:a.to]
		}
	}
	rep, err := t.route.handle(s, in)
	switch {
	case err != nil:
		if p != nil {
			s.giveBackFamilyToken(t.route, p, err)
		}
		s.failRoute(ctx, t.route, oneNotFound(t.host, err))
	case rep.json != nil:
		s.writeJSON(ctx, rep.status, rep.json)
	case rep.status != 0:
		s.writeBuffer(ctx, rep.status, rep.raw)
	}
}

// oneNotFound is err, or the one 404 of host's routes if err is a 404.
// SPEC.md section 1: a 404 never tells absent from not visible, and the
// handlers' own messages ("file not found", "conversation not found") came
// from whichever check refused, which told the two apart (another
// workspace's file was found, then hidden; a made-up id was not). Every
// 404 of a route therefore reads the same, whatever answered it. The
// operator sees everything, so its answers keep their message: nothing is
// hidden there.
func oneNotFound(h host, err error) error {
	if kiterr.CodeOf(err) != kiterr.NotFound {
		return err
	}
	switch h {
	case hostAPI, hostDev:
		return errNotVisible
	case hostHooks:
		return actors.ErrHookNotFound
	}
	return err
}

var errNotVisible = kiterr.New(kiterr.NotFound, "not found: it does not exist or this token cannot see it")

// operatorToken checks the operator token of an /ops request, before its
// route is looked up. It writes the error and returns false when the
// request may not go on.
func (s *Server) operatorToken(ctx *fasthttp.RequestCtx) bool {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return false
	}
	if h := sha256.Sum256(token); !ids.Equal(h[:], s.operatorHash[:]) {
		s.fail(ctx, kiterr.New(kiterr.InvalidToken, "the operator token is not valid"))
		return false
	}
	return true
}

// metricsToken reports whether the request carries the --metrics-token,
// which reads /metrics and nothing else (OPERATIONS.md section 8): a
// scraper needs no token that can create workspaces. Compared as the
// operator token is, by hash and in constant time.
func (s *Server) metricsToken(ctx *fasthttp.RequestCtx) bool {
	if !s.hasMetricsToken {
		return false
	}
	token, ok := bearer(ctx)
	if !ok {
		return false
	}
	h := sha256.Sum256(token)
	return ids.Equal(h[:], s.metricsHash[:])
}

// authorize authenticates the bearer token, checks its type and the scope
// of rt, and spends one token of rt's family bucket of the installation (of
// the developer token's workspace). It writes the error and returns nil
// when the request may not go on.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, rt *route) *actors.Principal {
	token, ok := bearer(ctx)
	if !ok {
		s.unauthenticated(ctx)
		return nil
	}
	p, err := s.auth.Authenticate(token)
	if err != nil {
		s.failRoute(ctx, rt, err)
		return nil
	}
	if rt.tokens&tokenOf(p) == 0 {
		s.fail(ctx, kiterr.New(kiterr.Forbidden, "this token type cannot call this method"))
		return nil
	}
	if p.TokenID != "" && (p.TokenType == actors.CallerDeveloper || p.TokenType == actors.CallerBot) {
		// lastUsedAt (GET /dev/me, the API access page): one atomic load per
		// request, one write per token and node and minute.
		if now := s.env.Clock.Now().UnixNano(); p.TouchDue(now) {
			var err error
			if p.TokenType == actors.CallerBot {
				_, err = ask[*kitpb.Ok](s, actors.KindInstallation, p.Caller.InstallationId, &kitpb.TouchBotToken{TokenId: p.TokenID, At: now})
			} else {
				_, err = ask[*kitpb.Ok](s, actors.KindWorkspace, p.Caller.WorkspaceId, &kitpb.TouchDeveloperToken{TokenId: p.TokenID, At: now})
			}
			if err != nil {
				s.failRoute(ctx, rt, err)
				return nil
			}
		}
	}
	if rt.scope != "" && !p.HasScope(rt.scope) {
		ctx.Response.Header.Set("X-Service-Required-Scope", rt.scope)
		s.fail(ctx, kiterr.New(kiterr.MissingScope, "the token lacks scope "+rt.scope))
		return nil
	}
	if rt.family != "" && s.limits != nil {
		owner, identity, key := familyBucket(p)
		d, err := ask[*kitpb.Decision](s, owner, identity, &kitpb.TakeToken{Bucket: string(rt.family), Key: key})
		if err != nil {
			s.failRoute(ctx, rt, err)
			return nil
		}
		dec := limits.FromWire(d, s.limits)
		if !dec.OK {
			s.fail(ctx, kiterr.OverLimit(dec))
			return nil
		}
		setRateHeaders(ctx, dec)
	}
	return p
}

// familyBucket says where p's family buckets are kept: the installation's,
// or the developer token's in its workspace.
func familyBucket(p *actors.Principal) (owner, identity, key string) {
	if p.TokenType == actors.CallerDeveloper {
		return actors.KindWorkspace, p.Caller.WorkspaceId, p.TokenID
	}
	return actors.KindInstallation, p.Caller.InstallationId, ""
}

// giveBackFamilyToken returns the token authorize took of rt's family
// bucket when another bucket refused the request (err, a 429 of
// post_message for POST /messages): a refused request spends no bucket's
// token (docs/decisions.md "Rate limits"). Only refusals pay for it.
func (s *Server) giveBackFamilyToken(rt *route, p *actors.Principal, err error) {
	var e *kiterr.Error
	if rt.family == "" || s.limits == nil || !errors.As(err, &e) || e.Limit == nil || e.Limit.Policy == rt.family {
		return
	}
	owner, identity, key := familyBucket(p)
	if _, err := ask[*kitpb.Ok](s, owner, identity, &kitpb.ReturnToken{Bucket: string(rt.family), Key: key}); err != nil {
		// The request is refused either way; the token comes back with
		// the bucket's refill.
		s.log.Warn("return a rate-limit token", "route", routeName(rt), "err", err)
	}
}

// tokenOf is the token type of p as a member of tokens.
func tokenOf(p *actors.Principal) tokens {
	switch p.TokenType {
	case actors.CallerBot:
		return bot
	case actors.CallerUser:
		return user
	case actors.CallerDeveloper:
		return developer
	}
	return 0
}

func setRateHeaders(ctx *fasthttp.RequestCtx, d limits.Decision) {
	if d.Policy == "" {
		return
	}
	ctx.Response.Header.Set("RateLimit-Policy", d.PolicyHeader())
	ctx.Response.Header.Set("RateLimit", d.LimitHeader())
}

// bearer returns the token of an `Authorization: Bearer` header.
func bearer(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	h := ctx.Request.Header.Peek("Authorization")
	if len(h) == 0 {
		return nil, false
	}
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return []byte{}, true // a credential was sent, and it is malformed
	}
	return h[len(prefix):], true
}

func equalFoldASCII(b []byte, s string) bool {
	for i := range b {
		c, d := b[i], s[i]
		if c|0x20 != d|0x20 {
			return false
		}
	}
	return true
}
