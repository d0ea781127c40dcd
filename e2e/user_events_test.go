package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/kitverify"
)

// docs/deliveries.md "Events", user.*: adding a member to the workspace and
// deactivating one reach a Kit subscribed to user.joined and user.updated
// whose bot has users:read, signed, in sequence, with data {user} exactly
// as the bot reads the user through the Web API (its email with
// users:read.email).
func TestUserEventsAreDelivered(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	w := newWorkspace(t, s)
	scopes := append(baseScopes[:len(baseScopes):len(baseScopes)], "users:read.email")
	k, secret := w.receivingKit(t, rcv, []string{"user.joined", "user.updated"}, scopes...)
	in := w.install(t, k)

	u := w.user(t, "member")
	want(t, s.ops(t, "DELETE", "/ops/v1/users/"+u.ID, nil), 200)
	eventually.True(t, "two user events", func() bool { return len(rcv.received()) >= 2 })

	r := s.api(t, in.Token, "GET", "/users/"+u.ID, nil, nil)
	want(t, r, 200)
	asRead, err := json.Marshal(r.Get("user"))
	if err != nil {
		t.Fatal(err)
	}
	got := rcv.received()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2", len(got))
	}
	for i, typ := range []string{"user.joined", "user.updated"} {
		d := got[i]
		if err := kitverify.Verify(d.header.Get(kitverify.Header), d.body, time.Now(), secret); err != nil {
			t.Fatalf("%s: signature: %v", typ, err)
		}
		ev := d.event
		if jstr(ev, "type") != typ || ev["sequence"] != float64(i+1) || jstr(ev, "installationId") != in.ID || !isUUID(jstr(ev, "eventId")) {
			t.Fatalf("delivery %d: %s, want %s with sequence %d", i, d.body, typ, i+1)
		}
		data, err := json.Marshal(jget(ev, "data"))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"user":` + string(asRead) + `}`; string(data) != want {
			t.Errorf("%s: data %s, want %s (GET /users/{id} as the bot)", typ, data, want)
		}
	}
	if jstr(jget(got[0].event, "data"), "user.email") != u.Email {
		t.Errorf("user.joined without the email the bot may read: %s", got[0].body)
	}
}

// docs/credentials.md "Effective scopes", docs/deliveries.md "User
// events": a version that drops users:read.email, a draft too, takes the
// email from the user.* events of every installation from its upload, as
// from its bot token: an event emitted after the upload, and one emitted
// before it (with the email) that is redelivered after, go out as the
// bot reads the user through GET /users/{id}, without the email.
func TestUserEventsEmailFollowsTheLatestVersion(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	w := newWorkspace(t, s)
	scopes := append(baseScopes[:len(baseScopes):len(baseScopes)], "users:read.email")
	k, _ := w.receivingKit(t, rcv, []string{"user.joined"}, scopes...)
	in := w.install(t, k)

	before := w.user(t, "member")
	eventually.True(t, "the first user event", func() bool { return len(rcv.received()) >= 1 })
	first := rcv.received()[0].event
	if jstr(jget(first, "data"), "user.email") != before.Email {
		t.Fatalf("user.joined before the draft without the email: %v", first)
	}

	draft := manifest(k.Slug, "1.1.0", baseScopes) // users:read.email dropped
	draft["events"] = k.Manifest["events"]
	draft["endpoints"] = k.Manifest["endpoints"]
	want(t, w.uploadVersion(t, draft, false), 201)

	after := w.user(t, "member")
	want(t, s.api(t, w.Dev, "POST", "/dev/installations/"+in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(first, "eventId")}, nil), 202)
	eventually.True(t, "two more user events", func() bool { return len(rcv.received()) >= 3 })
	for _, d := range rcv.received()[1:] {
		u := jget(d.event, "data")
		id := jstr(u, "user.id")
		r := s.api(t, in.Token, "GET", "/users/"+id, nil, nil)
		want(t, r, 200)
		if r.Str("user.email") != "" {
			t.Fatalf("GET /users/%s as the bot shows the email after the draft%s", id, r)
		}
		if email := jstr(u, "user.email"); email != "" {
			t.Errorf("%s of %s (before %s, after %s) carries email %q the bot may no longer read: %s",
				jstr(d.event, "type"), id, before.ID, after.ID, email, d.body)
		}
	}
}
