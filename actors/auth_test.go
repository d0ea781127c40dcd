package actors_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestAuthenticate(t *testing.T) {
	n := shared
	authOK := func(t *testing.T, token string) *actors.Principal {
		t.Helper()
		p, err := n.auth.Authenticate([]byte(token))
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		return p
	}
	authFails := func(t *testing.T, token string) {
		t.Helper()
		_, err := n.auth.Authenticate([]byte(token))
		wantCode(t, err, kiterr.InvalidToken)
	}
	scopes := func(t *testing.T, token string) []string {
		t.Helper()
		return slices.Sorted(slices.Values(authOK(t, token).Scopes))
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a bot token acts as the bot of its installation", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			p := authOK(t, b.token)
			c := p.Caller
			if p.TokenType != actors.CallerBot || c.Kind != actors.CallerBot || c.WorkspaceId != w.id ||
				c.InstallationId != b.inst.Id || c.BotId != b.inst.BotId || c.BotId == "" || c.UserId != "" {
				t.Fatalf("principal %+v caller %v", p, c)
			}
			if p.KitSlug != b.inst.KitSlug || p.ExpiresAt != 0 {
				t.Fatalf("kitSlug %q expiresAt %d", p.KitSlug, p.ExpiresAt)
			}
		}},
		{"uninstall makes the bot token invalid", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			authOK(t, b.token) // cached now
			ask[*kitpb.Ok](t, n, actors.KindInstallation, b.inst.Id, &kitpb.Uninstall{})
			authFails(t, b.token)
		}},
		{"a new token cannot be issued for an uninstalled installation", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			ask[*kitpb.Ok](t, n, actors.KindInstallation, b.inst.Id, &kitpb.Uninstall{})
			h := ids.Hash(ids.NewSecret(ids.BotToken))
			_, err := try[*kitpb.CredentialReply](n, actors.KindInstallation, b.inst.Id, &kitpb.CreateBotToken{SecretHash: h[:]})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"installing again after uninstall does not revive old tokens", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			ask[*kitpb.Ok](t, n, actors.KindInstallation, b.inst.Id, &kitpb.Uninstall{})
			again := n.install(t, w.id, b.kitID, "")
			if again.Id == b.inst.Id || again.Uninstalled {
				t.Fatalf("reinstall reused the uninstalled installation: %v", again)
			}
			authFails(t, b.token)
			authOK(t, n.botToken(t, again.Id))
		}},
		{"a credential told changed is read again after its replica catches up (a replica behind its leader)", func(t *testing.T) {
			n := ownNode(t)
			replicas := lagReplicas(n)
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			if _, err := n.auth.Authenticate([]byte(b.token)); err != nil {
				t.Fatal(err)
			}
			// The node's replica of the credential lags: the revocation is
			// applied here only when the node catches up with the leader.
			home := partition.Of(b.inst.Id)
			replicas.lag(func(p partition.ID) bool { return p != home })
			h := ids.Hash(b.token)
			// The revocation tells the authenticator, as the node that
			// revokes tells every node.
			ask[*kitpb.Ok](t, n, actors.KindInstallation, b.inst.Id, &kitpb.RevokeCredential{SecretHash: h[:]})
			if _, err := n.auth.Authenticate([]byte(b.token)); kiterr.CodeOf(err) != kiterr.InvalidToken {
				t.Fatalf("a credential revoked through another node: %v, want invalid_token", err)
			}
		}},
		{"revoking a bot token is immediate even when cached", func(t *testing.T) {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			second := n.botToken(t, b.inst.Id)
			authOK(t, b.token)
			authOK(t, second)
			noErr(t, n.auth.Revoke(b.token))
			authFails(t, b.token)
			authOK(t, second)                // other tokens of the installation keep working
			noErr(t, n.auth.Revoke(b.token)) // revoking again is harmless
			authFails(t, b.token)
		}},
		{"revoking an unknown token is not found", func(t *testing.T) {
			wantCode(t, n.auth.Revoke(ids.NewSecret(ids.BotToken)), kiterr.NotFound)
		}},
		{"effective scopes are granted ∩ installed version's scopes", func(t *testing.T) {
			w := n.workspace(t, 0)
			slug := newSlug()
			v1 := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0", "messages:read", "messages:write"), false)
			inst := n.install(t, w.id, v1.Kit.Id, "1.0.0")
			token := n.botToken(t, inst.Id)
			if got := scopes(t, token); !slices.Equal(got, []string{"messages:read", "messages:write"}) {
				t.Fatalf("v1.0.0 scopes %v", got)
			}
			n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0", "messages:read"), false)
			updated := n.install(t, w.id, v1.Kit.Id, "1.1.0")
			if updated.Id != inst.Id || updated.KitVersion != "1.1.0" {
				t.Fatalf("install again did not update the installation: %v", updated)
			}
			if got := scopes(t, token); !slices.Equal(got, []string{"messages:read"}) {
				t.Fatalf("after 1.1.0 the token has %v, want [messages:read]", got)
			}
		}},
		{"a later version that drops a scope takes it from cached tokens at its upload, before any update", func(t *testing.T) {
			w := n.workspace(t, 0)
			slug := newSlug()
			v1 := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0", "messages:read", "messages:write", "users:read"), false)
			inst := n.install(t, w.id, v1.Kit.Id, "1.0.0")
			token := n.botToken(t, inst.Id)
			authOK(t, token) // cached
			n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0", "messages:read", "users:read", "files:read"), false)
			if got := scopes(t, token); !slices.Equal(got, []string{"messages:read", "users:read"}) {
				t.Fatalf("after 1.1.0's upload the 1.0.0 token has %v, want messages:write gone and files:read not given", got)
			}
		}},
		{"a scope added by a later version is not granted to older tokens", func(t *testing.T) {
			w := n.workspace(t, 0)
			slug := newSlug()
			v1 := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0", "messages:read"), false)
			inst := n.install(t, w.id, v1.Kit.Id, "")
			old := n.botToken(t, inst.Id)
			authOK(t, old)
			n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0", "messages:read", "users:read"), false)
			n.install(t, w.id, v1.Kit.Id, "1.1.0")
			if got := scopes(t, old); !slices.Equal(got, []string{"messages:read"}) {
				t.Fatalf("old token has %v", got)
			}
			if got := scopes(t, n.botToken(t, inst.Id)); !slices.Equal(got, []string{"messages:read", "users:read"}) {
				t.Fatalf("new token has %v", got)
			}
		}},
		{"an expired developer token is invalid even when cached", func(t *testing.T) {
			w := n.workspace(t, 1)
			secret := ids.NewSecret(ids.DeveloperToken)
			h := ids.Hash(secret)
			ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{
				UserId: w.users[0], TokenId: ids.New(), Name: "ci", TtlSeconds: 60, SecretHash: h[:],
			})
			p := authOK(t, secret)
			if p.TokenType != actors.CallerDeveloper || p.Caller.WorkspaceId != w.id || p.Caller.UserId != w.users[0] {
				t.Fatalf("developer principal %+v", p)
			}
			n.clk.Advance(61 * time.Second)
			authFails(t, secret)
		}},
		{"revoking a developer token is immediate even when cached", func(t *testing.T) {
			w := n.workspace(t, 1)
			secret := ids.NewSecret(ids.DeveloperToken)
			h := ids.Hash(secret)
			tokenID := ids.New()
			ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{
				UserId: w.users[0], TokenId: tokenID, Name: "ci", SecretHash: h[:],
			})
			authOK(t, secret)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.RevokeCredential{TokenId: tokenID})
			authFails(t, secret)
		}},
		{"a developer token stops working when its member is deactivated, even when cached", func(t *testing.T) {
			w := n.workspace(t, 1)
			secret := ids.NewSecret(ids.DeveloperToken)
			h := ids.Hash(secret)
			ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{
				UserId: w.users[0], TokenId: ids.New(), Name: "ci", SecretHash: h[:],
			})
			authOK(t, secret)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.DeactivateUser{UserId: w.users[0]})
			authFails(t, secret)
		}},
		{"a developer token of a deactivated member cannot be issued", func(t *testing.T) {
			w := n.workspace(t, 1)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.DeactivateUser{UserId: w.users[0]})
			h := ids.Hash(ids.NewSecret(ids.DeveloperToken))
			_, err := try[*kitpb.CredentialReply](n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{
				UserId: w.users[0], TokenId: ids.New(), Name: "ci", SecretHash: h[:],
			})
			wantCode(t, err, kiterr.NotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}

	// Tokens that never worked: one answer for all.
	wellFormedUnknown := ids.NewSecret(ids.BotToken)
	for _, tc := range []struct{ name, token string }{
		{"an empty token is invalid", ""},
		{"a bare prefix is invalid", "kbot_"},
		{"a bot token one character short is invalid", wellFormedUnknown[:len(wellFormedUnknown)-1]},
		{"a bot token with a character outside base64url is invalid", wellFormedUnknown[:len(wellFormedUnknown)-1] + "="},
		{"an unknown prefix is invalid", "kxyz_" + wellFormedUnknown[5:]},
		{"a well-formed unknown bot token is invalid", wellFormedUnknown},
		{"a well-formed unknown user token is invalid", ids.NewSecret(ids.UserToken)},
		{"an unknown developer token is invalid", ids.NewSecret(ids.DeveloperToken)},
		{"a session cookie is not a bearer token", ids.NewSecret(ids.SessionCookie)},
		{"a long garbage token is invalid", strings.Repeat("x", 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) { authFails(t, tc.token) })
	}
}
