package app

import (
	"html/template"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The member's home page (docs/decisions.md "Home and API access pages"): the workspace, the Kits installed in
// it with their bot's scopes and channels, and the authorizations the
// member gave each Kit for user tokens, each with a way to revoke it.
// Admins and owners find each Kit's API access page from here.

var _ = template.Must(pages.New("home").Parse(`
{{define "home"}}` + pageHead + `<h1>Kit</h1>
{{if .Member}}<p>Signed in as <strong>{{.Member}}</strong> ({{.Role}}) in the workspace <strong>{{.Workspace}}</strong>.</p>
{{if .Problem}}<p class="error" role="alert">{{.Problem}}</p>{{end}}
{{if .Notice}}<p class="notice" role="status">{{.Notice}}</p>{{end}}
<h2>Kits installed in {{.Workspace}}</h2>
{{range .Kits}}<section class="kit" aria-labelledby="kit-{{.ID}}">
<h3 id="kit-{{.ID}}">{{.Name}} <small>version {{.Version}}</small></h3>
{{if .Suspended}}<p class="error">` + suspendedWords + `</p>{{end}}
{{if .Scopes}}<p>Its bot can:</p><ul class="scopes">{{range .Scopes}}<li>{{.Words}} <small>(<code>{{.Name}}</code>)</small></li>{{end}}</ul>
{{else}}<p>Its bot asks for no permissions.</p>{{end}}
<p>{{if .Channels}}Its bot is in {{range $i, $c := .Channels}}{{if $i}}, {{end}}{{$c}}{{end}}.{{else}}Its bot is in no channel.{{end}}</p>
{{if .Grants}}<p>You let it act as you:</p><ul class="items">{{range .Grants}}<li><span>since {{.Created}}: {{.Scopes}}</span>
<form method="post" action="/app/authorizations/revoke"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="installation" value="{{.Installation}}"><input type="hidden" name="grant" value="{{.ID}}">
<button type="submit" class="danger" aria-label="Revoke the authorization you gave {{.Kit}} on {{.Created}}">Revoke</button></form></li>
{{end}}</ul>{{end}}
{{if $.Admin}}<p><a href="{{.Path}}">API access of {{.Name}}</a></p>{{end}}
</section>
{{else}}<p>No Kit is installed in this workspace.</p>{{end}}
<form method="post" action="/app/signout"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit">Sign out</button></form>
{{else}}<p><a href="/app/signin">Sign in</a></p>{{end}}
` + pageFoot + `{{end}}
`))

// Home is GET /app/.
func (s *Server) Home(ctx *fasthttp.RequestCtx) {
	sess, secret := s.session(ctx)
	if sess == nil {
		s.render(ctx, fasthttp.StatusOK, "home", struct{ Title, Member string }{Title: "Kit"})
		return
	}
	s.home(ctx, sess, secret, fasthttp.StatusOK, outcome{})
}

func (s *Server) home(ctx *fasthttp.RequestCtx, sess *actors.WebSession, secret string, status int, o outcome) {
	type scope struct{ Name, Words string }
	type grant struct{ ID, Installation, Kit, Created, Scopes string }
	type kit struct {
		ID, Name, Version, Path string
		Suspended               bool
		Scopes                  []scope
		Channels                []string
		Grants                  []grant
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.GetUser{UserId: sess.UserID})
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	ws, err := ask[*kitpb.WorkspaceReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.GetWorkspace{})
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	data := struct {
		Title, Member, Role, Workspace, CSRF, Problem, Notice string
		Admin                                                 bool
		Kits                                                  []kit
	}{
		Title: "Kit", Member: u.User.DisplayName, Role: u.User.Role, Workspace: ws.Workspace.Name,
		CSRF: SessionCSRF(secret), Problem: o.problem, Notice: o.notice, Admin: isAdmin(u.User),
	}
	insts, err := actors.WorkspaceInstallations(s.env, sess.WorkspaceID)
	if err != nil {
		s.failPage(ctx, err)
		return
	}
	for _, id := range insts {
		r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, id, &kitpb.GetInstallation{})
		if err != nil {
			s.failPage(ctx, err)
			return
		}
		in := r.Installation
		if in.Uninstalled {
			continue
		}
		k := kit{ID: in.Id, Name: in.KitDisplayName, Version: in.KitVersion, Path: InstallationsPath + in.Id}
		if k.Suspended, err = s.env.KitSuspended(in.KitId); err != nil {
			s.failPage(ctx, err)
			return
		}
		for _, sc := range in.BotScopes {
			k.Scopes = append(k.Scopes, scope{sc, ScopeInWords(sc)})
		}
		// Named as the member sees them: a channel the member is not in
		// (a private one above all) is counted, not named.
		caller := &kitpb.Caller{Kind: actors.CallerUser, WorkspaceId: sess.WorkspaceID, UserId: sess.UserID}
		hidden := 0
		for _, c := range in.ChannelIds {
			r, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, c, &kitpb.GetConversation{Caller: caller})
			if kiterr.CodeOf(err) == kiterr.NotFound {
				hidden++
				continue
			}
			if err != nil {
				s.failPage(ctx, err)
				return
			}
			k.Channels = append(k.Channels, conversationName(r.Conversation))
		}
		switch {
		case hidden == 1:
			k.Channels = append(k.Channels, "1 channel you are not in")
		case hidden > 1:
			k.Channels = append(k.Channels, strconv.Itoa(hidden)+" channels you are not in")
		}
		gs, err := ask[*kitpb.UserGrantsReply](s, actors.KindInstallation, in.Id, &kitpb.ListUserGrants{UserId: sess.UserID})
		if err != nil {
			s.failPage(ctx, err)
			return
		}
		for _, g := range gs.Grants {
			words := ""
			for i, sc := range g.Scopes {
				if i > 0 {
					words += "; "
				}
				words += ScopeInWords(sc)
			}
			k.Grants = append(k.Grants, grant{g.GrantId, in.Id, in.KitDisplayName, when(g.CreatedAt), words})
		}
		data.Kits = append(data.Kits, k)
	}
	s.render(ctx, status, "home", data)
}

// RevokeAuthorization is POST /app/authorizations/revoke: the member
// revokes an authorization they gave (every token of it stops at once).
func (s *Server) RevokeAuthorization(ctx *fasthttp.RequestCtx) {
	f := ctx.PostArgs()
	sess, secret := s.formSession(ctx, f)
	if sess == nil {
		return
	}
	inst, err := formID(f, "installation", "an installation")
	var grant string
	if err == nil {
		grant, err = formID(f, "grant", "an authorization")
	}
	if err == nil {
		var r *kitpb.InstallationReply
		r, err = ask[*kitpb.InstallationReply](s, actors.KindInstallation, inst, &kitpb.GetInstallation{})
		if err == nil && r.Installation.WorkspaceId != sess.WorkspaceID {
			err = errNoInstallation
		}
	}
	if err == nil {
		// Keyed by the member: nobody revokes another member's authorization.
		_, err = ask[*kitpb.Ok](s, actors.KindInstallation, inst, &kitpb.RevokeUserGrant{UserId: sess.UserID, GrantId: grant})
	}
	switch {
	case err == nil:
		s.home(ctx, sess, secret, fasthttp.StatusOK, outcome{notice: "The authorization was revoked: the Kit can no longer act as you with it."})
	case kiterr.CodeOf(err) == kiterr.Validation || kiterr.CodeOf(err) == kiterr.NotFound:
		s.home(ctx, sess, secret, kiterr.CodeOf(err).Status(), outcome{problem: "That authorization is not one of yours, or it has ended already. The page now shows what there is."})
	default:
		s.failPage(ctx, err)
	}
}
