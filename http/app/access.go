package app

import (
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The API access page of an installation: what docs/api.md puts "on
// the Kit's API access page" (bot tokens, webhooks, secrets), for the workspace's admins and owners. Each
// form posts to its own path under the page and is answered with the page
// again, saying what happened; a secret made by the post (a bot token, a
// webhook URL, a client or signing secret) is on that answer only. The
// actions are the actor requests the operator API sends (OPERATIONS.md 2),
// and the actors write their audit entries, so both surfaces do the same.

// InstallationsPath is the prefix of the API access pages:
// InstallationsPath + installation id.
const InstallationsPath = "/app/installations/"

// PathParam is the request's user value under which the router hands a
// page its path parameter (the installation id).
const PathParam = "app.path"

func pathParam(ctx *fasthttp.RequestCtx) string {
	v, _ := ctx.UserValue(PathParam).(string)
	return v
}

var _ = template.Must(pages.New("access").Parse(`
{{define "access"}}` + pageHead + `<p><a href="/app/">← Home</a></p>
<h1>API access: {{.Kit}}</h1>
<p><strong>{{.Kit}}</strong> (<code>{{.Slug}}</code>, version {{.Version}}) in the workspace <strong>{{.Workspace}}</strong>.</p>
{{if .Suspended}}<p class="error">` + suspendedWords + `</p>{{end}}
{{if .Problem}}<p class="error" role="alert">{{.Problem}}</p>{{end}}
{{if .Notice}}<p class="notice" role="status">{{.Notice}}</p>{{end}}
{{with .Shown}}<section class="shown">
<h2>{{.Title}}</h2>
<label for="shown-secret">{{.Label}}</label>
<input type="text" id="shown-secret" value="{{.Value}}" readonly autocomplete="off" spellcheck="false">
<button type="button" data-copy="shown-secret">Copy</button>
<p><strong>This is the only time it is shown.</strong> Store it now: Kit keeps only a fingerprint of it and cannot show it again.{{if .Note}} {{.Note}}{{end}}</p>
</section>{{end}}

<h2>Channels of the Kit bot</h2>
{{if not .Bot}}<p>` + noBot + `</p>
{{else}}{{if .Channels}}<ul class="items">{{range .Channels}}<li><span>{{.Name}}</span>
<form method="post" action="{{$.Path}}/channels/remove"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="conversation" value="{{.ID}}">
<button type="submit" aria-label="Remove the Kit bot from {{.Name}}">Remove</button></form></li>
{{end}}</ul>{{else}}<p>The Kit bot is in no channel yet.</p>{{end}}
{{if .Choices}}<form method="post" action="{{.Path}}/channels"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label for="add-channel">Add the Kit bot to a channel</label>
<select id="add-channel" name="conversation">{{range .Choices}}<option value="{{.ID}}">{{.Name}}</option>{{end}}</select>
<button type="submit">Add to channel</button></form>{{end}}{{end}}

<h2>Bot tokens</h2>
<p>A bot token lets the Kit's backend call the Web API as its bot.</p>
{{if .Tokens}}<ul class="items">{{range .Tokens}}<li><span>Created {{.Created}} · {{if .LastUsed}}last used {{.LastUsed}}{{else}}never used{{end}}{{if .Expires}} · rotated, works until {{.Expires}}{{end}}</span>
<form method="post" action="{{$.Path}}/bot-tokens/revoke"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="token" value="{{.ID}}">
<button type="submit" class="danger" aria-label="Revoke the bot token created {{.Created}}">Revoke</button></form></li>
{{end}}</ul>{{else}}<p>This installation has no bot token.</p>{{end}}
{{if .Bot}}<form method="post" action="{{.Path}}/bot-tokens"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" class="primary">Create bot token</button></form>
{{else}}{{if .Tokens}}<p>They do not work while the installed version has no bot.</p>{{end}}{{end}}

<h2>Incoming webhooks</h2>
{{if .WebhooksAllowed}}<p>A webhook URL posts into one channel as the Kit bot. This Kit allows {{.MaxWebhooks}} active at a time.</p>
{{if .Webhooks}}<ul class="items">{{range .Webhooks}}<li><span>{{.Channel}} · created {{.Created}} · {{.State}}</span>
{{if .Active}}<form method="post" action="{{$.Path}}/webhooks/revoke"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="webhook" value="{{.ID}}">
<button type="submit" class="danger" aria-label="Revoke the webhook of {{.Channel}} created {{.Created}}">Revoke</button></form>{{end}}</li>
{{end}}</ul>{{else}}<p>This installation has no webhook.</p>{{end}}
{{if .MyChannels}}<form method="post" action="{{.Path}}/webhooks"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label for="webhook-channel">Channel for a new webhook</label>
<select id="webhook-channel" name="conversation">{{range .MyChannels}}<option value="{{.ID}}">{{.Name}}</option>{{end}}</select>
<button type="submit" class="primary">Create webhook</button></form>
{{else}}<p>You can create a webhook only for a channel you are a member of, and you are in none.</p>{{end}}
{{else}}<p>This Kit does not ask for incoming webhooks.</p>{{end}}

{{if .Own}}<h2>Credentials of the Kit</h2>
<p>Client ID: <code>{{.KitID}}</code></p>
<p>Client secret: {{if .ClientSecret}}generated {{.ClientSecret}}{{else}}none yet{{end}}.</p>
<form method="post" action="{{.Path}}/client-secret"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit">Generate client secret</button></form>
<p>Signing secret: {{if .SigningSecret}}{{.SigningSecret}}{{else}}none yet{{end}}.</p>
<form method="post" action="{{.Path}}/signing-secret"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit">Rotate signing secret</button></form>{{end}}

<h2>Uninstall</h2>
<p><a href="{{.Path}}/uninstall">Uninstall {{.Kit}}…</a></p>
<script>` + copyScript + `</script>
` + pageFoot + `{{end}}

{{define "uninstall"}}` + pageHead + `<h1>Uninstall {{.Kit}}?</h1>
<p>{{.Kit}} leaves the workspace <strong>{{.Workspace}}</strong>: its bot leaves every channel, its tokens stop working at once and its webhook URLs stop answering. Installing it again later starts over.</p>
<form method="post" action="{{.Path}}/uninstall"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" class="danger">Uninstall {{.Kit}}</button></form>
<p><a href="{{.Path}}">Cancel</a></p>
` + pageFoot + `{{end}}

{{define "uninstalled"}}` + pageHead + `<h1>{{.Kit}} is uninstalled</h1>
<p>{{.Kit}} was removed from the workspace <strong>{{.Workspace}}</strong>. Its tokens and webhooks no longer work.</p>
<p><a href="/app/">Home</a></p>
` + pageFoot + `{{end}}
`))

// access is a checked request of an API access page: an active admin or
// owner of the workspace of a live installation.
// suspendedWords tell the members of a workspace why its installation of
// a suspended Kit does nothing (docs/api.md "Kit state"): nothing on the
// pages changes otherwise, and the tokens and webhooks listed look fine.
const suspendedWords = `An operator of this service suspended this Kit: its tokens, webhooks, commands and tool calls are refused and its events wait until it is resumed. Nothing is deleted: all of it works again once it is resumed.`

type access struct {
	sess   *actors.WebSession
	secret string // the session cookie, for the forms' CSRF token
	member *kitpb.User
	inst   *kitpb.Installation
}

func (a *access) path() string { return InstallationsPath + a.inst.Id }

// errNoInstallation is the one 404 of the pages: unknown, uninstalled and
// another workspace's installation read alike.
var errNoInstallation = kiterr.Absent("installation")

// openAccess checks the installation and the member of a page request.
// It answers the error page itself and returns nil when the request may
// not go on.
func (s *Server) openAccess(ctx *fasthttp.RequestCtx, sess *actors.WebSession, secret string) *access {
	id := pathParam(ctx)
	var inst *kitpb.Installation
	var err error = errNoInstallation
	if ids.Valid(id) {
		var r *kitpb.InstallationReply
		if r, err = ask[*kitpb.InstallationReply](s, actors.KindInstallation, id, &kitpb.GetInstallation{}); err == nil {
			inst = r.Installation
			if inst.Uninstalled || inst.WorkspaceId != sess.WorkspaceID {
				err = errNoInstallation
			}
		}
	}
	if err != nil {
		s.accessFail(ctx, err)
		return nil
	}
	u, err := ask[*kitpb.UserReply](s, actors.KindWorkspace, sess.WorkspaceID, &kitpb.GetUser{UserId: sess.UserID})
	if err != nil {
		s.failPage(ctx, err)
		return nil
	}
	if !isAdmin(u.User) {
		s.errorPage(ctx, kiterr.Forbidden,
			"Only an admin or owner of the workspace can open the API access page of "+inst.KitDisplayName+". Ask one of them for what you need.")
		return nil
	}
	return &access{sess: sess, secret: secret, member: u.User, inst: inst}
}

func isAdmin(u *kitpb.User) bool { return u.Active && (u.Role == "admin" || u.Role == "owner") }

// accessFail answers the error page of a request that found no page.
func (s *Server) accessFail(ctx *fasthttp.RequestCtx, err error) {
	if kiterr.CodeOf(err) == kiterr.NotFound {
		s.errorPage(ctx, kiterr.NotFound,
			"There is no installation at this address in your workspace. It may have been uninstalled.")
		return
	}
	s.failPage(ctx, err)
}

// AccessPage is GET /app/installations/{id}.
func (s *Server) AccessPage(ctx *fasthttp.RequestCtx) {
	sess, secret := s.session(ctx)
	if sess == nil {
		next := string(ctx.Path())
		redirect(ctx, "/app/signin?"+url.Values{"next": {next}}.Encode(), fasthttp.StatusFound)
		return
	}
	if a := s.openAccess(ctx, sess, secret); a != nil {
		s.accessPage(ctx, a, fasthttp.StatusOK, outcome{})
	}
}

// outcome is what a form post did, shown above the page.
type outcome struct {
	problem, notice string
	shown           *shown
}

// shown is a secret shown once.
type shown struct{ Title, Label, Value, Note string }

// newShown is a secret shown once, titled and labelled name.
func newShown(name, value, note string) *shown {
	return &shown{Title: name, Label: name, Value: value, Note: note}
}

// channel is a conversation as the pages name it.
type channel struct{ ID, Name string }

func (s *Server) accessPage(ctx *fasthttp.RequestCtx, a *access, status int, o outcome) {
	type token struct{ ID, Created, LastUsed, Expires string }
	type webhook struct {
		ID, Channel, Created, State string
		Active                      bool
	}
	data := struct {
		Title, Kit, Slug, Version, Workspace, Path, CSRF, KitID string
		Problem, Notice                                         string
		Shown                                                   *shown
		Channels, Choices, MyChannels                           []channel
		Tokens                                                  []token
		WebhooksAllowed                                         bool
		MaxWebhooks                                             int32
		Webhooks                                                []webhook
		Own, Bot, Suspended                                     bool
		ClientSecret, SigningSecret                             string
	}{
		Title: "API access: " + a.inst.KitDisplayName, Kit: a.inst.KitDisplayName, Slug: a.inst.KitSlug,
		Version: a.inst.KitVersion, Workspace: a.inst.WorkspaceName, Path: a.path(), CSRF: SessionCSRF(a.secret),
		KitID: a.inst.KitId, Problem: o.problem, Notice: o.notice, Shown: o.shown,
		WebhooksAllowed: slices.Contains(a.inst.BotScopes, actors.WebhookScope) && a.inst.MaxWebhooks > 0,
		MaxWebhooks:     a.inst.MaxWebhooks, Bot: actors.HasBot(a.inst),
	}
	fail := func(err error) { s.failPage(ctx, err) }
	suspended, err := s.env.KitSuspended(a.inst.KitId)
	if err != nil {
		fail(err)
		return
	}
	data.Suspended = suspended
	names := map[string]string{}
	for _, id := range a.inst.ChannelIds {
		name, err := s.channelName(id)
		if err != nil {
			fail(err)
			return
		}
		names[id] = name
		data.Channels = append(data.Channels, channel{id, name})
	}
	mine, err := s.memberChannels(a.sess)
	if err != nil {
		fail(err)
		return
	}
	data.MyChannels = mine
	for _, c := range mine {
		if !slices.Contains(a.inst.ChannelIds, c.ID) {
			data.Choices = append(data.Choices, c)
		}
	}
	toks, err := ask[*kitpb.BotTokensReply](s, actors.KindInstallation, a.inst.Id, &kitpb.ListBotTokens{})
	if err != nil {
		fail(err)
		return
	}
	for _, t := range toks.Tokens {
		data.Tokens = append(data.Tokens, token{t.Id, when(t.CreatedAt), when(t.LastUsedAt), when(t.ExpiresAt)})
	}
	hooks, err := ask[*kitpb.WebhooksReply](s, actors.KindInstallation, a.inst.Id, &kitpb.ListWebhooks{})
	if err != nil {
		fail(err)
		return
	}
	for _, h := range hooks.Webhooks {
		name, ok := names[h.ConversationId]
		if !ok {
			if name, err = s.channelName(h.ConversationId); err != nil {
				fail(err)
				return
			}
			names[h.ConversationId] = name
		}
		data.Webhooks = append(data.Webhooks, webhook{h.Id, name, when(h.CreatedAt), webhookState(h), h.State == actors.WebhookActive})
	}
	if d, own, err := s.ownKit(a); err != nil {
		fail(err)
		return
	} else if own {
		data.Own = true
		if cs := d.ClientSecret; cs != nil && cs.Generation > 0 {
			data.ClientSecret = when(cs.CreatedAt)
		}
		if ss := d.SigningSecret; ss != nil && ss.Generation > 0 {
			data.SigningSecret = "generation " + strconv.Itoa(int(ss.Generation)) + ", made " + when(ss.CreatedAt)
		}
	}
	s.render(ctx, status, "access", data)
}

// ownKit returns the Kit's detail when the installation's Kit is a private
// Kit of this workspace: only its own workspace manages its credentials.
func (s *Server) ownKit(a *access) (*kitpb.KitDetailReply, bool, error) {
	d, err := ask[*kitpb.KitDetailReply](s, actors.KindKit, a.inst.KitId, &kitpb.GetKitDetail{WorkspaceId: a.sess.WorkspaceID})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, false, nil // another workspace's Kit
	}
	if err != nil {
		return nil, false, err
	}
	return d, d.Kit.Distribution == "private", nil
}

// webhookState says a webhook's state in words.
func webhookState(h *kitpb.Webhook) string {
	switch h.State {
	case actors.WebhookActive:
		return "active"
	case actors.WebhookRevoked:
		return "revoked"
	case actors.WebhookUninstalled:
		return "ended by an uninstall"
	}
	if h.Reason == actors.DisabledBotRemoved {
		return "disabled: the Kit bot left the channel"
	}
	return "disabled: the channel was archived"
}

// channelName names a conversation for the pages.
func (s *Server) channelName(id string) (string, error) {
	r, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: &kitpb.Caller{Kind: actors.CallerOperator}})
	if err != nil {
		return "", err
	}
	return conversationName(r.Conversation), nil
}

func conversationName(c *kitpb.Conversation) string {
	name := "#" + c.GetName()
	if c.GetName() == "" {
		name = "an unnamed " + c.Kind
	}
	if c.Visibility == "private" {
		name += " (private)"
	}
	if c.Archived {
		name += " (archived)"
	}
	return name
}

// maxChannelChoices bounds the channels the forms offer: a member of more
// channels than this sees the first ones by creation.
const maxChannelChoices = 200

// maxConversationsScanned bounds the member's conversations one page view
// reads for its channels: each is a conversation actor asked (and woken),
// and a member's direct messages and groups, which come among them by
// creation, have no bound of their own.
const maxConversationsScanned = 5 * maxChannelChoices

// memberChannels are the live channels the member of sess belongs to, the
// first maxChannelChoices by creation: the Kit bot may join them, and the
// member may create a webhook for them. The member's conversations are
// read a page at a time until that many channels are found, or
// maxConversationsScanned were read: direct messages, groups and archived
// channels among them do not count.
func (s *Server) memberChannels(sess *actors.WebSession) ([]channel, error) {
	caller := &kitpb.Caller{Kind: actors.CallerUser, WorkspaceId: sess.WorkspaceID, UserId: sess.UserID}
	var out []channel
	for after, more, read := "", true, 0; more && len(out) < maxChannelChoices && read < maxConversationsScanned; read += maxChannelChoices {
		var convs []string
		var err error
		if convs, more, err = actors.MemberConversations(s.env, sess.UserID, after, maxChannelChoices); err != nil {
			return nil, err
		}
		for _, id := range convs {
			after = id
			r, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, id, &kitpb.GetConversation{Caller: caller})
			if kiterr.CodeOf(err) == kiterr.NotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			if c := r.Conversation; c.Kind == "channel" && !c.Archived && c.WorkspaceId == sess.WorkspaceID {
				if out = append(out, channel{c.Id, conversationName(c)}); len(out) == maxChannelChoices {
					break
				}
			}
		}
	}
	return out, nil
}

// when is a time as the pages show it; "" for none.
func when(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04 UTC")
}

// ---- the forms ----

// accessForm checks a form post of an API access page: CSRF first (403
// page), then the page's own checks. nil: answered already.
func (s *Server) accessForm(ctx *fasthttp.RequestCtx) (*access, *fasthttp.Args) {
	f := ctx.PostArgs()
	sess, secret := s.formSession(ctx, f)
	if sess == nil {
		return nil, nil
	}
	return s.openAccess(ctx, sess, secret), f
}

// problems says, in a person's words, why an action was refused, by the
// code of the refusal. An action lists the codes it expects; any other is
// an error page.
type problems map[kiterr.Code]string

// settle answers a form post: the page with what happened, or with why
// not (at the refusal's status). The installation is read again either
// way: the action (a webhook adds the Kit bot to its channel) or another
// admin may have changed it.
func (s *Server) settle(ctx *fasthttp.RequestCtx, a *access, err error, words problems, o outcome) {
	status := fasthttp.StatusOK
	if err != nil {
		code := kiterr.CodeOf(err)
		w, ok := words[code]
		if !ok {
			s.failPage(ctx, err)
			return
		}
		status, o = code.Status(), outcome{problem: w}
	}
	if a.inst, err = s.reload(a.inst.Id); err != nil {
		s.accessFail(ctx, err)
		return
	}
	s.accessPage(ctx, a, status, o)
}

// reload reads the installation again.
func (s *Server) reload(id string) (*kitpb.Installation, error) {
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, id, &kitpb.GetInstallation{})
	if err != nil {
		return nil, err
	}
	if r.Installation.Uninstalled {
		return nil, errNoInstallation
	}
	return r.Installation, nil
}

// formID reads the id field of a form: a field that is not an id is a 400
// (its value is never shown back).
func formID(f *fasthttp.Args, field, what string) (string, error) {
	id := string(f.Peek(field))
	if !ids.Valid(id) {
		return "", kiterr.Invalid(field, "must be "+what)
	}
	return id, nil
}

// Words for the refusals the forms can meet.
const (
	noBot         = "This Kit has no bot in its installed version: it joins no channel and gets no bot token."
	chooseChannel = "Choose a channel from the list."
	goneNow       = "It is no longer there: the page now shows what there is."
)

// byID runs a form that names one channel, token or webhook by its id in
// field: request is what the installation is asked.
func (s *Server) byID(ctx *fasthttp.RequestCtx, field, what string, request func(id string) proto.Message, words problems, done outcome) {
	a, f := s.accessForm(ctx)
	if a == nil {
		return
	}
	id, err := formID(f, field, what)
	if err == nil {
		_, err = ask[proto.Message](s, actors.KindInstallation, a.inst.Id, request(id))
	}
	s.settle(ctx, a, err, words, done)
}

// AddChannel is POST /app/installations/{id}/channels: the Kit bot joins
// a channel (operator: POST /ops/v1/installations/{id}/channels).
// The page adds the bot only to a channel the admin is a member of (the
// ones it offers); the operator API may add it to any channel.
func (s *Server) AddChannel(ctx *fasthttp.RequestCtx) {
	a, f := s.accessForm(ctx)
	if a == nil {
		return
	}
	words := problems{kiterr.Validation: chooseChannel, kiterr.NotFound: chooseChannel, kiterr.Conflict: chooseChannel}
	if !actors.HasBot(a.inst) {
		// The installation would refuse it as well; these words say why.
		s.settle(ctx, a, actors.ErrNoBot, problems{kiterr.Conflict: noBot}, outcome{})
		return
	}
	id, err := formID(f, "conversation", "a channel")
	if err == nil {
		err = s.memberSees(a, id)
	}
	if err == nil {
		_, err = ask[proto.Message](s, actors.KindInstallation, a.inst.Id, &kitpb.AddChannel{ConversationId: id})
	}
	s.settle(ctx, a, err, words, outcome{notice: "The Kit bot was added to the channel."})
}

// memberSees is nil when the page's admin is a member of the conversation,
// else not_found: the forms take only the channels they offer, and one
// the admin cannot see reads as an unknown id, never as a 403 that would
// say it exists.
func (s *Server) memberSees(a *access, conversationID string) error {
	caller := &kitpb.Caller{Kind: actors.CallerUser, WorkspaceId: a.sess.WorkspaceID, UserId: a.sess.UserID}
	_, err := ask[*kitpb.ConversationReply](s, actors.KindConversation, conversationID, &kitpb.GetConversation{Caller: caller})
	return err
}

// RemoveChannel is POST /app/installations/{id}/channels/remove (operator:
// DELETE /ops/v1/installations/{id}/channels/{conversationId}).
func (s *Server) RemoveChannel(ctx *fasthttp.RequestCtx) {
	s.byID(ctx, "conversation", "a channel", func(id string) proto.Message { return &kitpb.RemoveChannel{ConversationId: id} },
		problems{kiterr.Validation: chooseChannel, kiterr.NotFound: "The Kit bot is not in that channel. " + goneNow},
		outcome{notice: "The Kit bot left the channel. Webhooks of that channel are disabled."})
}

// CreateBotToken is POST /app/installations/{id}/bot-tokens (operator:
// POST /ops/v1/installations/{id}/bot-tokens).
func (s *Server) CreateBotToken(ctx *fasthttp.RequestCtx) {
	a, _ := s.accessForm(ctx)
	if a == nil {
		return
	}
	secret := ids.NewSecret(ids.BotToken)
	hash := ids.Hash(secret)
	_, err := ask[*kitpb.CredentialReply](s, actors.KindInstallation, a.inst.Id, &kitpb.CreateBotToken{SecretHash: hash[:]})
	s.settle(ctx, a, err, problems{kiterr.Conflict: noBot}, outcome{shown: newShown("New bot token", secret, "Use it as Authorization: Bearer in the Kit's backend.")})
}

// RevokeBotToken is POST /app/installations/{id}/bot-tokens/revoke: by the
// token's id, as listed (operator: POST /ops/v1/tokens/revoke, by value).
func (s *Server) RevokeBotToken(ctx *fasthttp.RequestCtx) {
	s.revokeListed(ctx, "token", "bot token", func(id string) proto.Message { return &kitpb.RevokeCredential{TokenId: id} },
		"The bot token was revoked: calls with it now fail.")
}

// revokeListed revokes one of the installation's listed things (a bot
// token, a webhook), chosen by id in form field field; what names it.
func (s *Server) revokeListed(ctx *fasthttp.RequestCtx, field, what string, request func(id string) proto.Message, notice string) {
	s.byID(ctx, field, "a "+what+" of the list", request,
		problems{kiterr.Validation: "Choose a " + what + " from the list.", kiterr.NotFound: "That " + what + " is not one of this installation's. " + goneNow},
		outcome{notice: notice})
}

// CreateWebhook is POST /app/installations/{id}/webhooks, created by the
// signed-in admin (operator: POST /ops/v1/installations/{id}/webhooks,
// created by createdByUserId).
func (s *Server) CreateWebhook(ctx *fasthttp.RequestCtx) {
	a, f := s.accessForm(ctx)
	if a == nil {
		return
	}
	conv, err := formID(f, "conversation", "a channel")
	if err == nil {
		err = s.memberSees(a, conv)
	}
	secret, webhookID := ids.NewSecret(""), ids.New()
	if err == nil {
		_, err = ask[*kitpb.WebhookReply](s, actors.KindInstallation, a.inst.Id, &kitpb.CreateWebhook{
			WebhookId: webhookID, ConversationId: conv, Creator: a.member, SecretHash: actors.HookSecretHash(secret),
		})
	}
	max := strconv.Itoa(int(a.inst.MaxWebhooks))
	s.settle(ctx, a, err, problems{
		kiterr.Validation:   chooseChannel,
		kiterr.NotFound:     chooseChannel,
		kiterr.Forbidden:    "You can create a webhook only for a channel you are a member of.",
		kiterr.MissingScope: "This Kit does not ask for incoming webhooks, so none can be made for it.",
		kiterr.Conflict:     "No webhook was made: this Kit allows " + max + " active webhooks and has that many (revoke one first), or the channel was archived.",
	}, outcome{shown: newShown("New webhook URL", actors.WebhookURL(s.publicURL, a.inst.Id, webhookID, secret),
		"Anyone with the URL can post into the channel as the Kit bot: keep it secret.")})
}

// RevokeWebhook is POST /app/installations/{id}/webhooks/revoke (operator:
// DELETE /ops/v1/webhooks/{id}).
func (s *Server) RevokeWebhook(ctx *fasthttp.RequestCtx) {
	s.revokeListed(ctx, "webhook", "webhook", func(id string) proto.Message { return &kitpb.RevokeWebhook{WebhookId: id} },
		"The webhook was revoked: its URL no longer works.")
}

// ClientSecret is POST /app/installations/{id}/client-secret (operator:
// POST /ops/v1/kits/{kitId}/client-secret).
func (s *Server) ClientSecret(ctx *fasthttp.RequestCtx) {
	s.rotateKitSecret(ctx, actors.SecretClient)
}

// SigningSecret is POST /app/installations/{id}/signing-secret (operator:
// POST /ops/v1/kits/{kitId}/signing-secret).
func (s *Server) SigningSecret(ctx *fasthttp.RequestCtx) {
	s.rotateKitSecret(ctx, actors.SecretSigning)
}

func (s *Server) rotateKitSecret(ctx *fasthttp.RequestCtx, which string) {
	a, _ := s.accessForm(ctx)
	if a == nil {
		return
	}
	_, own, err := s.ownKit(a)
	if err == nil && !own {
		err = kiterr.New(kiterr.Forbidden, "not a private Kit of this workspace")
	}
	var r *kitpb.KitSecretReply
	secret, rotate := actors.NewKitSecret(which)
	if err == nil {
		r, err = ask[*kitpb.KitSecretReply](s, actors.KindKit, a.inst.KitId, rotate)
	}
	name := "New client secret"
	if which == actors.SecretSigning {
		name = "New signing secret"
	}
	o := outcome{shown: newShown(name, secret, "")}
	if err == nil && r.Secret.PreviousExpiresAt != 0 {
		o.shown.Note = "The previous one keeps working until " + when(r.Secret.PreviousExpiresAt) + "."
	}
	s.settle(ctx, a, err, problems{kiterr.Forbidden: "Only the workspace that made a private Kit manages its credentials; this Kit's developer manages them."}, o)
}

// UninstallPage is GET /app/installations/{id}/uninstall: the
// confirmation.
func (s *Server) UninstallPage(ctx *fasthttp.RequestCtx) {
	sess, secret := s.session(ctx)
	if sess == nil {
		redirect(ctx, "/app/signin?"+url.Values{"next": {string(ctx.Path())}}.Encode(), fasthttp.StatusFound)
		return
	}
	a := s.openAccess(ctx, sess, secret)
	if a == nil {
		return
	}
	s.render(ctx, fasthttp.StatusOK, "uninstall", struct{ Title, Kit, Workspace, Path, CSRF string }{
		"Uninstall " + a.inst.KitDisplayName, a.inst.KitDisplayName, a.inst.WorkspaceName, a.path(), SessionCSRF(secret),
	})
}

// Uninstall is POST /app/installations/{id}/uninstall (operator: DELETE
// /ops/v1/installations/{id}).
func (s *Server) Uninstall(ctx *fasthttp.RequestCtx) {
	a, _ := s.accessForm(ctx)
	if a == nil {
		return
	}
	if _, err := ask[*kitpb.Ok](s, actors.KindInstallation, a.inst.Id, &kitpb.Uninstall{}); err != nil {
		s.accessFail(ctx, err)
		return
	}
	s.render(ctx, fasthttp.StatusOK, "uninstalled", struct{ Title, Kit, Workspace string }{
		a.inst.KitDisplayName + " uninstalled", a.inst.KitDisplayName, a.inst.WorkspaceName,
	})
}
