package e2e

import (
	"testing"

	"github.com/kitd/kitd/internal/eventually"
)

// docs/deliveries.md "Events need their scope when sent": a version that
// drops the scope an installed subscription needs (messages:read for
// message.posted), a draft too, stops its events from its upload, as it
// stops the bot token's reads: the event is not sent, it is dead-lettered
// at once with missing_scope (no retries, its conversation not held, the
// endpoint not paused), and a redelivery once the scope is back sends it.
func TestEventsNeedTheirScopeWhenSent(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	e.in.post(t, e.convs[0], "before")
	eventually.True(t, "the first delivery", func() bool { return len(rcv.received()) == 1 })

	draft := func(version string, scopes []string) {
		t.Helper()
		m := manifest(e.kit.Slug, version, scopes)
		m["endpoints"] = e.kit.Manifest["endpoints"]
		if len(scopes) == len(baseScopes) {
			m["events"] = e.kit.Manifest["events"]
		}
		want(t, e.w.uploadVersion(t, m, false), 201)
	}
	draft("1.1.0", without(baseScopes, "messages:read"))
	wantError(t, e.in.api(t, "GET", "/conversations/"+e.convs[0]+"/messages", nil), 403, "missing_scope")
	e.in.post(t, e.convs[0], "after")
	var dead map[string]any
	eventually.True(t, "the second event dead", func() bool {
		dead, _ = jget(deliveries(t, s, e).JSON, "deliveries.0").(map[string]any)
		return jstr(dead, "state") == "dead" || len(rcv.received()) > 1
	})
	if n := len(rcv.received()); n != 1 {
		t.Fatalf("%d deliveries after the draft dropped messages:read, want the first only: %s", n, rcv.received()[n-1].body)
	}
	if jstr(dead, "lastErrorCode") != "missing_scope" || dead["attempts"] != float64(1) {
		t.Errorf("dead letter %v, want missing_scope after one attempt", dead)
	}

	draft("1.2.0", baseScopes)
	want(t, s.api(t, e.w.Dev, "POST", "/dev/installations/"+e.in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(dead, "eventId")}, nil), 202)
	eventually.True(t, "the redelivery", func() bool { return len(rcv.received()) == 2 })
	if got := jstr(jget(rcv.received()[1].event, "data"), "message.text"); got != "after" {
		t.Errorf("redelivered %q, want the second message", got)
	}
}
