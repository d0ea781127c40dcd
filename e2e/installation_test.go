package e2e

import (
	"testing"
)

// docs/api.md "Users, runs and the installation" GET /installation.
func TestInstallation(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	c2 := env.W.channel(t, "private", env.W.Owner.ID)
	env.In.addChannel(t, c2.ID)

	r := env.In.api(t, "GET", "/installation", nil)
	want(t, r, 200)
	in := jobj(r.JSON, "installation")
	t.Run("installation shape", func(t *testing.T) {
		if jstr(in, "id") != env.In.ID || jstr(in, "kit.slug") != env.Kit.Slug || jstr(in, "kit.version") != "1.0.0" ||
			jstr(in, "workspace.id") != env.W.ID || jstr(in, "workspace.name") != env.W.Name || jstr(in, "botId") != env.In.BotID {
			t.Errorf("want {installation: {id, kit {slug, version}, workspace {id, name}, botId}}%s", r)
		}
		if jget(in, "kit.displayName") == nil {
			t.Errorf("kit.displayName missing%s", r)
		}
		if jstr(in, "modelDataPolicy") != "none" {
			t.Errorf("modelDataPolicy = %q, want none%s", jstr(in, "modelDataPolicy"), r)
		}
		if got := strs(jarr(in, "scopes.bot")); !sameSet(got, baseScopes) {
			t.Errorf("scopes.bot = %v, want %v%s", got, baseScopes, r)
		}
		if u, ok := jget(in, "scopes.user").([]any); !ok || len(u) != 0 {
			t.Errorf("scopes.user must be an empty array for a Kit without oauth.userScopes%s", r)
		}
		if got := strs(jarr(in, "channelIds")); !sameSet(got, []string{env.Chan.ID, c2.ID}) {
			t.Errorf("channelIds = %v, want [%s %s]%s", got, env.Chan.ID, c2.ID, r)
		}
	})

	t.Run("matches the operator's view and auth/test", func(t *testing.T) {
		a := env.In.api(t, "GET", "/auth/test", nil)
		want(t, a, 200)
		if a.Str("installationId") != jstr(in, "id") || a.Str("botId") != jstr(in, "botId") {
			t.Errorf("auth/test and installation disagree%s%s", a, r)
		}
	})

	t.Run("channel removal shows in channelIds and conversations", func(t *testing.T) {
		want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+env.In.ID+"/channels/"+c2.ID, nil), 200)
		r := env.In.api(t, "GET", "/installation", nil)
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "installation.channelIds")); !sameSet(got, []string{env.Chan.ID}) {
			t.Errorf("channelIds = %v after removal%s", got, r)
		}
		wantError(t, env.In.api(t, "GET", "/conversations/"+c2.ID, nil), 404, "not_found")
		wantError(t, env.In.api(t, "POST", "/messages", postBody(c2.ID, "x")), 404, "not_found")
	})
}

// SPEC.md 2 Installation: `botId` is nullable, and docs/manifest.md lets a
// Kit leave `bot` out when it has no bot: its installation has no bot id.
func TestInstallationOfAKitWithoutABot(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	in := installWithoutABot(t, w)
	k := in.Kit

	r := s.api(t, userToken(t, in, w.Mem.ID), "GET", "/installation", nil, nil)
	want(t, r, 200)
	if !has(r.JSON, "installation", "botId") || r.Get("installation.botId") != nil {
		t.Errorf("want botId null for a Kit without a bot%s", r)
	}

	// A version that adds a bot gives the installation one.
	k.Manifest["version"] = "1.0.1"
	k.Manifest["bot"] = map[string]any{"scopes": []string{"users:read"}}
	want(t, w.uploadVersion(t, k.Manifest, true), 201)
	r = s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID})
	want(t, r, 201)
	if !isUUID(r.Str("installation.botId")) {
		t.Errorf("want a botId once the installed version has a bot%s", r)
	}
}
