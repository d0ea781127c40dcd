// Package app is the app host of OPERATIONS.md section 3: the HTML pages on
// which a member signs in and out, approves or denies a Kit's authorization,
// installs a Kit through an install link, sees the Kits of the workspace
// and revokes their own authorizations (home), and on which an admin
// manages an installation's bot tokens, webhooks and secrets (the API
// access page). It owns the web session
// cookie, the CSRF tokens of its forms and its own HTML error pages. It
// never answers JSON, never takes a bearer token, and holds no rule of its
// own beyond the shape of its forms: every decision is an actor's.
package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/http/internal/published"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The app host's pages are plain HTML forms; the one script is the Copy
// button of a secret shown once. Every form carries a CSRF token: on the sign-in form (no session yet) it is a random
// value that must equal the kit_csrf cookie (double submit); on the forms of
// a signed-in member it is derived from the session secret, which only the
// member's browser holds. Errors are HTML pages that name the error code.

// SessionCookie is the name of the web session cookie.
const SessionCookie = "kit_session"

// Config wires the app host to its node.
type Config struct {
	Node      *cluster.Node
	Env       *actors.Env
	Auth      *actors.Authenticator
	PublicURL string
	Logger    *slog.Logger
	// Published is shared with the developer API.
	Published *published.Cache
	// CorrelationID names a failure in the log and on its page, from the
	// same sequence as the API's error bodies.
	CorrelationID func() string
}

// Server serves the pages of the app host; http/api routes to them.
type Server struct {
	node          *cluster.Node
	env           *actors.Env
	auth          *actors.Authenticator
	publicURL     string
	log           *slog.Logger
	published     *published.Cache
	correlationID func() string
}

// New returns the app host of cfg.
func New(cfg Config) *Server {
	return &Server{
		node: cfg.Node, env: cfg.Env, auth: cfg.Auth, publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		log: cfg.Logger, published: cfg.Published, correlationID: cfg.CorrelationID,
	}
}

// ask sends msg to the actor and returns its reply as R.
func ask[R proto.Message](s *Server, kind, identity string, msg proto.Message) (R, error) {
	return cluster.Call[R](s.node, kind, identity, msg)
}

// NotFound is the page of a path the app host does not have.
func (s *Server) NotFound(ctx *fasthttp.RequestCtx) {
	s.errorPage(ctx, kiterr.NotFound, "There is no page at this address.")
}

// ScopeInWords says what a scope lets a Kit do, as the consent pages show
// it; a scope without words shows as its name.
func ScopeInWords(scope string) string {
	if w := scopeInWords[scope]; w != "" {
		return w
	}
	return scope
}

// csrfCookie holds the sign-in form's CSRF token.
const csrfCookie = "kit_csrf"

// authorizeParams are the query parameters of the authorize page, carried
// through the consent form as hidden inputs, in this order.
var authorizeParams = []string{"workspace", "kit", "token_type", "redirect_uri", "state", "code_challenge", "code_challenge_method"}

// ---- pages ----

const pageHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · Kit</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;background:#fff}
h1{font-size:1.5rem}label{display:block;margin:.75rem 0 .25rem;font-weight:600}
input[type=email],input[type=password],input[type=text]{width:100%;padding:.5rem;font:inherit;border:1px solid #767676;border-radius:4px;box-sizing:border-box}
button{font:inherit;padding:.5rem 1.25rem;margin:1rem .5rem 0 0;border-radius:4px;border:1px solid #1b1b1b;background:#fff;cursor:pointer}
button.primary{background:#0b5394;border-color:#0b5394;color:#fff}
button:focus,input:focus{outline:3px solid #f0a30a;outline-offset:2px}
.error{color:#a00;font-weight:600}ul.scopes li{margin:.25rem 0}code{font-size:.9em}
h2{font-size:1.2rem;margin-top:2rem}select{font:inherit;padding:.4rem;max-width:100%;border:1px solid #767676;border-radius:4px}
button.danger{border-color:#a00;color:#a00}.notice{color:#1f6f2b;font-weight:600}
ul.items{list-style:none;padding:0}ul.items li{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem;border-bottom:1px solid #ddd;padding:.25rem 0}
ul.items li span{flex:1 1 14rem}ul.items button{margin:0}
.shown{border:2px solid #0b5394;border-radius:6px;padding:0 1rem 1rem;margin:1rem 0}.shown input{font-family:monospace}
a:focus,select:focus{outline:3px solid #f0a30a;outline-offset:2px}
</style></head><body><main>
`

// copyScript is the pages' only script: the Copy button of a secret shown
// once. It is allowed by its hash (scriptHash), so the policy still
// forbids any other script.
const copyScript = `document.addEventListener('click',function(e){var b=e.target.closest('button[data-copy]');if(!b)return;` +
	`var i=document.getElementById(b.dataset.copy);i.select();var done=function(){b.textContent='Copied'};` +
	`if(navigator.clipboard){navigator.clipboard.writeText(i.value).then(done,function(){document.execCommand('copy');done()})}` +
	`else{document.execCommand('copy');done()}});`

var scriptHash = func() string {
	sum := sha256.Sum256([]byte(copyScript))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

const pageFoot = `</main></body></html>
`

var pages = template.Must(template.New("").Parse(`
{{define "error"}}` + pageHead + `<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
<p>Error code: <code>{{.Code}}</code></p>
` + pageFoot + `{{end}}

{{define "signin"}}` + pageHead + `<h1>Sign in</h1>
{{if .Problem}}<p class="error" role="alert">{{.Problem}}</p>{{end}}
<form method="post" action="/app/signin">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<input type="hidden" name="next" value="{{.Next}}">
{{if .Workspace}}<input type="hidden" name="workspace" value="{{.Workspace}}">{{end}}
<label for="email">Email</label>
<input type="email" id="email" name="email" autocomplete="username" required>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit" class="primary">Sign in</button>
</form>
` + pageFoot + `{{end}}

{{define "choose"}}` + pageHead + `<h1>Choose a workspace</h1>
<p>Your email and password fit more than one workspace. Which one do you want to sign in to?</p>
<form method="post" action="/app/signin">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<input type="hidden" name="next" value="{{.Next}}">
<input type="hidden" name="choice" value="{{.Choice}}">
<ul class="workspaces">{{range .Workspaces}}<li><button type="submit" name="workspace" value="{{.ID}}">{{.Name}}</button></li>
{{end}}</ul>
</form>
` + pageFoot + `{{end}}

{{define "consent"}}` + pageHead + `<h1>Authorize {{.Kit}}</h1>
<p><strong>{{.Kit}}</strong> (<code>{{.Slug}}</code>) asks for access to the workspace <strong>{{.Workspace}}</strong>{{if .User}} as you, {{.Member}}{{else}} through its bot{{end}}.</p>
{{if .Scopes}}<p>{{if .User}}It will be able to act as you and:{{else}}Its bot will be able to:{{end}}</p>
<ul class="scopes">{{range .Scopes}}<li>{{.Words}} <small>(<code>{{.Name}}</code>)</small></li>{{end}}</ul>
{{else}}<p>It asks for no permissions beyond knowing it is installed.</p>{{end}}
<form method="post" action="/app/kits/authorize">
{{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
` + pageFoot + `{{end}}

`))

// scopeInWords says what each scope of SPEC.md section 5 lets a Kit do.
var scopeInWords = map[string]string{
	"conversations:read": "See the channels and conversations it can access, and their members",
	"messages:read":      "Read the messages of those conversations",
	"messages:write":     "Send messages, and edit or delete the ones it sent",
	"reactions:write":    "Add and remove emoji reactions",
	"files:read":         "See and download the files shared in those conversations",
	"files:write":        "Upload files",
	"users:read":         "See the people of the workspace",
	"users:read.email":   "See the email addresses of the people of the workspace",
	"runs:read":          "See assistant runs",
	"incoming-webhook":   "Post messages into a channel through an incoming webhook",
}

func (s *Server) render(ctx *fasthttp.RequestCtx, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("internal error")
		return
	}
	h := &ctx.Response.Header
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src "+scriptHash+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

// errorPage answers an HTML error page of code, at the status the API
// answers code with (kiterr's one table).
func (s *Server) errorPage(ctx *fasthttp.RequestCtx, code kiterr.Code, message string) {
	status := code.Status()
	title := pageTitles[status]
	if title == "" {
		title = "Error"
	}
	s.render(ctx, status, "error", struct{ Title, Message, Code string }{title, message, string(code)})
}

// pageTitles heads the error pages by status.
var pageTitles = map[int]string{
	400: "This request cannot be completed", 401: "Sign-in failed", 403: "Not allowed", 404: "Not found",
	409: "This cannot be done now", 410: "Gone", 429: "Too many requests", 500: "Something went wrong",
	502: "The Kit did not answer", 503: "Try again in a moment",
}

// failPage turns an error into an error page with the status, the code
// and the Retry-After the API answers the same error with, so that a
// member and a Kit see one answer (during an election: 503 unavailable,
// not 500). Errors that are not domain errors are logged and shown
// without detail; so is an unavailable answer's cause.
func (s *Server) failPage(ctx *fasthttp.RequestCtx, err error) {
	var e *kiterr.Error
	if !errors.As(err, &e) {
		e = kiterr.New(kiterr.Internal, "")
	}
	if r := e.RetryAfter(); r > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(r))
	}
	code := e.Code
	if code.Status() == fasthttp.StatusInternalServerError {
		code = kiterr.Internal // a code of no known status is one too
	}
	switch code {
	case kiterr.Validation:
		s.errorPage(ctx, e.Code, "The authorization request is not valid: "+e.Message+".")
	case kiterr.NotFound:
		s.errorPage(ctx, e.Code, "What this page needs does not exist, or you cannot see it.")
	case kiterr.Unavailable:
		corr := s.correlationID()
		if kiterr.Unexplained(err) {
			s.log.Warn("app request unavailable", "correlationId", corr, "path", string(ctx.Path()), "err", err)
		}
		s.errorPage(ctx, e.Code, "This part of the service is moving to another server. Try again in a moment (correlation id "+corr+").")
	case kiterr.RateLimited:
		s.errorPage(ctx, e.Code, "Too many requests. Try again in "+strconv.Itoa(e.RetryAfter())+" seconds.")
	case kiterr.Internal:
		corr := s.correlationID()
		s.log.Error("app request failed", "correlationId", corr, "path", string(ctx.Path()), "err", err)
		s.errorPage(ctx, code, "Please try again later (correlation id "+corr+").")
	default:
		s.errorPage(ctx, e.Code, e.Message+".")
	}
}

// authorizeFail is failPage for the authorize pages, where a Kit that is
// unknown or not installed is a bad request (a 400 page, OPERATIONS.md
// section 3), never a redirect.
func (s *Server) authorizeFail(ctx *fasthttp.RequestCtx, err error) {
	if kiterr.CodeOf(err) == kiterr.NotFound {
		s.errorPage(ctx, kiterr.Validation, "This Kit is unknown or not installed in the workspace.")
		return
	}
	s.failPage(ctx, err)
}

// ---- sessions and CSRF ----

func (s *Server) secureCookies() bool { return strings.HasPrefix(s.publicURL, "https://") }

func (s *Server) setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge int) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(s.secureCookies())
	if maxAge > 0 {
		c.SetMaxAge(maxAge)
	} else {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	ctx.Response.Header.SetCookie(c)
}

// session returns the signed-in member of the request, or nil, and the
// cookie secret.
func (s *Server) session(ctx *fasthttp.RequestCtx) (*actors.WebSession, string) {
	secret := ctx.Request.Header.Cookie(SessionCookie)
	if len(secret) == 0 {
		return nil, ""
	}
	ws, err := s.auth.Session(secret)
	if err != nil {
		return nil, ""
	}
	return ws, string(secret)
}

// SessionCSRF is the CSRF token of the forms and member actions of a
// session (GET /app/api/session answers it): derived from the
// session secret, so it needs no storage and dies with the session.
func SessionCSRF(secret string) string {
	sum := sha256.Sum256([]byte("kit-csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func csrfOK(got, want string) bool {
	return want != "" && got != "" && ids.Equal([]byte(got), []byte(want))
}

// formSession is the session of a form posted by a signed-in member, nil
// when the form's CSRF token is not the session's (answered 403). The token
// is bound to the session: without one it cannot match.
func (s *Server) formSession(ctx *fasthttp.RequestCtx, f *fasthttp.Args) (*actors.WebSession, string) {
	sess, secret := s.session(ctx)
	if sess == nil || !csrfOK(string(f.Peek("csrf")), SessionCSRF(secret)) {
		s.csrfRejected(ctx)
		return nil, ""
	}
	return sess, secret
}

func (s *Server) csrfRejected(ctx *fasthttp.RequestCtx) {
	s.errorPage(ctx, kiterr.CSRFRejected, "The form could not be verified. Go back, reload the page and try again.")
}

// redirect answers a redirect to loc as given: fasthttp's Redirect would
// rebuild the URL, and a redirect_uri must arrive exactly as registered.
func redirect(ctx *fasthttp.RequestCtx, loc string, status int) {
	ctx.Response.Header.Set("Location", loc)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(status)
}

// safeNext keeps a post-sign-in redirect on the app host.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/app/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/app/"
	}
	return next
}

// ---- sign-in and sign-out ----

// ---- authorize ----

// authorizeRequest is the parsed authorize page request.
type authorizeRequest struct {
	values map[string]string
	kitID  string
}

// parseAuthorize checks the shape of the authorize parameters in get; its
// errors become 400 pages, never redirects.
func (s *Server) parseAuthorize(get func(string) string) (*authorizeRequest, error) {
	r := &authorizeRequest{values: make(map[string]string, len(authorizeParams))}
	for _, p := range authorizeParams {
		r.values[p] = get(p)
	}
	v := r.values
	switch {
	case !ids.Valid(v["workspace"]):
		return nil, kiterr.Invalid("workspace", "must be a workspace id")
	case v["kit"] == "" || len(v["kit"]) > 64:
		return nil, kiterr.Invalid("kit", "must be a Kit slug")
	case v["token_type"] != actors.CallerBot && v["token_type"] != actors.CallerUser:
		return nil, kiterr.Invalid("token_type", "must be bot or user")
	case v["redirect_uri"] == "" || len(v["redirect_uri"]) > 2000:
		return nil, kiterr.Invalid("redirect_uri", "must be 1 to 2000 characters")
	case len(v["state"]) > 2000:
		return nil, kiterr.Invalid("state", "must be at most 2000 characters")
	case v["code_challenge_method"] != "" && v["code_challenge_method"] != "S256":
		return nil, kiterr.Invalid("code_challenge_method", "must be S256")
	case v["code_challenge"] != "" && !ids.WellFormed(v["code_challenge"], ""):
		return nil, kiterr.Invalid("code_challenge", "must be the base64url SHA-256 of the verifier, without padding")
	case v["token_type"] == actors.CallerUser && v["code_challenge"] == "":
		return nil, kiterr.Invalid("code_challenge", "is required for user tokens")
	}
	kitID, err := actors.KitBySlug(s.env, v["kit"])
	if err != nil {
		return nil, err
	}
	r.kitID = kitID
	return r, nil
}

func (r *authorizeRequest) message(sess *actors.WebSession) *kitpb.Authorize {
	m := &kitpb.Authorize{
		KitId: r.kitID, TokenType: r.values["token_type"],
		RedirectUri: r.values["redirect_uri"], CodeChallenge: r.values["code_challenge"],
	}
	if sess != nil {
		m.UserId, m.SessionId = sess.UserID, sess.ID
	}
	return m
}

// query is the authorize URL of the request, for sign-in's next.
func (r *authorizeRequest) query() string {
	q := url.Values{}
	for _, p := range authorizeParams {
		if r.values[p] != "" {
			q.Set(p, r.values[p])
		}
	}
	return "/app/kits/authorize?" + q.Encode()
}

// AuthorizePage is GET /app/kits/authorize: the consent page, or a sign-in
// first.
func (s *Server) AuthorizePage(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	req, err := s.parseAuthorize(func(k string) string { return string(args.Peek(k)) })
	if err != nil {
		s.authorizeFail(ctx, err)
		return
	}
	sess, secret := s.session(ctx)
	if sess != nil && sess.WorkspaceID != req.values["workspace"] {
		sess = nil // signed in to another workspace: sign in to this one
	}
	if sess == nil {
		// Check what can be checked without a member first, so that a bad
		// request is a 400 page rather than a sign-in.
		if _, err := ask[*kitpb.AuthorizeReply](s, actors.KindWorkspace, req.values["workspace"], req.message(nil)); err != nil {
			s.authorizeFail(ctx, err)
			return
		}
		q := url.Values{"next": {req.query()}, "workspace": {req.values["workspace"]}}
		redirect(ctx, "/app/signin?"+q.Encode(), fasthttp.StatusFound)
		return
	}
	r, err := ask[*kitpb.AuthorizeReply](s, actors.KindWorkspace, sess.WorkspaceID, req.message(sess))
	if err != nil {
		s.authorizeFail(ctx, err)
		return
	}
	type scope struct{ Name, Words string }
	type hidden struct{ Name, Value string }
	data := struct {
		Title, Kit, Slug, Workspace, Member, CSRF string
		User                                      bool
		Scopes                                    []scope
		Hidden                                    []hidden
	}{
		Title: "Authorize " + r.KitDisplayName, Kit: r.KitDisplayName, Slug: r.KitSlug, Workspace: r.WorkspaceName,
		Member: r.User.DisplayName, CSRF: SessionCSRF(secret), User: req.values["token_type"] == actors.CallerUser,
	}
	for _, sc := range r.Scopes {
		data.Scopes = append(data.Scopes, scope{sc, ScopeInWords(sc)})
	}
	for _, p := range authorizeParams {
		if v := req.values[p]; v != "" {
			data.Hidden = append(data.Hidden, hidden{p, v})
		}
	}
	s.render(ctx, 200, "consent", data)
}

// Authorize is POST /app/kits/authorize: approve (a code) or deny, both
// redirects to the Kit's redirect_uri.
func (s *Server) Authorize(ctx *fasthttp.RequestCtx) {
	f := ctx.PostArgs()
	sess, _ := s.formSession(ctx, f)
	if sess == nil {
		return
	}
	req, err := s.parseAuthorize(func(k string) string { return string(f.Peek(k)) })
	if err != nil {
		s.authorizeFail(ctx, err)
		return
	}
	if sess.WorkspaceID != req.values["workspace"] {
		s.errorPage(ctx, kiterr.Forbidden, "You are signed in to another workspace.")
		return
	}
	target := func(extra url.Values) string {
		u, err := url.Parse(req.values["redirect_uri"])
		if err != nil {
			return ""
		}
		q := u.Query()
		for k, v := range extra {
			q[k] = v
		}
		if st := req.values["state"]; st != "" {
			q.Set("state", st)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	switch string(f.Peek("decision")) {
	case "approve":
		code := ids.NewSecret(ids.AuthCode)
		h := ids.Hash(code)
		m := req.message(sess)
		m.Issue, m.CodeHash = true, h[:]
		if _, err := ask[*kitpb.AuthorizeReply](s, actors.KindWorkspace, sess.WorkspaceID, m); err != nil {
			s.authorizeFail(ctx, err)
			return
		}
		redirect(ctx, target(url.Values{"code": {code}}), fasthttp.StatusFound)
	case "deny":
		// Denying needs no role, but redirect_uri is checked all the same.
		if _, err := ask[*kitpb.AuthorizeReply](s, actors.KindWorkspace, sess.WorkspaceID, req.message(nil)); err != nil {
			s.authorizeFail(ctx, err)
			return
		}
		redirect(ctx, target(url.Values{"error": {"access_denied"}}), fasthttp.StatusFound)
	default:
		s.errorPage(ctx, kiterr.Validation, fmt.Sprintf("The form must say %q or %q.", "approve", "deny"))
	}
}
