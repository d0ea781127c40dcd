package app

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The authorize pages of OPERATIONS.md section 3: the consent page of a
// Kit's authorization request, and its approval or denial, both redirects
// to the Kit's redirect_uri.

var _ = template.Must(pages.New("consent").Parse(`
{{define "consent"}}` + pageHead + `<h1>Authorize {{.Kit}}</h1>
<p><strong>{{.Kit}}</strong> (<code>{{.Slug}}</code>) asks for access to the workspace <strong>{{.Workspace}}</strong>{{if .User}} as you, {{.Member}}{{else}} through its bot{{end}}.</p>
{{if .Scopes}}<p>{{if .User}}It will be able to act as you and:{{else}}Its bot will be able to:{{end}}</p>
<ul class="scopes">{{range .Scopes}}<li>{{.Words}} <small>(<code>{{.Name}}</code>)</small></li>{{end}}</ul>
{{else}}<p>It asks for no permissions beyond knowing it is installed.</p>{{end}}
<form method="post" action="/app/kits/authorize">
{{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<input type="hidden" name="scopes" value="{{.ShownScopes}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
` + pageFoot + `{{end}}
`))

// ScopeInWords says what a scope lets a Kit do, as the consent pages show
// it; a scope without words shows as its name.
func ScopeInWords(scope string) string {
	if w := scopeInWords[scope]; w != "" {
		return w
	}
	return scope
}

// authorizeParams are the query parameters of the authorize page, carried
// through the consent form as hidden inputs, in this order.
var authorizeParams = []string{"workspace", "kit", "token_type", "redirect_uri", "state", "code_challenge", "code_challenge_method"}

// scopeInWords says what each scope of docs/api.md "Scopes" lets a Kit do.
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

// authorizeRequest is the parsed authorize page request.
type authorizeRequest struct {
	values map[string]string
	kitID  string
}

// parseAuthorize checks the shape of the authorize parameters in get; its
// errors become 400 pages, never redirects.
func (s *Server) parseAuthorize(args *fasthttp.Args) (*authorizeRequest, error) {
	r := &authorizeRequest{values: make(map[string]string, len(authorizeParams))}
	for _, p := range authorizeParams {
		// RFC 6749 3.1: a parameter must not be given more than once; the
		// first of two could be what the page shows and the second what
		// something else reads.
		if len(args.PeekMulti(p)) > 1 {
			return nil, kiterr.Invalid(p, "must be given once")
		}
		r.values[p] = string(args.Peek(p))
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
	req, err := s.parseAuthorize(ctx.QueryArgs())
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
		ShownScopes                               string
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
	data.ShownScopes = strings.Join(r.Scopes, " ")
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
	req, err := s.parseAuthorize(f)
	if err != nil {
		s.authorizeFail(ctx, err)
		return
	}
	if sess.WorkspaceID != req.values["workspace"] {
		s.errorPage(ctx, kiterr.Forbidden, "You are signed in to another workspace.")
		return
	}
	target := func(extra url.Values) string {
		return redirectTarget(req.values["redirect_uri"], req.values["state"], extra)
	}
	switch string(f.Peek("decision")) {
	case "approve":
		code := ids.NewSecret(ids.AuthCode)
		h := ids.Hash(code)
		m := req.message(sess)
		m.Issue, m.CodeHash = true, h[:]
		// The scopes the consent page showed; a form without them (built
		// by hand from the query) is not checked. Has, not a nil Peek: a
		// page that showed no scope posts an empty field, which fasthttp
		// may read as nil, and it still says what was shown.
		if f.Has("scopes") {
			m.CheckShown, m.ShownScopes = true, strings.Fields(string(f.Peek("scopes")))
		}
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

// redirectTarget is the registered redirect URI with the answer's
// parameters and the state added after its own query, which stays as
// registered, byte for byte (RFC 6749 3.1.2: it "MUST be retained"): a Kit
// may compare it, and re-encoding it reordered and re-escaped it.
func redirectTarget(registered, state string, extra url.Values) string {
	u, err := url.Parse(registered)
	if err != nil {
		return ""
	}
	add := url.Values{}
	for k, v := range extra {
		add[k] = v
	}
	if state != "" {
		add.Set("state", state)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += add.Encode()
	return u.String()
}
