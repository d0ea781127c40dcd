package app

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The page tests run the app host's handlers on a real single-node cluster
// over an in-memory store, as http/api's tests run the whole server; the
// router is left out (a test sets the path parameter the router would).

var node struct {
	once sync.Once
	srv  *Server
	err  error
}

func testServer(t *testing.T) *Server {
	t.Helper()
	node.once.Do(func() {
		store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
		if err != nil {
			node.err = err
			return
		}
		log := slog.New(slog.DiscardHandler)
		env := &actors.Env{Store: store, Clock: clock.NewTest(), Logger: log, Limits: limits.Spec(), SealKey: make([]byte, 32), OpenKeys: [][]byte{make([]byte, 32)},
			Fatal: func(err error) { panic(fmt.Sprintf("app test: storage failed: %v", err)) }}
		auth := actors.NewAuthenticator(env)
		env.Invalidator = &actors.Caches{Auth: auth}
		n, err := cluster.Start(cluster.Config{}, actors.Kinds(env)...)
		if err != nil {
			node.err = err
			return
		}
		env.Host = n
		node.srv = New(Config{Node: n, Env: env, Auth: auth, PublicURL: "http://kit.test", Logger: log,
			CorrelationID: func(*fasthttp.RequestCtx) string { return "corr" }})
	})
	if node.err != nil {
		t.Fatal(node.err)
	}
	return node.srv
}

// call asks an actor and fails the test on an error.
func call[R proto.Message](t *testing.T, s *Server, kind, identity string, msg proto.Message) R {
	t.Helper()
	r, err := ask[R](s, kind, identity, msg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fixture is a workspace with an admin and a member, each signed in, a
// channel of both, and the workspace's own private Kit installed, which
// asks for incoming webhooks (at most one).
type fixture struct {
	s                          *Server
	ws, admin, member, channel string
	adminCookie, memberCookie  string
	kitID                      string
	inst                       *kitpb.Installation
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := testServer(t)
	f := &fixture{s: s, ws: ids.New(), admin: ids.New(), member: ids.New(), channel: ids.New()}
	call[*kitpb.WorkspaceReply](t, s, actors.KindWorkspace, f.ws, &kitpb.CreateWorkspace{Name: "Pages & Co"})
	call[*kitpb.UserReply](t, s, actors.KindWorkspace, f.ws, &kitpb.CreateUser{UserId: f.admin, DisplayName: "Ada Admin", Role: "admin"})
	call[*kitpb.UserReply](t, s, actors.KindWorkspace, f.ws, &kitpb.CreateUser{UserId: f.member, DisplayName: "Mo Member", Role: "member"})
	f.adminCookie, f.memberCookie = f.session(t, f.admin), f.session(t, f.member)
	name := "general"
	call[*kitpb.ConversationReply](t, s, actors.KindWorkspace, f.ws, &kitpb.CreateConversation{
		ConversationId: f.channel, Kind: "channel", Visibility: "public", Name: &name, MemberIds: []string{f.admin, f.member},
	})
	f.kitID = uploadKit(t, s, f.ws, "private")
	f.inst = call[*kitpb.InstallationReply](t, s, actors.KindWorkspace, f.ws, &kitpb.Install{KitId: f.kitID}).Installation
	return f
}

// uploadKit registers and publishes a Kit of the workspace that asks for
// incoming webhooks (at most one), and returns its id.
func uploadKit(t *testing.T, s *Server, ws, distribution string) string {
	t.Helper()
	slug := "pages-" + strings.ToLower(ids.New()[24:32])
	man, err := json.Marshal(map[string]any{
		"schemaVersion": 1, "slug": slug, "version": "1.0.0",
		"displayName": map[string]any{"en": "Deploy <Bot>"}, "description": map[string]any{"en": "Deploys."},
		"developer":        map[string]any{"name": "Dev", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot":              map[string]any{"displayName": map[string]any{"en": "Bot"}, "scopes": []string{"messages:write", "incoming-webhook"}},
		"incomingWebhooks": map[string]any{"maxPerInstallation": 1},
		"distribution":     distribution,
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := call[*kitpb.SlugReply](t, s, actors.KindSlug, slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: ws})
	v := call[*kitpb.VersionReply](t, s, actors.KindKit, claim.KitId, &kitpb.UploadVersion{
		KitId: claim.KitId, WorkspaceId: ws, VersionId: ids.New(), Manifest: string(man), Publish: true,
	})
	return v.Kit.Id
}

func (f *fixture) session(t *testing.T, user string) string {
	t.Helper()
	secret := ids.NewSecret(ids.SessionCookie)
	h := ids.Hash(secret)
	call[*kitpb.SessionReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateSession{UserId: user, SessionId: ids.New(), SecretHash: h[:]})
	return secret
}

// page is one answer of a page handler.
type page struct {
	status int
	body   string
	header *fasthttp.ResponseHeader
}

// do runs handler on a request to path as the holder of cookie ("": none),
// with form as the body of a POST (csrf added unless form has one).
func (f *fixture) do(handler func(*Server, *fasthttp.RequestCtx), method, path, cookie string, form url.Values) page {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	if id, ok := strings.CutPrefix(path, InstallationsPath); ok {
		id, _, _ = strings.Cut(id, "/")
		ctx.SetUserValue(PathParam, id)
	}
	if cookie != "" {
		ctx.Request.Header.SetCookie(SessionCookie, cookie)
	}
	if method == "POST" {
		if form == nil {
			form = url.Values{}
		}
		if _, ok := form["csrf"]; !ok && cookie != "" {
			form.Set("csrf", SessionCSRF(cookie))
		}
		ctx.Request.Header.SetContentType("application/x-www-form-urlencoded")
		ctx.Request.SetBodyString(form.Encode())
	}
	handler(f.s, &ctx)
	var h fasthttp.ResponseHeader
	ctx.Response.Header.CopyTo(&h)
	return page{ctx.Response.StatusCode(), string(ctx.Response.Body()), &h}
}

func (f *fixture) accessPath() string { return InstallationsPath + f.inst.Id }

func (f *fixture) botTokens(t *testing.T) []*kitpb.BotToken {
	t.Helper()
	return call[*kitpb.BotTokensReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.ListBotTokens{}).Tokens
}

func (f *fixture) webhooks(t *testing.T) []*kitpb.Webhook {
	t.Helper()
	return call[*kitpb.WebhooksReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.ListWebhooks{}).Webhooks
}

var (
	botTokenPattern = regexp.MustCompile(`kbot_[A-Za-z0-9_-]{43}`)
	hookURLPattern  = regexp.MustCompile(`http://kit\.test/hooks/v1/[0-9a-f-]{36}/[0-9a-f-]{36}/[A-Za-z0-9_-]{43}`)
)

// docs/decisions.md "Home and API access pages": who may open the API access page, and what the others see.
func TestAccessPageWhoMayOpenIt(t *testing.T) {
	f := newFixture(t)
	other := newFixture(t)
	uninstalled := newFixture(t)
	call[*kitpb.Ok](t, f.s, actors.KindInstallation, uninstalled.inst.Id, &kitpb.Uninstall{})
	for _, tc := range []struct {
		name, path, cookie string
		status             int
		says               string
	}{
		{"an admin of the workspace sees the page", f.accessPath(), f.adminCookie, 200, "API access: Deploy &lt;Bot&gt;"},
		{"without a session the page sends the browser to sign-in", f.accessPath(), "", 302, ""},
		{"a member who is not an admin gets the 403 page", f.accessPath(), f.memberCookie, 403, "Only an admin or owner of the workspace"},
		{"another workspace's installation is a 404 page", other.accessPath(), f.adminCookie, 404, "There is no installation at this address"},
		{"an unknown installation is the same 404 page", InstallationsPath + ids.New(), f.adminCookie, 404, "There is no installation at this address"},
		{"an installation id that is no id is the same 404 page", InstallationsPath + "nope", f.adminCookie, 404, "There is no installation at this address"},
		{"an uninstalled installation is the same 404 page", uninstalled.accessPath(), uninstalled.adminCookie, 404, "There is no installation at this address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.do((*Server).AccessPage, "GET", tc.path, tc.cookie, nil)
			if p.status != tc.status || !strings.Contains(p.body, tc.says) {
				t.Fatalf("status %d, want %d with %q:\n%s", p.status, tc.status, tc.says, p.body)
			}
			if tc.status == 302 && !strings.HasPrefix(string(p.header.Peek("Location")), "/app/signin?next=%2Fapp%2Finstallations%2F") {
				t.Fatalf("Location %q", p.header.Peek("Location"))
			}
			if tc.status != 302 && !strings.HasPrefix(string(p.header.ContentType()), "text/html") {
				t.Fatalf("Content-Type %q: the app host answers pages", p.header.ContentType())
			}
		})
	}
	t.Run("a member's form post gets the 403 page and changes nothing", func(t *testing.T) {
		p := f.do((*Server).CreateBotToken, "POST", f.accessPath()+"/bot-tokens", f.memberCookie, nil)
		if p.status != 403 || botTokenPattern.MatchString(p.body) || len(f.botTokens(t)) != 0 {
			t.Fatalf("status %d, %d tokens:\n%s", p.status, len(f.botTokens(t)), p.body)
		}
	})
}

// docs/decisions.md "Home and API access pages": every form of the pages is CSRF-protected like the authorize
// page: a post without the session's token is the 403 csrf_rejected page
// and changes nothing.
func TestAccessFormsRefuseAWrongCSRFToken(t *testing.T) {
	f := newFixture(t)
	grantless := url.Values{"installation": {f.inst.Id}, "grant": {ids.New()}}
	for _, tc := range []struct {
		name    string
		handler func(*Server, *fasthttp.RequestCtx)
		path    string
		form    url.Values
	}{
		{"create bot token", (*Server).CreateBotToken, "/bot-tokens", nil},
		{"revoke bot token", (*Server).RevokeBotToken, "/bot-tokens/revoke", url.Values{"token": {ids.New()}}},
		{"create webhook", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {f.channel}}},
		{"revoke webhook", (*Server).RevokeWebhook, "/webhooks/revoke", url.Values{"webhook": {ids.New()}}},
		{"add channel", (*Server).AddChannel, "/channels", url.Values{"conversation": {f.channel}}},
		{"remove channel", (*Server).RemoveChannel, "/channels/remove", url.Values{"conversation": {f.channel}}},
		{"client secret", (*Server).ClientSecret, "/client-secret", nil},
		{"signing secret", (*Server).SigningSecret, "/signing-secret", nil},
		{"uninstall", (*Server).Uninstall, "/uninstall", nil},
		{"revoke authorization", (*Server).RevokeAuthorization, "", grantless},
	} {
		for _, csrf := range []struct{ name, value string }{{"missing", ""}, {"of another session", SessionCSRF(f.memberCookie)}} {
			t.Run(tc.name+" with a token "+csrf.name, func(t *testing.T) {
				form := url.Values{"csrf": {csrf.value}}
				for k, v := range tc.form {
					form[k] = v
				}
				path := f.accessPath() + tc.path
				if tc.path == "" {
					path = "/app/authorizations/revoke"
				}
				p := f.do(tc.handler, "POST", path, f.adminCookie, form)
				if p.status != 403 || !strings.Contains(p.body, "csrf_rejected") {
					t.Fatalf("status %d:\n%s", p.status, p.body)
				}
			})
		}
	}
	t.Run("nothing changed", func(t *testing.T) {
		in := call[*kitpb.InstallationReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.GetInstallation{}).Installation
		d := call[*kitpb.KitDetailReply](t, f.s, actors.KindKit, f.kitID, &kitpb.GetKitDetail{WorkspaceId: f.ws})
		if in.Uninstalled || len(in.ChannelIds) != 0 || len(f.botTokens(t)) != 0 || len(f.webhooks(t)) != 0 || d.ClientSecret != nil || d.SigningSecret != nil {
			t.Fatalf("installation %v, detail %v", in, d)
		}
	})
}

// docs/decisions.md "Home and API access pages": a secret made on the page is shown on the answer to its form
// only; the page lists bot tokens and webhooks, never their values.
func TestAccessSecretsAreShownOnce(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name    string
		handler func(*Server, *fasthttp.RequestCtx)
		path    string
		form    url.Values
		secret  *regexp.Regexp
	}{
		{"a new bot token", (*Server).CreateBotToken, "/bot-tokens", nil, botTokenPattern},
		{"a new webhook URL", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {f.channel}}, hookURLPattern},
		{"a new client secret", (*Server).ClientSecret, "/client-secret", nil, regexp.MustCompile(`kcs_[A-Za-z0-9_-]{43}`)},
		{"a new signing secret", (*Server).SigningSecret, "/signing-secret", nil, regexp.MustCompile(`kss_[A-Za-z0-9_-]{43}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.do(tc.handler, "POST", f.accessPath()+tc.path, f.adminCookie, tc.form)
			if p.status != 200 || !tc.secret.MatchString(p.body) || !strings.Contains(p.body, "only time it is shown") {
				t.Fatalf("status %d:\n%s", p.status, p.body)
			}
			if again := f.do((*Server).AccessPage, "GET", f.accessPath(), f.adminCookie, nil); tc.secret.MatchString(again.body) {
				t.Fatalf("the page shows the secret again:\n%s", again.body)
			}
		})
	}
	t.Run("the page lists the bot token by its creation and last use", func(t *testing.T) {
		p := f.do((*Server).AccessPage, "GET", f.accessPath(), f.adminCookie, nil)
		if toks := f.botTokens(t); len(toks) != 1 || !strings.Contains(p.body, `name="token" value="`+toks[0].Id+`"`) || !strings.Contains(p.body, "never used") {
			t.Fatalf("tokens %v:\n%s", toks, p.body)
		}
	})
	t.Run("the answer that shows a webhook URL lists the Kit bot in its channel", func(t *testing.T) {
		// Creating the webhook added the bot to #general: the answer shows
		// the installation as it is after the action.
		g := newFixture(t)
		p := g.do((*Server).CreateWebhook, "POST", g.accessPath()+"/webhooks", g.adminCookie, url.Values{"conversation": {g.channel}})
		if p.status != 200 || !strings.Contains(p.body, `aria-label="Remove the Kit bot from #general"`) {
			t.Fatalf("status %d:\n%s", p.status, p.body)
		}
	})
	t.Run("the page lists the webhook by channel and state", func(t *testing.T) {
		p := f.do((*Server).AccessPage, "GET", f.accessPath(), f.adminCookie, nil)
		if !strings.Contains(p.body, "#general · created") || !strings.Contains(p.body, "· active") {
			t.Fatalf("page:\n%s", p.body)
		}
	})
	t.Run("the signing secret rotated again shows the previous one's expiry", func(t *testing.T) {
		p := f.do((*Server).SigningSecret, "POST", f.accessPath()+"/signing-secret", f.adminCookie, nil)
		if p.status != 200 || !strings.Contains(p.body, "The previous one keeps working until ") {
			t.Fatalf("status %d:\n%s", p.status, p.body)
		}
	})
}

// docs/decisions.md "Home and API access pages" and OPERATIONS.md 2: the page's refusals are the page again, at
// the refusal's status, in words, never echoing what was sent.
func TestAccessFormRefusals(t *testing.T) {
	f := newFixture(t)
	lonely := ids.New() // a channel without the admin
	name := "lonely"
	call[*kitpb.ConversationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateConversation{
		ConversationId: lonely, Kind: "channel", Visibility: "public", Name: &name, MemberIds: []string{f.member},
	})
	const junk = "<script>junk</script>"
	for _, tc := range []struct {
		name    string
		handler func(*Server, *fasthttp.RequestCtx)
		path    string
		form    url.Values
		status  int
		says    string
	}{
		{"a channel that is not an id is a 400 that does not echo it", (*Server).AddChannel, "/channels", url.Values{"conversation": {junk}}, 400, chooseChannel},
		{"a webhook for a channel without the admin is as for an unknown one", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {lonely}}, 404, chooseChannel},
		{"a webhook for a channel of no one is not found", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {ids.New()}}, 404, chooseChannel},
		{"the first webhook is made", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {f.channel}}, 200, "only time it is shown"},
		{"maxPerInstallation active webhooks refuse one more", (*Server).CreateWebhook, "/webhooks", url.Values{"conversation": {f.channel}}, 409, "this Kit allows 1 active webhooks"},
		{"a bot token that is not listed is not found", (*Server).RevokeBotToken, "/bot-tokens/revoke", url.Values{"token": {ids.New()}}, 404, "not one of this installation"},
		{"a webhook that is not listed is not found", (*Server).RevokeWebhook, "/webhooks/revoke", url.Values{"webhook": {ids.New()}}, 404, "not one of this installation"},
		{"removing the bot from a channel it is not in is not found", (*Server).RemoveChannel, "/channels/remove", url.Values{"conversation": {lonely}}, 404, "not in that channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.do(tc.handler, "POST", f.accessPath()+tc.path, f.adminCookie, tc.form)
			if p.status != tc.status || !strings.Contains(p.body, tc.says) || strings.Contains(p.body, "junk") {
				t.Fatalf("status %d, want %d with %q:\n%s", p.status, tc.status, tc.says, p.body)
			}
		})
	}
	t.Run("the credentials of another workspace's Kit are not the admin's to change", func(t *testing.T) {
		dev := newFixture(t)
		foreign := uploadKit(t, f.s, dev.ws, "unlisted")
		in := call[*kitpb.InstallationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.Install{KitId: foreign}).Installation
		path := InstallationsPath + in.Id
		if p := f.do((*Server).AccessPage, "GET", path, f.adminCookie, nil); p.status != 200 || strings.Contains(p.body, "Credentials of the Kit") {
			t.Fatalf("status %d:\n%s", p.status, p.body)
		}
		p := f.do((*Server).ClientSecret, "POST", path+"/client-secret", f.adminCookie, nil)
		if p.status != 403 || !strings.Contains(p.body, "developer manages them") || strings.Contains(p.body, "kcs_") {
			t.Fatalf("status %d:\n%s", p.status, p.body)
		}
		if d := call[*kitpb.KitDetailReply](t, f.s, actors.KindKit, foreign, &kitpb.GetKitDetail{WorkspaceId: dev.ws}); d.ClientSecret != nil {
			t.Fatalf("a client secret was made: %v", d.ClientSecret)
		}
	})
}

// docs/decisions.md "Home and API access pages": the browser tests find every input by its label, and a
// keyboard or screen reader user needs one: each visible input and select
// of each page has a <label for> naming it.
func TestEveryInputHasALabel(t *testing.T) {
	f := newFixture(t)
	call[*kitpb.InstallationReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.AddChannel{ConversationId: f.channel})
	input := regexp.MustCompile(`<(input|select)\b[^>]*>`)
	attr := func(tag, name string) string {
		m := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(tag)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, tc := range []struct {
		name string
		p    page
	}{
		{"home", f.do((*Server).Home, "GET", "/app/", f.adminCookie, nil)},
		{"API access page", f.do((*Server).AccessPage, "GET", f.accessPath(), f.adminCookie, nil)},
		{"API access page with a secret shown", f.do((*Server).CreateBotToken, "POST", f.accessPath()+"/bot-tokens", f.adminCookie, nil)},
		{"uninstall confirmation", f.do((*Server).UninstallPage, "GET", f.accessPath()+"/uninstall", f.adminCookie, nil)},
		{"sign-in", f.do((*Server).SignInForm, "GET", "/app/signin", "", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.p.status != 200 {
				t.Fatalf("status %d:\n%s", tc.p.status, tc.p.body)
			}
			n := 0
			for _, tag := range input.FindAllString(tc.p.body, -1) {
				if attr(tag, "type") == "hidden" {
					continue
				}
				n++
				id := attr(tag, "id")
				if id == "" || !strings.Contains(tc.p.body, `<label for="`+id+`">`) {
					t.Errorf("no label for %s", tag)
				}
			}
			if tc.name != "home" && tc.name != "uninstall confirmation" && n == 0 {
				t.Fatalf("no input found: the check proves nothing")
			}
		})
	}
}

// docs/decisions.md "Home and API access pages": plain pages, nothing fetched from elsewhere, the one script
// allowed by its hash.
func TestPagesLoadNothingFromElsewhere(t *testing.T) {
	f := newFixture(t)
	p := f.do((*Server).CreateBotToken, "POST", f.accessPath()+"/bot-tokens", f.adminCookie, nil)
	if regexp.MustCompile(`\ssrc=|<link\b|@import|url\(`).MatchString(p.body) {
		t.Fatalf("the page loads something:\n%s", p.body)
	}
	csp := string(p.header.Peek("Content-Security-Policy"))
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src "+scriptHash) || !strings.Contains(p.body, "<script>"+copyScript+"</script>") {
		t.Fatalf("CSP %q", csp)
	}
}

// docs/decisions.md "Home and API access pages": the home page names the workspace and each installed
// Kit with its bot's scopes and channels; only admins and owners get the
// way to the API access page.
func TestHomePage(t *testing.T) {
	f := newFixture(t)
	call[*kitpb.InstallationReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.AddChannel{ConversationId: f.channel})
	for _, tc := range []struct {
		name, cookie string
		has, hasNot  []string
	}{
		{"an admin sees the Kits and the way to their API access page", f.adminCookie,
			[]string{"Pages &amp; Co", "Deploy &lt;Bot&gt;", "version 1.0.0", ScopeInWords("incoming-webhook"), "Its bot is in #general.", `href="` + f.accessPath() + `"`}, nil},
		{"a member sees the Kits without the way to the API access page", f.memberCookie,
			[]string{"Deploy &lt;Bot&gt;", ScopeInWords("messages:write")}, []string{f.accessPath()}},
		{"a member who authorized nothing sees no authorization", f.memberCookie, nil, []string{"You let it act as you"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.do((*Server).Home, "GET", "/app/", tc.cookie, nil)
			if p.status != 200 {
				t.Fatalf("status %d", p.status)
			}
			for _, s := range tc.has {
				if !strings.Contains(p.body, s) {
					t.Errorf("the page lacks %q", s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(p.body, s) {
					t.Errorf("the page has %q", s)
				}
			}
		})
	}
	t.Run("an uninstalled Kit is not listed", func(t *testing.T) {
		call[*kitpb.Ok](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.Uninstall{})
		if p := f.do((*Server).Home, "GET", "/app/", f.adminCookie, nil); strings.Contains(p.body, "Deploy &lt;Bot&gt;") || !strings.Contains(p.body, "No Kit is installed") {
			t.Fatalf("page:\n%s", p.body)
		}
	})
}

// A suspended Kit (docs/api.md "Kit state") refuses its tokens, webhooks
// and member actions while its pages would otherwise look as ever: the
// home page and the API access page say it is suspended, and stop saying
// so once it is resumed.
func TestPagesSayTheKitIsSuspended(t *testing.T) {
	f := newFixture(t)
	const said = "suspended"
	for _, tc := range []struct {
		name    string
		state   string
		handler func(*Server, *fasthttp.RequestCtx)
		path    string
		cookie  string
		has     bool
	}{
		{"the API access page of a suspended Kit says so", actors.KitSuspended, (*Server).AccessPage, f.accessPath(), f.adminCookie, true},
		{"an admin's home page says so", actors.KitSuspended, (*Server).Home, "/app/", f.adminCookie, true},
		{"a member's home page says so", actors.KitSuspended, (*Server).Home, "/app/", f.memberCookie, true},
		{"the API access page of a resumed Kit does not", actors.KitActive, (*Server).AccessPage, f.accessPath(), f.adminCookie, false},
		{"the home page of a resumed Kit does not", actors.KitActive, (*Server).Home, "/app/", f.adminCookie, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call[*kitpb.KitReply](t, f.s, actors.KindKit, f.kitID, &kitpb.SetKitState{State: tc.state})
			p := f.do(tc.handler, "GET", tc.path, tc.cookie, nil)
			if p.status != 200 {
				t.Fatalf("status %d", p.status)
			}
			if strings.Contains(p.body, said) != tc.has {
				t.Fatalf("the page says %q: %v, want %v; page:\n%s", said, !tc.has, tc.has, p.body)
			}
		})
	}
}
