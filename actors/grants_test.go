package actors_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

const testRedirect = "https://kit.example.com/oauth/callback"

// oauthManifest is a private manifest with bot scopes, user scopes and one
// redirect URL.
func oauthManifest(slug, version string, botScopes, userScopes []string) string {
	b, err := json.Marshal(map[string]any{
		"schemaVersion":    1,
		"slug":             slug,
		"version":          version,
		"displayName":      map[string]any{"en": "Kit " + slug},
		"description":      map[string]any{"en": "Test Kit " + slug},
		"developer":        map[string]any{"name": "Test Developer", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot":              map[string]any{"displayName": map[string]any{"en": "Bot " + slug}, "scopes": botScopes},
		"oauth":            map[string]any{"redirectUrls": []string{testRedirect}, "userScopes": userScopes},
		"distribution":     "private",
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// grantEnv is an installed Kit with user scopes, a member signed in, and a
// client secret.
type grantEnv struct {
	ws       string
	member   string // role member
	admin    string
	kitID    string
	slug     string
	inst     *kitpb.Installation
	session  string
	adminSes string
}

func (n *testNode) grantEnv(t *testing.T) *grantEnv {
	t.Helper()
	g := &grantEnv{ws: ids.New(), slug: newSlug()}
	ask[*kitpb.WorkspaceReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateWorkspace{Name: "grants"})
	g.member, g.admin = ids.New(), ids.New()
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateUser{UserId: g.member, DisplayName: "m", Role: "member"})
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateUser{UserId: g.admin, DisplayName: "a", Role: "admin"})
	v := n.mustUpload(t, g.ws, oauthManifest(g.slug, "1.0.0", []string{"messages:read"}, []string{"messages:read", "users:read"}), false)
	g.kitID = v.Kit.Id
	g.inst = n.install(t, g.ws, g.kitID, "")
	g.session = n.session(t, g.ws, g.member)
	g.adminSes = n.session(t, g.ws, g.admin)
	return g
}

func (n *testNode) session(t *testing.T, ws, user string) string {
	t.Helper()
	h := ids.Hash(ids.NewSecret(ids.SessionCookie))
	return ask[*kitpb.SessionReply](t, n, actors.KindWorkspace, ws, &kitpb.CreateSession{UserId: user, SessionId: ids.New(), SecretHash: h[:]}).Session.Id
}

func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

var testVerifier = "verifier-" + ids.NewSecret("")

// code approves an authorization and returns the code.
func (n *testNode) code(g *grantEnv, tokenType, user, session, challenge string) (string, error) {
	code := ids.NewSecret(ids.AuthCode)
	h := ids.Hash(code)
	_, err := try[*kitpb.AuthorizeReply](n, actors.KindWorkspace, g.ws, &kitpb.Authorize{
		UserId: user, SessionId: session, KitId: g.kitID, TokenType: tokenType,
		RedirectUri: testRedirect, CodeChallenge: challenge, Issue: true, CodeHash: h[:],
	})
	return code, err
}

// tokens is the secrets of one exchange or refresh.
type tokens struct{ bot, access, refresh string }

func newTokens() tokens {
	return tokens{ids.NewSecret(ids.BotToken), ids.NewSecret(ids.UserToken), ids.NewSecret(ids.RefreshToken)}
}

func (n *testNode) exchange(g *grantEnv, code, verifier string) (tokens, *kitpb.GrantReply, error) {
	tk := newTokens()
	c, b, a, r := ids.Hash(code), ids.Hash(tk.bot), ids.Hash(tk.access), ids.Hash(tk.refresh)
	reply, err := try[*kitpb.GrantReply](n, actors.KindInstallation, g.inst.Id, &kitpb.ExchangeCode{
		CodeHash: c[:], KitId: g.kitID, RedirectUri: testRedirect, CodeVerifier: verifier,
		BotHash: b[:], AccessHash: a[:], RefreshHash: r[:],
	})
	return tk, reply, err
}

func (n *testNode) refresh(g *grantEnv, refresh string) (tokens, error) {
	tk := newTokens()
	h, a, r := ids.Hash(refresh), ids.Hash(tk.access), ids.Hash(tk.refresh)
	_, err := try[*kitpb.GrantReply](n, actors.KindInstallation, g.inst.Id, &kitpb.RefreshGrant{
		RefreshHash: h[:], KitId: g.kitID, AccessHash: a[:], NewRefreshHash: r[:],
	})
	return tk, err
}

// userTokens runs the whole user flow for the member.
func (n *testNode) userTokens(t *testing.T, g *grantEnv) tokens {
	t.Helper()
	code, err := n.code(g, actors.CallerUser, g.member, g.session, challengeOf(testVerifier))
	noErr(t, err)
	tk, _, err := n.exchange(g, code, testVerifier)
	noErr(t, err)
	return tk
}

func TestBotTokenRotation(t *testing.T) {
	n := shared
	rotate := func(instID, old string) (string, *kitpb.RotateBotTokenReply, error) {
		next := ids.NewSecret(ids.BotToken)
		o, h := ids.Hash(old), ids.Hash(next)
		r, err := try[*kitpb.RotateBotTokenReply](n, actors.KindInstallation, instID, &kitpb.RotateBotToken{OldHash: o[:], NewHash: h[:]})
		return next, r, err
	}
	authOK := func(t *testing.T, tok string) {
		t.Helper()
		_, err := n.auth.Authenticate([]byte(tok))
		noErr(t, err)
	}
	authFails := func(t *testing.T, tok string) {
		t.Helper()
		_, err := n.auth.Authenticate([]byte(tok))
		wantCode(t, err, kiterr.InvalidToken)
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"rotation returns a working token; the old one works 24 hours more", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			next, r, err := rotate(b.inst.Id, b.token)
			noErr(t, err)
			if want := n.clk.Now().Add(24 * time.Hour); time.Unix(0, r.PreviousExpiresAt).Sub(want).Abs() > time.Minute {
				t.Fatalf("previous expires at %v, want about %v", time.Unix(0, r.PreviousExpiresAt), want)
			}
			authOK(t, b.token)
			authOK(t, next)
			n.clk.Advance(24*time.Hour + time.Second)
			authFails(t, b.token)
			authOK(t, next)
		}},
		{"a token is rotated once: the second rotation is a conflict", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			next, _, err := rotate(b.inst.Id, b.token)
			noErr(t, err)
			_, _, err = rotate(b.inst.Id, b.token)
			wantCode(t, err, kiterr.Conflict)
			_, _, err = rotate(b.inst.Id, next)
			noErr(t, err)
		}},
		{"a revoked token cannot be rotated", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			noErr(t, n.auth.Revoke(b.token))
			_, _, err := rotate(b.inst.Id, b.token)
			wantCode(t, err, kiterr.InvalidToken)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestKitSecrets(t *testing.T) {
	n := shared
	rotate := func(kitID, which string) (string, *kitpb.SecretState) {
		prefix := ids.ClientSecret
		if which == actors.SecretSigning {
			prefix = ids.SigningSecret
		}
		s := ids.NewSecret(prefix)
		h := ids.Hash(s)
		return s, ask[*kitpb.KitSecretReply](t, n, actors.KindKit, kitID, &kitpb.RotateKitSecret{Which: which, SecretHash: h[:]}).Secret
	}
	check := func(kitID, secret string) error {
		h := ids.Hash(secret)
		_, err := try[*kitpb.Ok](n, actors.KindKit, kitID, &kitpb.CheckClientSecret{SecretHash: h[:]})
		return err
	}
	newKit := func(t *testing.T) string {
		w := n.workspace(t, 0)
		return n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), false).Kit.Id
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a Kit without a client secret accepts none", func(t *testing.T) {
			wantCode(t, check(newKit(t), ids.NewSecret(ids.ClientSecret)), kiterr.InvalidCredentials)
		}},
		{"the previous client secret works 24 hours after a new one", func(t *testing.T) {
			k := newKit(t)
			first, _ := rotate(k, actors.SecretClient)
			noErr(t, check(k, first))
			second, st := rotate(k, actors.SecretClient)
			if st.Generation != 2 {
				t.Fatalf("generation %d, want 2", st.Generation)
			}
			noErr(t, check(k, first))
			noErr(t, check(k, second))
			wantCode(t, check(k, ids.NewSecret(ids.ClientSecret)), kiterr.InvalidCredentials)
			n.clk.Advance(24*time.Hour + time.Second)
			wantCode(t, check(k, first), kiterr.InvalidCredentials)
			noErr(t, check(k, second))
		}},
		{"a signing secret rotation keeps the previous one 7 days and counts generations", func(t *testing.T) {
			k := newKit(t)
			_, first := rotate(k, actors.SecretSigning)
			if first.Generation != 1 || first.PreviousExpiresAt != 0 {
				t.Fatalf("first signing secret %v", first)
			}
			_, second := rotate(k, actors.SecretSigning)
			if second.Generation != 2 || time.Duration(second.PreviousExpiresAt-second.CreatedAt) != 7*24*time.Hour {
				t.Fatalf("second signing secret %v", second)
			}
			if string(second.PreviousHash) != string(first.Hash) {
				t.Fatal("the previous hash is not the first secret's")
			}
		}},
		{"a signing secret is not a client secret", func(t *testing.T) {
			k := newKit(t)
			s, _ := rotate(k, actors.SecretSigning)
			wantCode(t, check(k, s), kiterr.InvalidCredentials)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestAuthorizationGrants(t *testing.T) {
	n := shared
	authOK := func(t *testing.T, tok string) *actors.Principal {
		t.Helper()
		p, err := n.auth.Authenticate([]byte(tok))
		noErr(t, err)
		return p
	}
	authFails := func(t *testing.T, tok string) {
		t.Helper()
		_, err := n.auth.Authenticate([]byte(tok))
		wantCode(t, err, kiterr.InvalidToken)
	}
	challenge := challengeOf(testVerifier)
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a user code exchanges for a 1-hour user token of the member with the user scopes", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			tk, r, err := n.exchange(g, code, testVerifier)
			noErr(t, err)
			if r.TokenType != actors.CallerUser || r.UserId != g.member || r.ExpiresIn != 3600 || len(r.Scopes) != 2 {
				t.Fatalf("reply %v", r)
			}
			p := authOK(t, tk.access)
			if p.TokenType != actors.CallerUser || p.Caller.UserId != g.member || p.Caller.InstallationId != g.inst.Id {
				t.Fatalf("principal %+v", p)
			}
			n.clk.Advance(time.Hour + time.Second)
			authFails(t, tk.access)
		}},
		{"a code is single use", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			_, _, err = n.exchange(g, code, testVerifier)
			noErr(t, err)
			_, _, err = n.exchange(g, code, testVerifier)
			wantCode(t, err, kiterr.Validation, "code")
		}},
		{"a code expires after 10 minutes", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			n.clk.Advance(10*time.Minute + time.Second)
			_, _, err = n.exchange(g, code, testVerifier)
			wantCode(t, err, kiterr.Validation, "code")
		}},
		{"the code verifier must match the challenge, and is required", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			_, _, err = n.exchange(g, code, "")
			wantCode(t, err, kiterr.Validation, "codeVerifier")
			_, _, err = n.exchange(g, code, testVerifier+"x")
			wantCode(t, err, kiterr.Validation, "codeVerifier")
			_, _, err = n.exchange(g, code, testVerifier)
			noErr(t, err)
		}},
		{"the redirect URI must equal the authorization's", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			c := ids.Hash(code)
			tk := newTokens()
			b, a, r := ids.Hash(tk.bot), ids.Hash(tk.access), ids.Hash(tk.refresh)
			_, err = try[*kitpb.GrantReply](n, actors.KindInstallation, g.inst.Id, &kitpb.ExchangeCode{
				CodeHash: c[:], KitId: g.kitID, RedirectUri: testRedirect + "/x", CodeVerifier: testVerifier,
				BotHash: b[:], AccessHash: a[:], RefreshHash: r[:],
			})
			wantCode(t, err, kiterr.Validation, "redirectUri")
		}},
		{"a code of another Kit is not valid for this client", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			g.kitID = ids.New()
			_, _, err = n.exchange(g, code, testVerifier)
			wantCode(t, err, kiterr.Validation, "code")
		}},
		{"a bot code needs an admin and issues a new bot token", func(t *testing.T) {
			g := n.grantEnv(t)
			_, err := n.code(g, actors.CallerBot, g.member, g.session, "")
			wantCode(t, err, kiterr.Forbidden)
			code, err := n.code(g, actors.CallerBot, g.admin, g.adminSes, "")
			noErr(t, err)
			tk, r, err := n.exchange(g, code, "")
			noErr(t, err)
			if r.TokenType != actors.CallerBot || r.BotId != g.inst.BotId {
				t.Fatalf("reply %v", r)
			}
			if p := authOK(t, tk.bot); p.TokenType != actors.CallerBot {
				t.Fatalf("principal %+v", p)
			}
		}},
		{"a user authorization needs a code challenge and user scopes", func(t *testing.T) {
			g := n.grantEnv(t)
			_, err := n.code(g, actors.CallerUser, g.member, g.session, "")
			wantCode(t, err, kiterr.Validation, "code_challenge")
			w := n.workspace(t, 1)
			v := n.mustUpload(t, w.id, oauthManifest(newSlug(), "1.0.0", []string{"messages:read"}, []string{}), false)
			g2 := &grantEnv{ws: w.id, kitID: v.Kit.Id, inst: n.install(t, w.id, v.Kit.Id, "")}
			_, err = n.code(g2, actors.CallerUser, w.users[0], n.session(t, w.id, w.users[0]), challenge)
			wantCode(t, err, kiterr.Validation, "token_type")
		}},
		{"a redirect URI outside the installed manifest is refused", func(t *testing.T) {
			g := n.grantEnv(t)
			h := ids.Hash(ids.NewSecret(ids.AuthCode))
			for _, uri := range []string{testRedirect + "/", "https://evil.example.com/oauth/callback", "HTTPS://kit.example.com/oauth/callback"} {
				_, err := try[*kitpb.AuthorizeReply](n, actors.KindWorkspace, g.ws, &kitpb.Authorize{
					UserId: g.member, SessionId: g.session, KitId: g.kitID, TokenType: actors.CallerUser,
					RedirectUri: uri, CodeChallenge: challenge, Issue: true, CodeHash: h[:],
				})
				wantCode(t, err, kiterr.Validation, "redirect_uri")
			}
		}},
		{"a Kit not installed in the workspace is not found", func(t *testing.T) {
			g := n.grantEnv(t)
			g.kitID = ids.New()
			_, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a refresh returns new tokens and spends the refresh token", func(t *testing.T) {
			g := n.grantEnv(t)
			first := n.userTokens(t, g)
			second, err := n.refresh(g, first.refresh)
			noErr(t, err)
			authOK(t, second.access)
			authOK(t, first.access) // the earlier access token lives its hour
			_, err = n.refresh(g, second.refresh)
			noErr(t, err)
		}},
		{"a spent refresh token used again revokes the whole grant", func(t *testing.T) {
			g := n.grantEnv(t)
			first := n.userTokens(t, g)
			other := n.userTokens(t, g) // another authorization of the same member
			second, err := n.refresh(g, first.refresh)
			noErr(t, err)
			authOK(t, second.access) // cached now
			_, err = n.refresh(g, first.refresh)
			wantCode(t, err, kiterr.Validation, "refreshToken")
			authFails(t, first.access)
			authFails(t, second.access)
			_, err = n.refresh(g, second.refresh)
			wantCode(t, err, kiterr.Validation, "refreshToken")
			authOK(t, other.access)
		}},
		{"concurrent refreshes with one token: exactly one wins", func(t *testing.T) {
			g := n.grantEnv(t)
			first := n.userTokens(t, g)
			const racers = 8
			var wg sync.WaitGroup
			errs := make([]error, racers)
			for i := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = n.refresh(g, first.refresh)
				}()
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
				} else if kiterr.CodeOf(err) != kiterr.Validation {
					t.Fatalf("a losing refresh answered %v", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d refreshes won, want exactly 1", won)
			}
		}},
		{"ending the web session ends the user tokens it authorized, even cached", func(t *testing.T) {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			authOK(t, tk.access)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.EndSession{SessionId: g.session})
			authFails(t, tk.access)
			_, err := n.refresh(g, tk.refresh)
			wantCode(t, err, kiterr.Validation, "refreshToken")
		}},
		{"a code of an ended session cannot be exchanged", func(t *testing.T) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challenge)
			noErr(t, err)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.EndSession{SessionId: g.session})
			_, _, err = n.exchange(g, code, testVerifier)
			wantCode(t, err, kiterr.Validation, "code")
		}},
		{"a deactivated member's user tokens end", func(t *testing.T) {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			authOK(t, tk.access)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.DeactivateUser{UserId: g.member})
			authFails(t, tk.access)
		}},
		{"revoking a user token through the operator is immediate", func(t *testing.T) {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			authOK(t, tk.access)
			noErr(t, n.auth.Revoke(tk.access))
			authFails(t, tk.access)
			noErr(t, n.auth.Revoke(tk.refresh))
			_, err := n.refresh(g, tk.refresh)
			wantCode(t, err, kiterr.Validation, "refreshToken")
		}},
		{"user token scopes are the granted ones the installed version still requests", func(t *testing.T) {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			if got := authOK(t, tk.access).Scopes; len(got) != 2 {
				t.Fatalf("scopes %v", got)
			}
			n.mustUpload(t, g.ws, oauthManifest(g.slug, "1.1.0", []string{"messages:read"}, []string{"messages:read"}), false)
			n.install(t, g.ws, g.kitID, "1.1.0")
			if got := authOK(t, tk.access).Scopes; len(got) != 1 || got[0] != "messages:read" {
				t.Fatalf("scopes after the update %v", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// deafCaches is an Invalidator that tells no cache: the node that made a
// change was killed before it told the others.
type deafCaches struct{}

func (deafCaches) InstallationChanged(string)   {}
func (deafCaches) CredentialRevoked([]byte)     {}
func (deafCaches) UserChanged(string)           {}
func (deafCaches) SessionEnded(string)          {}
func (deafCaches) SigningSecretsChanged(string) {}
func (deafCaches) KitVersionsChanged(string)    {}
func (deafCaches) KitStateChanged(string)       {}

// An ending, a revocation or a deactivation asked again after it was done
// tells the caches again: the node that did it may have been killed before
// it told them, and a token cached on another node then kept working.
func TestAnEndingAskedAgainIsToldAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, n *testNode, g *grantEnv, grant string)
	}{
		{"ending the web session", func(t *testing.T, n *testNode, g *grantEnv, _ string) {
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.EndSession{SessionId: g.session})
		}},
		{"revoking the member's authorization", func(t *testing.T, n *testNode, g *grantEnv, grant string) {
			ask[*kitpb.Ok](t, n, actors.KindInstallation, g.inst.Id, &kitpb.RevokeUserGrant{UserId: g.member, GrantId: grant})
		}},
		{"deactivating the member", func(t *testing.T, n *testNode, g *grantEnv, _ string) {
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.DeactivateUser{UserId: g.member})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ownNode(t)
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			grant := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, g.inst.Id, &kitpb.ListUserGrants{UserId: g.member}).Grants[0].GrantId
			if _, err := n.auth.Authenticate([]byte(tk.access)); err != nil { // cached
				t.Fatal(err)
			}
			told := n.env.Invalidator
			n.env.Invalidator = deafCaches{}
			tc.end(t, n, g, grant)
			n.env.Invalidator = told
			if _, err := n.auth.Authenticate([]byte(tk.access)); err != nil {
				t.Fatalf("the cache was told after all (%v): the test proves nothing", err)
			}
			tc.end(t, n, g, grant) // asked again
			if _, err := n.auth.Authenticate([]byte(tk.access)); kiterr.CodeOf(err) != kiterr.InvalidToken {
				t.Fatalf("a user token after its end was asked again: %v, want invalid_token", err)
			}
		})
	}
}
