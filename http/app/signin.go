package app

import (
	"html/template"
	"net/url"
	"sort"

	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Sign-in (OPERATIONS.md section 3). With a workspace (the `workspace`
// parameter, or the authorize URL in `next`) the email is looked up in that
// workspace. Without one it is looked up in every workspace, through the
// email index the workspaces write (actors.SignInMembers): one match signs
// in at once, several ask the member to choose a workspace by name, and
// the choice is a short-lived single-use record (actors.SignInChoiceOwner),
// never the password again. docs/decisions.md "Sign-in without a
// workspace" says why.

var _ = template.Must(pages.New("signin").Parse(`
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
`))

// signInCompares is how many bcrypt comparisons a sign-in without a
// workspace makes, whatever the email: an unknown email, a wrong password
// and an email of several workspaces all cost the same, so the answer time
// does not tell which emails exist or how widely. It also bounds the cost
// of an email used in many workspaces: only the oldest signInCompares of
// its memberships can be reached without a workspace.
const signInCompares = 3

// dummyHash keeps a sign-in for an unknown email as slow as one with a
// wrong password, so the answer time does not tell which emails exist.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("kitd dummy password"), bcrypt.DefaultCost)

// SignInForm is GET /app/signin.
func (s *Server) SignInForm(ctx *fasthttp.RequestCtx) {
	s.signInPage(ctx, string(ctx.QueryArgs().Peek("next")), string(ctx.QueryArgs().Peek("workspace")), 200, "")
}

// signInPage shows the sign-in form. The workspace comes from the
// `workspace` query parameter or from the authorize URL in `next`; without
// one the form asks for email and password only.
func (s *Server) signInPage(ctx *fasthttp.RequestCtx, next, workspace string, status int, problem string) {
	next = safeNext(next)
	if workspace == "" {
		if u, err := url.Parse(next); err == nil {
			workspace = u.Query().Get("workspace")
		}
	}
	if !ids.Valid(workspace) {
		workspace = ""
	}
	s.render(ctx, status, "signin", struct{ Title, Problem, CSRF, Next, Workspace string }{"Sign in", problem, s.formCSRF(ctx), next, workspace})
}

// formCSRF is the CSRF token of the forms shown before a session: the
// kit_csrf cookie's value (double submit), set when the browser has none.
func (s *Server) formCSRF(ctx *fasthttp.RequestCtx) string {
	token := string(ctx.Request.Header.Cookie(csrfCookie))
	if !ids.WellFormed(token, "") {
		token = ids.NewSecret("")
		s.setCookie(ctx, csrfCookie, token, 3600)
	}
	return token
}

// SignIn is POST /app/signin: the session cookie for a right email and
// password, or the workspace choice when they fit several; with `choice`,
// the session of the workspace chosen.
func (s *Server) SignIn(ctx *fasthttp.RequestCtx) {
	f := ctx.PostArgs()
	if !csrfOK(string(f.Peek("csrf")), string(ctx.Request.Header.Cookie(csrfCookie))) {
		s.csrfRejected(ctx)
		return
	}
	next, workspace := string(f.Peek("next")), string(f.Peek("workspace"))
	if f.Has("choice") {
		s.chooseWorkspace(ctx, string(f.Peek("choice")), workspace, next)
		return
	}
	email, password := string(f.Peek("email")), f.Peek("password")
	wellFormed := email != "" && len(email) <= 254 && len(password) > 0 && len(password) <= 72
	if workspace == "" {
		s.signInAnywhere(ctx, next, email, password, wellFormed)
		return
	}
	if !ids.Valid(workspace) || !wellFormed {
		_ = bcrypt.CompareHashAndPassword(dummyHash, password)
		s.wrongCredentials(ctx, next, workspace)
		return
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, workspace, &kitpb.FindUserByEmail{Email: email})
	if err != nil && kiterr.CodeOf(err) != kiterr.NotFound {
		s.failPage(ctx, err)
		return
	}
	var user *kitpb.User
	if err == nil {
		user = u.User
	}
	if matched := comparePasswords([]*kitpb.User{user}, password); len(matched) != 1 {
		s.wrongCredentials(ctx, next, workspace)
		return
	}
	s.startSession(ctx, workspace, user.Id, next)
}

// signInAnywhere signs in with email and password alone: the members the
// email index names are asked for their password hashes, and exactly
// signInCompares hashes are compared, real ones first.
func (s *Server) signInAnywhere(ctx *fasthttp.RequestCtx, next, email string, password []byte, wellFormed bool) {
	users := make([]*kitpb.User, signInCompares)
	if wellFormed {
		members, err := actors.SignInMembers(s.env, email, signInCompares)
		if err != nil {
			s.failPage(ctx, err)
			return
		}
		for i, m := range members {
			r, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, m.WorkspaceID, &kitpb.FindUserByEmail{Email: email})
			if kiterr.CodeOf(err) == kiterr.NotFound {
				continue // deactivated since the index was read
			}
			if err != nil {
				s.failPage(ctx, err)
				return
			}
			users[i] = r.User
		}
	}
	matched := comparePasswords(users, password)
	switch len(matched) {
	case 0:
		s.wrongCredentials(ctx, next, "")
	case 1:
		s.startSession(ctx, matched[0].WorkspaceId, matched[0].Id, next)
	default:
		s.offerChoice(ctx, next, matched)
	}
}

// comparePasswords returns the users whose password hash password fits,
// after one bcrypt comparison per entry of users; a nil entry, or a user
// without a password, is compared with dummyHash so that it costs the same.
// bcrypt runs here, never in a workspace's mailbox.
func comparePasswords(users []*kitpb.User, password []byte) []*kitpb.User {
	var matched []*kitpb.User
	for _, u := range users {
		hash := dummyHash
		if u != nil && len(u.PasswordHash) > 0 {
			hash = u.PasswordHash
		}
		if bcrypt.CompareHashAndPassword(hash, password) == nil && u != nil && len(u.PasswordHash) > 0 {
			matched = append(matched, u)
		}
	}
	return matched
}

func (s *Server) wrongCredentials(ctx *fasthttp.RequestCtx, next, workspace string) {
	s.signInPage(ctx, next, workspace, kiterr.InvalidCredentials.Status(), "The email or password is wrong.")
}

// offerChoice records the workspaces the password matched as a pending
// choice, held by the first of them, and asks the member to choose one by
// name. Only these workspaces are ever named: the password proved them.
func (s *Server) offerChoice(ctx *fasthttp.RequestCtx, next string, matched []*kitpb.User) {
	type workspace struct{ ID, Name string }
	m := &kitpb.CreateSignInChoice{}
	shown := make([]workspace, 0, len(matched))
	for _, u := range matched {
		r, err := ask[*kitpb.WorkspaceReply](s, actors.KindWorkspace, u.WorkspaceId, &kitpb.GetWorkspace{})
		if err != nil {
			s.failPage(ctx, err)
			return
		}
		m.Choices = append(m.Choices, &kitpb.SignInChoice{WorkspaceId: u.WorkspaceId, UserId: u.Id})
		shown = append(shown, workspace{u.WorkspaceId, r.Workspace.Name})
	}
	sort.SliceStable(shown, func(i, j int) bool { return shown[i].Name < shown[j].Name })
	secret := ids.NewSecret(ids.SignInChoice)
	h := ids.Hash(secret)
	m.SecretHash = h[:]
	if _, err := ask[*kitpb.Ok](s, actors.KindWorkspace, matched[0].WorkspaceId, m); err != nil {
		s.failPage(ctx, err)
		return
	}
	s.render(ctx, 200, "choose", struct {
		Title, CSRF, Next, Choice string
		Workspaces                []workspace
	}{"Choose a workspace", s.formCSRF(ctx), safeNext(next), secret, shown})
}

// chooseWorkspace spends a pending choice for the workspace chosen and
// signs in there. A choice that is unknown, spent, expired or without that
// workspace answers as a failed sign-in.
func (s *Server) chooseWorkspace(ctx *fasthttp.RequestCtx, choice, workspace, next string) {
	owner, err := actors.SignInChoiceOwner(s.env, choice)
	var c *kitpb.SignInChoice
	if err == nil {
		h := ids.Hash(choice)
		c, err = ask[*kitpb.SignInChoice](s, actors.KindWorkspace, owner, &kitpb.TakeSignInChoice{SecretHash: h[:], WorkspaceId: workspace})
	}
	if kiterr.CodeOf(err) == kiterr.NotFound {
		s.signInPage(ctx, next, "", kiterr.InvalidCredentials.Status(), "This sign-in has expired or was used already. Sign in again.")
		return
	}
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	s.startSession(ctx, c.WorkspaceId, c.UserId, next)
}

// startSession signs the member in: a new session, its cookie, and the
// redirect to next (on the app host only).
func (s *Server) startSession(ctx *fasthttp.RequestCtx, workspace, userID, next string) {
	secret := ids.NewSecret(ids.SessionCookie)
	h := ids.Hash(secret)
	_, err := ask[*kitpb.SessionReply](s, actors.KindWorkspace, workspace, &kitpb.CreateSession{UserId: userID, SessionId: ids.New(), SecretHash: h[:]})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		s.wrongCredentials(ctx, next, "") // deactivated since the password was checked
		return
	}
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	s.setCookie(ctx, SessionCookie, secret, int(actors.SessionLifetime.Seconds()))
	s.setCookie(ctx, csrfCookie, "", 0)
	redirect(ctx, safeNext(next), fasthttp.StatusSeeOther)
}

// SignOut is POST /app/signout: the session ends.
func (s *Server) SignOut(ctx *fasthttp.RequestCtx) {
	sess, secret := s.session(ctx)
	if sess == nil {
		redirect(ctx, "/app/signin", fasthttp.StatusSeeOther)
		return
	}
	if !csrfOK(string(ctx.PostArgs().Peek("csrf")), SessionCSRF(secret)) {
		s.csrfRejected(ctx)
		return
	}
	if _, err := ask[*kitpb.Ok](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.EndSession{SessionId: sess.ID}); err != nil {
		s.failPage(ctx, err)
		return
	}
	s.setCookie(ctx, SessionCookie, "", 0)
	redirect(ctx, "/app/signin", fasthttp.StatusSeeOther)
}
