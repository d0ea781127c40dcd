package e2e

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/persistence"
)

// Every key a server writes comes from a constructor of actors/keys.go
// (actors.KeyKind names it): a scenario that writes every kind of record
// runs on a server of its own, which then stops, and each key of its data
// directory must decode.
func TestStoredKeysHaveAConstructor(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s := startServerOpts(t, ServerOpts{Limits: "off", Args: []string{
		"--delivery-ca", rcv.caPath, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://")}})
	writeEveryRecord(t, s, rcv)
	s.stopClean(t)

	store, err := persistence.Open(s.DataDir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seen := map[string]int{}
	var unknown []string
	err = store.Scan(nil, nil, false, func(k, _ []byte) bool {
		if kind := actors.KeyKind(k); kind != "" {
			seen[kind]++
		} else {
			unknown = append(unknown, strings.ToValidUTF8(string(k), "?"))
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("keys by constructor: %v", seen)
	if len(unknown) > 0 {
		t.Errorf("%d keys no constructor builds:\n  %q", len(unknown), unknown)
	}
	// The scenario must reach every kind of record, or the check above
	// proves little. Locators of messages are only in data directories
	// from before message ids carried their position.
	var missing []string
	for _, kind := range []string{
		"workspaceKey", "userKey", "installedKitKey", "sessionKey", "sessionSecretKey", "developerTokenKey",
		"conversationKey", "memberKey", "botMemberKey", "messageKey", "threadReplyKey", "idempotencyKey", "idempotencyExpiryKey",
		"fileKey", "fileChunkKey", "memberConversationKey", "messageTagKey",
		"installationKey", "webhookRefKey", "grantCredentialKey", "webhookKey",
		"kitKey", "versionKey", "clientSecretKey", "signingSecretKey", "domainKey", "installLinkKey",
		"installLinkIndexKey", "workspaceKitKey", "slugKey", "credentialKey", "locatorKey", "devLogKey",
		"emailUserKey", "botTokenKey", "userGrantKey", "eventSequenceKey", "queuedEventKey", "deadEventKey",
		"deliveredEventKey", "deliveryEndpointKey", "runKey",
	} {
		if seen[kind] == 0 {
			missing = append(missing, kind)
		}
	}
	if len(missing) > 0 {
		kinds := make([]string, 0, len(seen))
		for k := range seen {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		t.Errorf("the scenario wrote no %v (it wrote %v)", missing, kinds)
	}
}

// written is what writeEveryRecord made that a test can read back.
type written struct {
	conv, message, file, user string
	hook                      *Hook
}

// writeEveryRecord drives s through every kind of record the actors store;
// s delivers events to rcv.
func writeEveryRecord(t *testing.T, s *Server, rcv *receiver) written { return writeRecords(t, s, rcv) }

// writeRecords is writeEveryRecord, without the records of event
// deliveries when rcv is nil: builds before them (TestDirectoryOfAnOlderBuildUpgrades)
// cannot write those.
func writeRecords(t *testing.T, s *Server, rcv *receiver) written {
	t.Helper()
	// A workspace with its users and the owner's developer token.
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.members()...)
	// A member who signs in with a password is in the email index.
	member(t, s, w.ID, "Signs in", "keys-"+randHex(6)+"@example.com", "pw "+randHex(6))

	// A Kit that allows webhooks and asks for file and reaction scopes,
	// with a domain and a signing secret; installed, its bot in c.
	scopes := append([]string{"incoming-webhook"}, fileScopes...)
	k := w.webhookKit(t, 2, scopes...)
	want(t, s.api(t, w.Dev, "POST", "/dev/kits/"+k.ID+"/domains", map[string]any{"domain": "keys.example.com"}, nil), 201)
	want(t, s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/signing-secret", nil), 201)
	in := w.install(t, k, c.ID)

	// An unlisted Kit with an install link.
	newInstallLink(t, w, w.unlistedKit(t))

	// The authorization flow: a web session, a code, kit.access (a client
	// secret, a user token and a refresh token of one grant).
	g := authorizeGrant(t, in, w.Mem.ID)
	user := g.access()

	// Messages: one, a reply in its thread, one with an Idempotency-Key;
	// a reaction; a file.
	parent := in.post(t, c.ID, "parent")
	r := in.api(t, "POST", "/messages", map[string]any{"conversationId": c.ID, "text": "reply", "threadParentId": jstr(parent, "id")})
	want(t, r, 201)
	r = s.api(t, in.Token, "POST", "/messages", map[string]any{"conversationId": c.ID, "text": "once"}, map[string]string{"Idempotency-Key": "keys-" + randHex(4)})
	want(t, r, 201)
	want(t, s.api(t, user, "POST", "/reactions", map[string]any{"messageId": jstr(parent, "id"), "reaction": "heart"}, nil), 200)
	r = s.api(t, user, "POST", "/files", uploadBody(c.ID, "text/plain", []byte("stored in one chunk")), nil)
	want(t, r, 201)
	file := r.Str("file.id")

	// A webhook and a post through it.
	h := in.hook(t, c.ID)
	want(t, h.post(t, map[string]any{"text": "from a webhook"}), 200)

	// A Kit subscribed to events whose endpoint (rcv) fails every attempt
	// but its second: one event is dead-lettered after 24 hours (another
	// conversation's event delivered meanwhile keeps the endpoint from a
	// pause), one is delivered, one stays queued for its retry. Outbox
	// entries (outboxKey) are gone by the time the server has stopped
	// cleanly; TestEventsSurviveKill9 meets them.
	if rcv != nil {
		rcv.answerWith(func(n int) (int, time.Duration, bool) {
			if n == 2 {
				return 200, 0, false
			}
			return 500, 0, false
		})
		ek := w.eventsKit(t, []string{"message.posted"}, baseScopes...)
		ek.Manifest["endpoints"] = map[string]any{"events": rcv.srv.URL + "/kit", "tools": rcv.srv.URL + "/tools"}
		ek.Manifest["tools"] = []any{map[string]any{
			"name": "lookup", "displayName": map[string]any{"en": "Look up"}, "description": map[string]any{"en": "Looks up"},
			"access": "read", "dataClass": "standard", "audience": "private",
		}}
		ek.Manifest["version"] = "1.0.1"
		want(t, w.uploadVersion(t, ek.Manifest, true), 201)
		want(t, s.ops(t, "POST", "/ops/v1/kits/"+ek.ID+"/signing-secret", nil), 201)
		c2 := w.channel(t, "public", w.members()...)
		ein := w.install(t, ek, c.ID, c2.ID)
		deliveryStatus := func(status string) func() bool {
			return func() bool {
				r := s.api(t, w.Dev, "GET", "/dev/kits/"+ek.ID+"/logs?source=delivery", nil, nil)
				return slices.ContainsFunc(jarr(r.JSON, "entries"), func(e any) bool { return jstr(e, "status") == status })
			}
		}
		ein.post(t, c.ID, "an event that dies")
		eventually.True(t, "a failed delivery", deliveryStatus("retry_scheduled"))
		ein.post(t, c2.ID, "an event delivered")
		eventually.True(t, "a delivery", deliveryStatus("delivered"))
		advance(t, s, 25*time.Hour)
		eventually.True(t, "a dead letter", deliveryStatus("dead_lettered"))
		ein.post(t, c.ID, "an event that waits")
		// The keyed post above expired in those 25 hours and the last post
		// swept it away: one more leaves a live record and its entry of the
		// conversation's expiry index.
		want(t, s.api(t, in.Token, "POST", "/messages", map[string]any{"conversationId": c.ID, "text": "once more"},
			map[string]string{"Idempotency-Key": "keys-" + randHex(4)}), 201)

		// A member's tool call: a run (runKey), committed before the 202.
		cookie, _ := webSession(t, s, w.Mem.ID)
		want(t, memberCall(t, s, "POST", "/app/api/tools/invoke", cookie, memberSession(t, s, cookie),
			map[string]any{"installationId": ein.ID, "conversationId": c.ID, "tool": "lookup", "arguments": map[string]any{}}), 202)
	}

	// The developer log holds entries of all of it.
	r = s.api(t, w.Dev, "GET", "/dev/kits/"+k.ID+"/logs", nil, nil)
	want(t, r, 200)
	if !slices.ContainsFunc(jarr(r.JSON, "entries"), func(e any) bool { return jstr(e, "event") == "webhook.post" }) {
		t.Fatalf("the webhook post was not logged%s", r)
	}
	return written{conv: c.ID, message: jstr(parent, "id"), file: file, user: user, hook: h}
}
