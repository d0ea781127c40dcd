package e2e

import (
	"net/url"
	"strings"
	"testing"
)

// docs/manifest.md: a Kit leaves `bot` out when it has no bot, and
// docs/decisions.md "A Kit without a bot" says what every surface does
// then: no bot token, no channel, no bot authorization, and a version that
// drops the bot takes it out of its channels and stops its tokens.
func TestKitWithoutABot(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.members()...)
	cookie, _ := webSession(t, s, w.Admin.ID)

	never := installWithoutABot(t, w) // a Kit that never had a bot

	// A Kit whose update drops its bot: before, the bot joined c, got a
	// token, and an admin approved a bot code.
	dropped := w.install(t, w.kit(t, "messages:write", "conversations:read"), c.ID)
	secret := dropped.prepareOAuth(t)
	code := approveCode(t, dropped, cookie, "bot", "")
	m := withOAuth(dropped.Kit.Manifest, "1.0.2", []string{"users:read"})
	delete(m, "bot")
	want(t, w.uploadVersion(t, m, true), 201)
	update := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": dropped.Kit.ID})
	want(t, update, 201)

	both := map[string]*Install{"a Kit that never had a bot": never, "a Kit whose update dropped the bot": dropped}
	accessPost := func(t *testing.T, in *Install, path string, form url.Values) *Resp {
		page := s.page(t, "GET", "/app/installations/"+in.ID, cookie, nil)
		want(t, page, 200)
		form.Set("csrf", csrfOf(t, page))
		return s.page(t, "POST", "/app/installations/"+in.ID+path, cookie, form)
	}
	for _, tc := range []struct {
		rule  string
		check func(t *testing.T, in *Install)
	}{
		{"the operator mints no bot token: 409 conflict", func(t *testing.T, in *Install) {
			wantError(t, s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", nil), 409, "conflict")
		}},
		{"the operator adds the bot to no channel: 409 conflict", func(t *testing.T, in *Install) {
			wantError(t, s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/channels", map[string]any{"conversationId": c.ID}), 409, "conflict")
			// Installing the installed version again answers the installation.
			r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": in.Kit.ID})
			want(t, r, 201)
			if n := len(jarr(r.JSON, "installation.channelIds")); n != 0 {
				t.Errorf("channelIds of a Kit without a bot%s", r)
			}
		}},
		{"the API access page offers no bot token and no channel", func(t *testing.T, in *Install) {
			page := string(s.page(t, "GET", "/app/installations/"+in.ID, cookie, nil).Body)
			for _, form := range []string{`/bot-tokens">`, `/channels">`} {
				if strings.Contains(page, form) {
					t.Errorf("the page offers the form %s:\n%s", form, page)
				}
			}
		}},
		{"the API access page's bot forms are refused: 409 page", func(t *testing.T, in *Install) {
			r := accessPost(t, in, "/bot-tokens", url.Values{})
			if r.Status != 409 || shownSecret.Match(r.Body) {
				t.Errorf("want a 409 page without a token%s", r)
			}
			want(t, accessPost(t, in, "/channels", url.Values{"conversation": {c.ID}}), 409)
		}},
		{"an admin cannot authorize bot tokens: 400 page", func(t *testing.T, in *Install) {
			q := authorizeQuery(in, "bot", "", "st")
			want(t, s.page(t, "GET", "/app/kits/authorize?"+q.Encode(), cookie, nil), 400)
		}},
	} {
		for name, in := range both {
			t.Run(tc.rule+"/"+name, func(t *testing.T) { tc.check(t, in) })
		}
	}

	t.Run("an update that drops the bot takes it out of its channels", func(t *testing.T) {
		if n := len(jarr(update.JSON, "installation.channelIds")); n != 0 {
			t.Errorf("the bot is still in %d channels%s", n, update)
		}
	})
	t.Run("an update that drops the bot stops its bot tokens: 401", func(t *testing.T) {
		wantError(t, authTest(t, s, dropped.Token), 401, "invalid_token")
		wantError(t, s.api(t, dropped.Token, "GET", "/users/me", nil, nil), 401, "invalid_token")
	})
	t.Run("a bot code approved before the update exchanges for nothing", func(t *testing.T) {
		wantValidation(t, exchange(t, dropped, secret, code, ""), "code")
	})
	t.Run("a version that brings the bot back starts it in no channel", func(t *testing.T) {
		m := withOAuth(dropped.Kit.Manifest, "1.0.3", []string{"users:read"})
		want(t, w.uploadVersion(t, m, true), 201)
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": dropped.Kit.ID})
		want(t, r, 201)
		if r.Str("installation.botId") != dropped.BotID || len(jarr(r.JSON, "installation.channelIds")) != 0 {
			t.Errorf("want the same bot in no channel%s", r)
		}
		tok := dropped.newToken(t)
		wantError(t, s.api(t, tok, "POST", "/messages", postBody(c.ID, "back"), nil), 404, "not_found")
	})
}

// installWithoutABot uploads and installs in w a Kit whose manifest leaves
// `bot` out, with user scope users:read.
func installWithoutABot(t *testing.T, w *Workspace) *Install {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0"}
	k.Manifest = withOAuth(manifest(k.Slug, k.Version, nil), k.Version, []string{"users:read"})
	delete(k.Manifest, "bot")
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	r = w.S.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID})
	want(t, r, 201)
	return &Install{W: w, Kit: k, ID: r.Str("installation.id")}
}
