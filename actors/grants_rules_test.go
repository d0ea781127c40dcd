package actors_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// docs/credentials.md "POST /oauth/kit.access": a code is refused when
// "its session ended"; "Deactivating the member does the same". A bot
// authorization is approved by an admin in a web session: once that
// session ends, or that admin is deactivated, within the code's 10
// minutes, the code must not issue a bot token.
func TestABotCodeEndsWithItsSessionAndItsAdmin(t *testing.T) {
	n := shared
	for _, tc := range []struct {
		rule string
		end  func(g *grantEnv) proto.Message
	}{
		{"a bot code of an ended session is not exchanged", func(g *grantEnv) proto.Message {
			return &kitpb.EndSession{SessionId: g.adminSes}
		}},
		{"a bot code of a deactivated admin is not exchanged", func(g *grantEnv) proto.Message {
			return &kitpb.DeactivateUser{UserId: g.admin}
		}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerBot, g.admin, g.adminSes, "")
			noErr(t, err)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, tc.end(g))
			tk, _, err := n.exchange(g, code, "")
			if err == nil {
				_, aerr := n.auth.Authenticate([]byte(tk.bot))
				t.Fatalf("exchanged; the bot token authenticates: %v", aerr == nil)
			}
			wantCode(t, err, kiterr.Validation, "code")
		})
	}
}

// RFC 9700 (OAuth 2.0 Security BCP) 2.1.1 / 4.8.2: a token request that
// carries a code_verifier must be refused when the authorization request
// carried no code_challenge (PKCE downgrade). kitd takes a bot
// authorization without a challenge and then accepts any verifier.
func TestAVerifierWithoutAChallengeIsRefused(t *testing.T) {
	n := shared
	g := n.grantEnv(t)
	code, err := n.code(g, actors.CallerBot, g.admin, g.adminSes, "")
	noErr(t, err)
	_, _, err = n.exchange(g, code, testVerifier)
	wantCode(t, err, kiterr.Validation, "codeVerifier")
}

// RFC 7009 2.1: revoking a refresh token SHOULD also invalidate the access
// tokens of the same grant. kitd revokes only the refresh token: the user
// token it came with keeps working for the rest of its hour.
func TestRevokingARefreshTokenEndsItsGrant(t *testing.T) {
	n := shared
	g := n.grantEnv(t)
	tk := n.userTokens(t, g)
	if _, err := n.auth.Authenticate([]byte(tk.access)); err != nil {
		t.Fatal(err)
	}
	noErr(t, n.auth.Revoke(tk.refresh))
	_, err := n.auth.Authenticate([]byte(tk.access))
	wantCode(t, err, kiterr.InvalidToken)
}

// OPERATIONS.md section 4: a version without oauth.userScopes "cannot be
// authorized for user tokens", and docs/decisions.md ("A Kit without a
// bot") refuses a bot code approved before an update dropped the bot. A
// user code approved before an update dropped the user scopes was still
// exchanged for a working user token (with no scopes, yet enough for
// /users/me).
func TestACodeOfAnAuthorizationTheKitNoLongerOffersIsRefused(t *testing.T) {
	n := shared
	for _, tc := range []struct {
		rule      string
		tokenType string
		bot, user []string
	}{
		{"a user code after an update dropped oauth.userScopes", actors.CallerUser, []string{"messages:read"}, []string{}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, tc.tokenType, g.member, g.session, challengeOf(testVerifier))
			noErr(t, err)
			n.mustUpload(t, g.ws, oauthManifest(g.slug, "1.1.0", tc.bot, tc.user), false)
			n.install(t, g.ws, g.kitID, "1.1.0")
			tk, _, err := n.exchange(g, code, testVerifier)
			if err == nil {
				_, aerr := n.auth.Authenticate([]byte(tk.access))
				t.Fatalf("exchanged; the user token authenticates: %v", aerr == nil)
			}
			wantCode(t, err, kiterr.Validation, "code")
		})
	}
}

// docs/decisions.md "A Kit without a bot" has a bot token stop while the
// installed version has no bot; a user token acts as the member for the
// Kit's oauth.userScopes, so it stops the same way while the installed
// version requests none (it kept working with no scope, /users/me
// answered), and its refresh token is refused unspent. A version that
// requests user scopes again brings both back, as a scope dropped and
// requested again comes back.
func TestAUserTokenWorksWhileTheVersionOffersUserScopes(t *testing.T) {
	n := shared
	g := n.grantEnv(t)
	tk := n.userTokens(t, g)
	n.mustUpload(t, g.ws, oauthManifest(g.slug, "1.1.0", []string{"messages:read"}, []string{}), false)
	n.install(t, g.ws, g.kitID, "1.1.0")
	_, err := n.auth.Authenticate([]byte(tk.access))
	wantCode(t, err, kiterr.InvalidToken)
	_, err = n.refresh(g, tk.refresh)
	wantCode(t, err, kiterr.Validation, "refreshToken")

	n.mustUpload(t, g.ws, oauthManifest(g.slug, "1.2.0", []string{"messages:read"}, []string{"users:read"}), false)
	n.install(t, g.ws, g.kitID, "1.2.0")
	if _, err := n.auth.Authenticate([]byte(tk.access)); err != nil {
		t.Fatalf("the user token once the version requests user scopes again: %v", err)
	}
	if _, err := n.refresh(g, tk.refresh); err != nil {
		t.Fatalf("the refresh token refused while no user scope was requested was spent: %v", err)
	}
}
