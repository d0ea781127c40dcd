package e2e

import (
	"testing"
)

// docs/credentials.md "POST /oauth/kit.access": the code is refused when
// "its session ended"; signing out ends "unexchanged codes". A bot
// authorization approved by an admin who then signs out must not be
// exchangeable for a bot token.
func TestCredentials_ABotCodeEndsWithItsAdminsSession(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	in := env.In
	secret := in.prepareOAuth(t)
	cookie, sessionID := webSession(t, s, env.W.Admin.ID)
	code := approveCode(t, in, cookie, "bot", "")
	want(t, s.ops(t, "DELETE", "/ops/v1/sessions/"+sessionID, nil), 200)
	r := exchange(t, in, secret, code, "")
	if r.Status == 200 {
		t.Errorf("a bot code whose session ended was exchanged; its token on /auth/test: %d%s", authTest(t, s, r.Str("accessToken")).Status, r)
		return
	}
	wantValidation(t, r, "code")
}

// SPEC.md 1/5: an unknown credential and a revoked or spent one are
// answered alike (the 404/401 rule: existence is never revealed); the
// kit.access answer for an unknown code or refresh token is the answer
// for a known, spent or revoked one.
func TestCredentials_KitAccessAnswersUnknownAndSpentAlike(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)
	in := env.In

	g := authorizeGrant(t, in, env.W.Mem.ID)
	want(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": g.refresh()}), 200)
	revoked := refresh(t, in, g.Secret, g.refresh())
	unknown := refresh(t, in, g.Secret, "kref_"+randToken())
	wantValidation(t, revoked, "refreshToken")
	wantValidation(t, unknown, "refreshToken")
	if revoked.Str("message") != unknown.Str("message") {
		t.Errorf("refreshToken: revoked answers %q, unknown answers %q", revoked.Str("message"), unknown.Str("message"))
	}

	verifier, challenge := pkce()
	code := approveCode(t, in, g.Cookie, "user", challenge)
	want(t, exchange(t, in, g.Secret, code, verifier), 200)
	spent := exchange(t, in, g.Secret, code, verifier)
	unknownCode := exchange(t, in, g.Secret, "kcode_"+randToken(), verifier)
	wantValidation(t, spent, "code")
	wantValidation(t, unknownCode, "code")
	if spent.Str("message") != unknownCode.Str("message") {
		t.Errorf("code: spent answers %q, unknown answers %q", spent.Str("message"), unknownCode.Str("message"))
	}
}

// docs/credentials.md "POST /oauth/kit.access": "Answers carry
// Cache-Control: no-store." (every answer, refusals too).
func TestCredentials_KitAccessRefusalsAreNotStored(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	in := env.In
	secret := in.prepareOAuth(t)
	for name, r := range map[string]*Resp{
		"401": exchange(t, in, "kcs_"+randToken(), "kcode_"+randToken(), ""),
		"400": exchange(t, in, secret, "kcode_"+randToken(), ""),
	} {
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store%s", name, got, r)
		}
	}
}
