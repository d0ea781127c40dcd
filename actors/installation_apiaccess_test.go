package actors_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// docs/decisions.md "Home and API access pages": what the API access page and the member's home page list and
// revoke, and the audit entry of every action of the page.
func TestAPIAccessListings(t *testing.T) {
	n := shared
	g := n.grantEnv(t)
	inst := g.inst.Id
	listTokens := func() []*kitpb.BotToken {
		return ask[*kitpb.BotTokensReply](t, n, actors.KindInstallation, inst, &kitpb.ListBotTokens{}).Tokens
	}

	first := n.botToken(t, inst)
	n.clk.Advance(time.Millisecond)
	second := n.botToken(t, inst)
	t.Run("bot tokens are listed oldest first by id and creation time, never by value", func(t *testing.T) {
		toks := listTokens()
		if len(toks) != 2 || toks[0].CreatedAt > toks[1].CreatedAt || !ids.Valid(toks[0].Id) || toks[0].Id == toks[1].Id {
			t.Fatalf("tokens %v", toks)
		}
	})
	t.Run("a use of a bot token is its last use", func(t *testing.T) {
		p, err := n.auth.Authenticate([]byte(second))
		noErr(t, err)
		at := n.clk.Now().UnixNano()
		ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.TouchBotToken{TokenId: p.TokenID, At: at})
		toks := listTokens()
		if toks[0].LastUsedAt != 0 || toks[1].LastUsedAt != at {
			t.Fatalf("tokens %v, want the second used at %d", toks, at)
		}
	})
	t.Run("a bot token revoked by its id stops at once and leaves the list", func(t *testing.T) {
		p, err := n.auth.Authenticate([]byte(first))
		noErr(t, err)
		ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.RevokeCredential{TokenId: p.TokenID})
		_, err = n.auth.Authenticate([]byte(first))
		wantCode(t, err, kiterr.InvalidToken)
		if toks := listTokens(); len(toks) != 1 || toks[0].Id == p.TokenID {
			t.Fatalf("tokens %v", toks)
		}
	})
	t.Run("a token id of no bot token of the installation is not found", func(t *testing.T) {
		_, err := try[*kitpb.Ok](n, actors.KindInstallation, inst, &kitpb.RevokeCredential{TokenId: ids.New()})
		wantCode(t, err, kiterr.NotFound)
	})
	t.Run("a rotated bot token is listed with its expiry, and the new one", func(t *testing.T) {
		next := ids.NewSecret(ids.BotToken)
		oh, nh := ids.Hash(second), ids.Hash(next)
		ask[*kitpb.RotateBotTokenReply](t, n, actors.KindInstallation, inst, &kitpb.RotateBotToken{OldHash: oh[:], NewHash: nh[:]})
		toks := listTokens()
		if len(toks) != 2 || toks[0].ExpiresAt == 0 || toks[1].ExpiresAt != 0 {
			t.Fatalf("tokens %v", toks)
		}
	})

	t.Run("the member's authorizations are listed, and revoking one ends its tokens", func(t *testing.T) {
		tk := n.userTokens(t, g)
		grants := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, inst, &kitpb.ListUserGrants{UserId: g.member}).Grants
		if len(grants) != 1 || !slices.Equal(grants[0].Scopes, []string{"messages:read", "users:read"}) {
			t.Fatalf("grants %v", grants)
		}
		if other := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, inst, &kitpb.ListUserGrants{UserId: g.admin}).Grants; len(other) != 0 {
			t.Fatalf("another member's grants %v", other)
		}
		ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.RevokeUserGrant{UserId: g.member, GrantId: grants[0].GrantId})
		_, err := n.auth.Authenticate([]byte(tk.access))
		wantCode(t, err, kiterr.InvalidToken)
		if _, err := n.refresh(g, tk.refresh); err == nil {
			t.Fatal("the refresh token of a revoked authorization still works")
		}
		if left := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, inst, &kitpb.ListUserGrants{UserId: g.member}).Grants; len(left) != 0 {
			t.Fatalf("grants after revocation %v", left)
		}
	})
	t.Run("another member cannot revoke the member's authorization", func(t *testing.T) {
		n.userTokens(t, g)
		grants := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, inst, &kitpb.ListUserGrants{UserId: g.member}).Grants
		_, err := try[*kitpb.Ok](n, actors.KindInstallation, inst, &kitpb.RevokeUserGrant{UserId: g.admin, GrantId: grants[0].GrantId})
		wantCode(t, err, kiterr.NotFound)
	})
	t.Run("an authorization whose web session ended is not listed", func(t *testing.T) {
		ask[*kitpb.Ok](t, n, actors.KindWorkspace, g.ws, &kitpb.EndSession{SessionId: g.session})
		if left := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, inst, &kitpb.ListUserGrants{UserId: g.member}).Grants; len(left) != 0 {
			t.Fatalf("grants after sign-out %v", left)
		}
	})
}

func TestAPIAccessWebhookList(t *testing.T) {
	n := shared
	f := n.hookFixture(t, 3)
	second, _ := n.createHook(t, f)
	ask[*kitpb.Ok](t, n, actors.KindInstallation, f.inst.Id, &kitpb.RevokeWebhook{WebhookId: second})
	hooks := ask[*kitpb.WebhooksReply](t, n, actors.KindInstallation, f.inst.Id, &kitpb.ListWebhooks{}).Webhooks
	if len(hooks) != 2 || hooks[0].Id != f.hookID || hooks[0].State != actors.WebhookActive || hooks[1].State != actors.WebhookRevoked {
		t.Fatalf("webhooks %v", hooks)
	}
	for _, h := range hooks {
		if len(h.SecretHash) != 0 {
			t.Fatalf("webhook %s listed with its secret hash", h.Id)
		}
	}
}

// Every action of the API access page is an audit entry of the Kit's
// developer log (docs/decisions.md "Home and API access pages"), whoever calls the installation: the page or
// the operator API.
func TestAPIAccessAudit(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users[0])
	v := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0", "messages:read"), false)
	inst := n.install(t, w.id, v.Kit.Id, "")
	last := func() logLine {
		l := devLog(t, n, v.Kit.Id)
		return l[len(l)-1]
	}
	for _, tc := range []struct {
		name   string
		do     func()
		event  string
		status string
	}{
		{"adding the Kit bot to a channel", func() { n.addChannel(t, inst.Id, conv) }, "channel.added", ""},
		{"removing the Kit bot from a channel", func() {
			ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, inst.Id, &kitpb.RemoveChannel{ConversationId: conv})
		}, "channel.removed", ""},
		{"revoking a bot token", func() {
			h := ids.Hash(n.botToken(t, inst.Id))
			ask[*kitpb.Ok](t, n, actors.KindInstallation, inst.Id, &kitpb.RevokeCredential{SecretHash: h[:]})
		}, "token.revoked", "bot"},
		{"generating a client secret", func() {
			h := ids.Hash(ids.NewSecret(ids.ClientSecret))
			ask[*kitpb.KitSecretReply](t, n, actors.KindKit, v.Kit.Id, &kitpb.RotateKitSecret{Which: actors.SecretClient, SecretHash: h[:]})
		}, "client_secret.rotated", "1"},
		{"rotating the signing secret", func() {
			h := ids.Hash(ids.NewSecret(ids.SigningSecret))
			ask[*kitpb.KitSecretReply](t, n, actors.KindKit, v.Kit.Id, &kitpb.RotateKitSecret{Which: actors.SecretSigning, SecretHash: h[:]})
		}, "signing_secret.rotated", "1"},
		{"uninstalling", func() { ask[*kitpb.Ok](t, n, actors.KindInstallation, inst.Id, &kitpb.Uninstall{}) }, "installation.uninstalled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do()
			if got := last(); got.source != "audit" || got.level != "info" || got.event != tc.event || got.status != tc.status {
				t.Fatalf("last entry %+v, want audit %s %q", got, tc.event, tc.status)
			}
		})
	}
}

// SPEC.md 3 "Incoming webhook": archiving its channel disables a webhook
// (410 gone, for good). The API access page lists each webhook "with its
// state in words" (docs/decisions.md "Home and API access pages"), so a
// webhook of an archived channel is listed disabled, and why, before any
// post finds it out.
func TestAPIAccessWebhookListAfterItsChannelIsArchived(t *testing.T) {
	n := shared
	f := n.hookFixture(t, 3)
	ask[*kitpb.ConversationReply](t, n, actors.KindConversation, f.conv, &kitpb.ArchiveConversation{})
	hooks := ask[*kitpb.WebhooksReply](t, n, actors.KindInstallation, f.inst.Id, &kitpb.ListWebhooks{}).Webhooks
	if len(hooks) != 1 || hooks[0].State != actors.WebhookDisabled || hooks[0].Reason != actors.DisabledArchived || hooks[0].EndedAt == 0 {
		t.Fatalf("webhooks of an archived channel listed as %v, want disabled (archived)", hooks)
	}
	wantCode(t, n.hookPost(f, "x"), kiterr.Gone)
}
