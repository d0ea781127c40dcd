package app

import (
	"html/template"
	"net/url"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

// The install page of an install link (docs/decisions.md "Install links"):
// an admin of any workspace who opens a link sees the Kit's consent summary
// and installs it. The developer API makes the links (http/api).

// InstallPath is the install page; the link's secret is its link parameter.
const InstallPath = "/app/kits/install"

// The install pages share the app host's page frame (pageHead, pageFoot)
// and render through s.render, so they join its template set.
var _ = template.Must(pages.New("installlink").Parse(`
{{define "install_consent"}}` + pageHead + `<h1>Install {{.Kit}}</h1>
{{if .Problem}}<p class="error" role="alert">{{.Problem}}</p>{{end}}
<p><strong>{{.Kit}}</strong> (<code>{{.Slug}}</code>, version {{.Version}}) by <strong>{{.Developer}}</strong> will be installed in the workspace <strong>{{.Workspace}}</strong>.</p>
<p>{{.Description}}</p>
{{if .Installed}}<p>It is installed in this workspace already: installing updates it to this version.</p>{{end}}
{{if .BotScopes}}<p>Its bot will be able to:</p>
<ul class="scopes">{{range .BotScopes}}<li>{{.Words}} <small>(<code>{{.Name}}</code>)</small></li>{{end}}</ul>
{{else}}<p>Its bot asks for no permissions beyond knowing it is installed.</p>{{end}}
{{if .UserScopes}}<p>Each member who later approves it can let it act as them to:</p>
<ul class="scopes">{{range .UserScopes}}<li>{{.Words}} <small>(<code>{{.Name}}</code>)</small></li>{{end}}</ul>{{end}}
{{if .Tools}}<p>Its tools:</p>
<ul class="tools">{{range .Tools}}<li><strong>{{.DisplayName}}</strong> <small>(<code>{{.Name}}</code>; {{.Access}}, {{.DataClass}} data)</small>: {{.Description}}</li>{{end}}</ul>{{end}}
<p><a href="{{.PrivacyPolicy}}" rel="noopener noreferrer">Privacy policy of {{.Developer}}</a></p>
<form method="post" action="/app/kits/install">
<input type="hidden" name="link" value="{{.Link}}">
<input type="hidden" name="version" value="{{.Version}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" class="primary">Install</button>
</form>
` + pageFoot + `{{end}}

{{define "install_done"}}` + pageHead + `<h1>{{.Kit}} is installed</h1>
<p>{{if .Updated}}The installation of <strong>{{.Kit}}</strong> in the workspace <strong>{{.Workspace}}</strong> now runs version {{.Version}}.{{else}}<strong>{{.Kit}}</strong> version {{.Version}} is installed in the workspace <strong>{{.Workspace}}</strong>.{{end}}</p>
<p>Installation id: <code>{{.InstallationID}}</code></p>
<p><a href="/app/">Done</a></p>
` + pageFoot + `{{end}}
`))

// installTarget is what a working install link installs.
type installTarget struct {
	link    string // the secret, carried by the consent form only
	kit     *kitpb.Kit
	version *kitpb.KitVersion
	man     *manifest.Manifest
}

// openInstallLink finds what a link installs. Every way a link fails
// (malformed, unknown, replaced, deleted, Kit made private) is the same
// not_found, so the page tells nothing about links that do not work.
func (s *Server) openInstallLink(link string) (*installTarget, error) {
	if !ids.WellFormed(link, ids.InstallLink) {
		return nil, kiterr.Absent("install link")
	}
	h := ids.Hash(link)
	kitID, err := actors.KitByInstallLink(s.env, h[:])
	if err != nil {
		return nil, err
	}
	r, err := ask[*kitpb.OpenInstallLinkReply](s, actors.KindKit, kitID, &kitpb.OpenInstallLink{LinkHash: h[:]})
	if err != nil {
		return nil, err
	}
	man := s.published.Parse(r.Kit.Id, r.Version.Version, r.Version.Manifest)
	if man == nil {
		return nil, kiterr.New(kiterr.Internal, "the published manifest no longer parses")
	}
	return &installTarget{link: link, kit: r.Kit, version: r.Version, man: man}, nil
}

// installer is the signed-in member who opened a link.
type installer struct {
	user      *kitpb.User
	workspace string // name
}

// installerOf checks that the member of sess may install Kits: an active
// admin or owner. kitName names the Kit on the 403 page so that a member
// knows what to ask an admin for.
func (s *Server) installerOf(sess *actors.WebSession, kitName string) (*installer, error) {
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.GetUser{UserId: sess.UserID})
	if err != nil {
		return nil, err
	}
	ws, err := ask[*kitpb.WorkspaceReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.GetWorkspace{})
	if err != nil {
		return nil, err
	}
	if !u.User.Active || (u.User.Role != "admin" && u.User.Role != "owner") {
		return nil, kiterr.New(kiterr.Forbidden, "Only an admin or owner of the workspace "+ws.Workspace.Name+
			" can install "+kitName+". Ask one of them to open this install link")
	}
	return &installer{user: u.User, workspace: ws.Workspace.Name}, nil
}

// installFail answers the error page of the install page.
func (s *Server) installFail(ctx *fasthttp.RequestCtx, err error) {
	switch kiterr.CodeOf(err) {
	case kiterr.NotFound:
		s.errorPage(ctx, kiterr.NotFound,
			"This install link does not work. Its developer may have replaced or turned it off: ask them for the current link.")
	default:
		s.failPage(ctx, err) // forbidden: a 403 page with the message; others: 500
	}
}

// InstallPage shows the consent summary of the Kit a link installs. The
// link is checked before the session, so a link that does not work is a
// 404 page, never a sign-in.
func (s *Server) InstallPage(ctx *fasthttp.RequestCtx) {
	link := string(ctx.QueryArgs().Peek("link"))
	t, err := s.openInstallLink(link)
	if err != nil {
		s.installFail(ctx, err)
		return
	}
	sess, secret := s.session(ctx)
	if sess == nil {
		next := InstallPath + "?" + url.Values{"link": {link}}.Encode()
		redirect(ctx, "/app/signin?"+url.Values{"next": {next}}.Encode(), fasthttp.StatusFound)
		return
	}
	in, err := s.installerOf(sess, t.kit.DisplayName)
	if err != nil {
		s.installFail(ctx, err)
		return
	}
	if t.kit.State == actors.KitSuspended {
		// The install would be refused: no consent is asked for it.
		s.installFail(ctx, actors.ErrKitSuspended)
		return
	}
	s.installConsent(ctx, fasthttp.StatusOK, t, in, sess, secret, "")
}

// installConsent renders the consent page of t for the installer.
func (s *Server) installConsent(ctx *fasthttp.RequestCtx, status int, t *installTarget, in *installer, sess *actors.WebSession, secret, problem string) {
	installed, err := actors.InstalledHere(s.env, sess.WorkspaceID, t.kit.Id)
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	c := t.man.ConsentSummary(manifest.SummaryOptions{Available: true, Installed: installed})
	type scope struct{ Name, Words string }
	words := func(names []string) []scope {
		out := make([]scope, 0, len(names))
		for _, n := range names {
			out = append(out, scope{n, ScopeInWords(n)})
		}
		return out
	}
	s.render(ctx, status, "install_consent", struct {
		Title, Kit, Slug, Version, Developer, Description, Workspace, Problem, Link, CSRF string
		PrivacyPolicy                                                                     string
		Installed                                                                         bool
		BotScopes, UserScopes                                                             []scope
		Tools                                                                             []manifest.ToolSummary
	}{
		Title: "Install " + c.DisplayName, Kit: c.DisplayName, Slug: c.Slug, Version: c.Version, Developer: c.DeveloperName,
		Description: c.Description, Workspace: in.workspace, Problem: problem, Link: t.link, CSRF: SessionCSRF(secret),
		PrivacyPolicy: c.PrivacyPolicyURL, Installed: installed,
		BotScopes: words(c.BotScopes), UserScopes: words(c.UserScopes), Tools: c.Tools,
	})
}

// Install installs the version the consent page showed into the
// member's workspace (or updates the installation there), then has the Kit
// log the use. The link, the role and the version are checked again: the
// page may be old.
func (s *Server) Install(ctx *fasthttp.RequestCtx) {
	f := ctx.PostArgs()
	sess, secret := s.formSession(ctx, f)
	if sess == nil {
		return
	}
	t, err := s.openInstallLink(string(f.Peek("link")))
	if err != nil {
		s.installFail(ctx, err)
		return
	}
	in, err := s.installerOf(sess, t.kit.DisplayName)
	if err != nil {
		s.installFail(ctx, err)
		return
	}
	if string(f.Peek("version")) != t.version.Version {
		// A new version may ask for more: consent covers what was shown.
		s.installConsent(ctx, kiterr.Conflict.Status(), t, in, sess, secret,
			"This Kit was updated since the page was shown. Review what it asks for now, then install.")
		return
	}
	updated, err := actors.InstalledHere(s.env, sess.WorkspaceID, t.kit.Id)
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.Install{KitId: t.kit.Id, Version: t.version.Version})
	if err != nil {
		// not_found: the Kit became private since the link was checked.
		s.installFail(ctx, err)
		return
	}
	if _, err := ask[*kitpb.Ok](s, actors.KindKit, t.kit.Id, &kitpb.InstallLinkUsed{InstallationId: r.Installation.Id, Version: t.version.Version}); err != nil {
		s.failPage(ctx, err)
		return
	}
	s.render(ctx, fasthttp.StatusOK, "install_done", struct {
		Title, Kit, Version, Workspace, InstallationID string
		Updated                                        bool
	}{"Installed " + r.Installation.KitDisplayName, r.Installation.KitDisplayName, r.Installation.KitVersion, in.workspace, r.Installation.Id, updated})
}
