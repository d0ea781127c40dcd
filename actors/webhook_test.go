package actors_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// hookFixture is an installed Kit allowing webhooks, an admin member of a
// channel, and one webhook into that channel.
type hookFixture struct {
	ws, admin, conv string
	inst            *kitpb.Installation
	kitID           string
	hookID          string
	secret          string
}

func (n *testNode) hookFixture(t testing.TB, max int) *hookFixture {
	t.Helper()
	w := n.workspace(t, 0)
	f := &hookFixture{ws: w.id, admin: ids.New()}
	admin := ask[*kitpb.UserReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateUser{UserId: f.admin, DisplayName: "admin", Role: "admin"})
	_ = admin
	f.conv = n.channel(t, w.id, f.admin)
	var man map[string]any
	noErr(t, json.Unmarshal([]byte(manifestJSON(newSlug(), "1.0.0", append([]string{actors.WebhookScope}, chatScopes...)...)), &man))
	man["incomingWebhooks"] = map[string]any{"maxPerInstallation": max}
	b, _ := json.Marshal(man)
	v := n.mustUpload(t, w.id, string(b), false)
	f.kitID = v.Kit.Id
	f.inst = n.install(t, w.id, f.kitID, "")
	f.hookID, f.secret = n.createHook(t, f)
	return f
}

func (n *testNode) createHook(t testing.TB, f *hookFixture) (id, secret string) {
	t.Helper()
	return n.createHookIn(t, f, f.conv)
}

func (n *testNode) createHookIn(t testing.TB, f *hookFixture, conv string) (id, secret string) {
	t.Helper()
	u := ask[*kitpb.UserReply](t, n, actors.KindWorkspace, f.ws, &kitpb.GetUser{UserId: f.admin})
	id, secret = ids.New(), ids.NewSecret("")
	ask[*kitpb.WebhookReply](t, n, actors.KindInstallation, f.inst.Id, &kitpb.CreateWebhook{
		WebhookId: id, ConversationId: conv, Creator: u.User, SecretHash: actors.HookSecretHash(secret),
	})
	return id, secret
}

func (n *testNode) hookPost(f *hookFixture, text string) error {
	_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, f.hookID, &kitpb.HookPost{
		InstallationId: f.inst.Id, SecretHash: actors.HookSecretHash(f.secret), Text: text,
	})
	return err
}

func (n *testNode) hookState(t *testing.T, id string) *kitpb.Webhook {
	t.Helper()
	return ask[*kitpb.WebhookReply](t, n, actors.KindWebhook, id, &kitpb.GetWebhook{}).Webhook
}

// logLine is what a test compares of a developer log entry.
type logLine struct {
	source, level, event, status, code string
	http                               int32
}

func devLog(t *testing.T, n *testNode, kitID string) []logLine {
	t.Helper()
	entries, _, err := actors.ReadDevLog(n.env, kitID, "", 100, nil)
	noErr(t, err)
	var out []logLine
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		out = append(out, logLine{e.Source, e.Level, e.Event, e.Status, e.ErrorCode, e.GetHttpStatus()})
	}
	return out
}

// docs/api.md "Incoming webhooks" and "Developer log entry": every delivery outcome is written to the
// Kit's developer log: one entry per outcome, source delivery, with
// httpStatus and errorCode; state changes are audit entries.
func TestWebhookDeveloperLog(t *testing.T) {
	n := shared
	f := n.hookFixture(t, 2)
	noErr(t, n.hookPost(f, "hello"))

	_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, f.hookID, &kitpb.HookPost{
		InstallationId: f.inst.Id, SecretHash: actors.HookSecretHash(f.secret),
		Invalid: kiterr.ToFailure(kiterr.Invalid("text", "must not be blank")),
	})
	wantCode(t, err, kiterr.Validation, "text")

	// Burst 5, two already spent: the third post after them is refused, and
	// repeated refusals within a second are logged once.
	for range 3 {
		noErr(t, n.hookPost(f, "burst"))
	}
	for range 3 {
		wantCode(t, n.hookPost(f, "over"), kiterr.RateLimited)
	}
	n.clk.Advance(time.Second)

	ask[*kitpb.ConversationReply](t, n, actors.KindConversation, f.conv, &kitpb.ArchiveConversation{})
	wantCode(t, n.hookPost(f, "archived"), kiterr.Gone)
	// The second 410 is within the same second: not logged again.
	wantCode(t, n.hookPost(f, "archived"), kiterr.Gone)

	want := []logLine{
		{"audit", "info", "version.uploaded", "1.0.0", "", 0}, // the fixture's upload
		{"audit", "info", "webhook.created", "active", "", 0},
		{"delivery", "info", "webhook.post", "posted", "", 200},
		{"delivery", "error", "webhook.post", "rejected", "validation_error", 400},
		{"delivery", "info", "webhook.post", "posted", "", 200},
		{"delivery", "info", "webhook.post", "posted", "", 200},
		{"delivery", "info", "webhook.post", "posted", "", 200},
		{"delivery", "error", "webhook.post", "rate_limited", "rate_limited", 429},
		{"audit", "info", "webhook.disabled", "archived", "", 0},
		{"delivery", "error", "webhook.post", "disabled", "gone", 410},
	}
	// Refusal entries are written without waiting on their sync: give the
	// (already applied) writes a moment to be visible.
	var got []logLine
	eventually.Holds(eventually.Within, func() bool { got = devLog(t, n, f.kitID); return len(got) >= len(want) })
	if len(got) != len(want) {
		t.Fatalf("log has %d entries, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	// The audit entry and the 410 entry of the disabling commit in one
	// batch with ids in creation order; the rest are in order of writing.
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestWebhookStates(t *testing.T) {
	n := shared
	for _, tc := range []struct {
		name   string
		act    func(t *testing.T, f *hookFixture)
		state  string
		reason string
		code   kiterr.Code
	}{
		// Its record is then deleted by the purge (installation_purge.go).
		{"uninstall ends every webhook as uninstalled, then forgotten", func(t *testing.T, f *hookFixture) {
			ask[*kitpb.Ok](t, n, actors.KindInstallation, f.inst.Id, &kitpb.Uninstall{})
		}, "", "", kiterr.NotFound},
		{"removing the Kit bot from the channel disables its webhooks", func(t *testing.T, f *hookFixture) {
			ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, f.inst.Id, &kitpb.RemoveChannel{ConversationId: f.conv})
		}, actors.WebhookDisabled, actors.DisabledBotRemoved, kiterr.Gone},
		{"revoking ends it as revoked", func(t *testing.T, f *hookFixture) {
			ask[*kitpb.Ok](t, n, actors.KindInstallation, f.inst.Id, &kitpb.RevokeWebhook{WebhookId: f.hookID})
		}, actors.WebhookRevoked, "", kiterr.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := n.hookFixture(t, 1)
			tc.act(t, f)
			if tc.state == "" {
				eventually.True(t, "the webhook forgotten", func() bool {
					_, err := try[*kitpb.WebhookReply](n, actors.KindWebhook, f.hookID, &kitpb.GetWebhook{})
					return kiterr.CodeOf(err) == kiterr.NotFound
				})
				wantCode(t, n.hookPost(f, "x"), tc.code)
				return
			}
			h := n.hookState(t, f.hookID)
			if h.State != tc.state || h.Reason != tc.reason || h.EndedAt == 0 {
				t.Fatalf("state %q reason %q endedAt %d, want %q %q and set", h.State, h.Reason, h.EndedAt, tc.state, tc.reason)
			}
			wantCode(t, n.hookPost(f, "x"), tc.code)
		})
	}
}

// Every not-found cause takes the same path to the same error value.
func TestWebhookNotFoundIsOneAnswer(t *testing.T) {
	n := shared
	f := n.hookFixture(t, 1)
	post := func(hookID, instID, secret string) error {
		_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, hookID, &kitpb.HookPost{
			InstallationId: instID, SecretHash: actors.HookSecretHash(secret), Text: "x",
		})
		return err
	}
	var msgs []string
	for _, err := range []error{
		post(ids.New(), f.inst.Id, f.secret),
		post(f.hookID, f.inst.Id, ids.NewSecret("")),
		post(f.hookID, ids.New(), f.secret),
	} {
		wantCode(t, err, kiterr.NotFound)
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Fatalf("not-found answers differ: %q vs %q", m, msgs[0])
		}
	}
	noErr(t, post(f.hookID, f.inst.Id, f.secret))
}

// A webhook forwards its posts to the conversation, which answers the
// requester. When the conversation's activation went away (passivated)
// while the webhook stayed, the forwarded post dies at the stale address:
// the requester must get its answer anyway, from a fresh activation. The
// cluster's second try is the same post, so it takes no second token from
// the webhook's bucket. The idle timer runs on real time, the buckets on
// the test clock, which stands still here.
func TestWebhookForwardToAPassivatedConversation(t *testing.T) {
	n := ownNode(t)
	const idle = 150 * time.Millisecond
	n.env.IdleTimeout = idle
	f := n.hookFixture(t, 1)
	post := func(text string) *kitpb.HookPostReply {
		t.Helper()
		return ask[*kitpb.HookPostReply](t, n, actors.KindWebhook, f.hookID, &kitpb.HookPost{
			InstallationId: f.inst.Id, SecretHash: actors.HookSecretHash(f.secret), Text: text, PostId: ids.Nonce(),
		})
	}
	if r := post("first"); r.Limit.GetRemaining() != 4 {
		t.Fatalf("first post: %v tokens left, want 4 of the burst of 5", r.Limit.GetRemaining())
	}
	before := n.node.LocalProcesses()
	// Keep the webhook busy and let everything else idle out.
	deadline := time.Now().Add(3 * time.Second)
	for n.node.LocalProcesses() >= before-1 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing passivated: %d processes", n.node.LocalProcesses())
		}
		n.hookState(t, f.hookID)
		time.Sleep(idle / 4)
	}
	if r := post("second"); r.Limit.GetRemaining() != 3 {
		t.Fatalf("post after a dead letter: %v tokens left, want 3", r.Limit.GetRemaining())
	}
	page, err := n.list(userCaller(f.ws, f.admin), f.conv, "", 0, 10)
	noErr(t, err)
	if got := texts(page.Messages); len(got) != 2 || got[0] != "second" {
		t.Fatalf("messages %q, want second and first", got)
	}
}

// A post to a webhook id with no record goes to the stand-in, which stays
// active as a live webhook does: the three 404s of the hooks host (made-up
// id, wrong secret, unknown installation) take one path and one time.
func TestWebhookTargets(t *testing.T) {
	n := shared
	f := n.hookFixture(t, 1)
	made := ids.New()
	targets := actors.NewWebhookTargets(n.env, 4)
	for _, tt := range []struct {
		name, id, want string
	}{
		{"a live webhook answers for itself", f.hookID, f.hookID},
		{"and again, remembered", f.hookID, f.hookID},
		{"a made-up id goes to the stand-in", made, actors.AbsentWebhook},
		{"and again: absence is not remembered as existence", made, actors.AbsentWebhook},
		{"the stand-in's own id goes to the stand-in", actors.AbsentWebhook, actors.AbsentWebhook},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := targets.Of(tt.id)
			noErr(t, err)
			if got != tt.want {
				t.Fatalf("target %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("the stand-in answers not found, whatever is posted", func(t *testing.T) {
		// That it stays active (exists) is what makes its answer as fast as
		// a live webhook's: e2e TestWebhooks_NotFoundTakesTheSameTime.
		for _, inst := range []string{f.inst.Id, ids.New()} {
			_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, actors.AbsentWebhook, &kitpb.HookPost{
				InstallationId: inst, SecretHash: actors.HookSecretHash(f.secret), Text: "x",
			})
			wantCode(t, err, kiterr.NotFound)
		}
	})
}

// docs/webhooks.md "Decisions": creation checks, in order, the scope, the
// creator, the channel (unknown 404, not a channel 400, archived 409) and
// only then maxPerInstallation (409 conflict): a full installation does not
// hide what is wrong with the channel, which revoking a webhook would not
// fix.
func TestCreateWebhookChecksTheChannelBeforeTheCount(t *testing.T) {
	n := shared
	for _, tc := range []struct {
		name string
		conv func(f *hookFixture) string
		code kiterr.Code
		says string
	}{
		{"not a channel is 400 conversationId", func(f *hookFixture) string {
			return n.conversation(t, f.ws, "group", f.admin)
		}, kiterr.Validation, "conversationId"},
		{"an archived channel is 409 for the archive", func(f *hookFixture) string {
			c := n.channel(t, f.ws, f.admin)
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, c, &kitpb.ArchiveConversation{})
			return c
		}, kiterr.Conflict, "archived"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := n.hookFixture(t, 1) // its one webhook fills it
			u := ask[*kitpb.UserReply](t, n, actors.KindWorkspace, f.ws, &kitpb.GetUser{UserId: f.admin})
			_, err := try[*kitpb.WebhookReply](n, actors.KindInstallation, f.inst.Id, &kitpb.CreateWebhook{
				WebhookId: ids.New(), ConversationId: tc.conv(f), Creator: u.User, SecretHash: actors.HookSecretHash(ids.NewSecret("")),
			})
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want it to name %q", err, tc.says)
			}
		})
	}
}
