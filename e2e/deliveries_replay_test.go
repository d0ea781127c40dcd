package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/kitverify"
)

// docs/deliveries.md "Replay and visibility" and "Endpoint pause": the developer
// API's list of deliveries and redelivery, kit trigger, and an endpoint
// failing for 24 hours paused until a redelivery succeeds or a new version.

// deliveries is the installation's deliveries list, highest sequence first.
func deliveries(t *testing.T, s *Server, e *eventsSetup) *Resp {
	t.Helper()
	r := s.api(t, e.w.Dev, "GET", "/dev/installations/"+e.in.ID+"/deliveries", nil, nil)
	want(t, r, 200)
	return r
}

// deliveryLogEvents are the developer log's delivery entries other than
// attempts (endpoint.paused, endpoint.resumed), oldest first.
func deliveryLogEvents(t *testing.T, s *Server, e *eventsSetup) []string {
	t.Helper()
	var out []string
	for _, en := range deliveryLog(t, s, e) {
		if ev := jstr(en, "event"); ev != "event.delivery" {
			out = append(out, ev)
		}
	}
	return out
}

func TestDeliveriesListAndRedeliver(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	e.in.post(t, e.convs[0], "once")
	eventually.True(t, "the delivery", func() bool { return len(rcv.received()) == 1 })
	var first map[string]any
	eventually.True(t, "the delivery in the list", func() bool {
		first, _ = jget(deliveries(t, s, e).JSON, "deliveries.0").(map[string]any)
		return jstr(first, "state") == "succeeded"
	})
	t.Run("a delivered event is listed with its state and last answer", func(t *testing.T) {
		ev := rcv.received()[0].event
		if jstr(first, "eventId") != jstr(ev, "eventId") || first["sequence"] != ev["sequence"] || jstr(first, "type") != "message.posted" ||
			jstr(first, "conversationId") != e.convs[0] || first["attempts"] != 1.0 || first["lastHttpStatus"] != 200.0 || first["finishedAt"] == nil {
			t.Fatalf("listed %v for %s", first, rcv.received()[0].body)
		}
		if st := deliveries(t, s, e).Str("endpoint.state"); st != "healthy" {
			t.Fatalf("endpoint %s", st)
		}
	})
	t.Run("a redelivery keeps eventId and sequence, signed, as a retry with reason redelivery", func(t *testing.T) {
		r := s.api(t, e.w.Dev, "POST", "/dev/installations/"+e.in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(first, "eventId")}, nil)
		want(t, r, 202)
		if r.Get("redelivered") != 1.0 {
			t.Fatalf("redelivered%s", r)
		}
		eventually.True(t, "the redelivery", func() bool { return len(rcv.received()) == 2 })
		got := rcv.received()[1]
		if jstr(got.event, "eventId") != jstr(first, "eventId") || got.event["sequence"] != first["sequence"] ||
			got.header.Get("Service-Retry-Num") != "1" || got.header.Get("Service-Retry-Reason") != "redelivery" {
			t.Fatalf("redelivered %s with headers %v", got.body, got.header)
		}
		if err := kitverify.Verify(got.header.Get(kitverify.Header), got.body, time.Now(), e.secret); err != nil {
			t.Fatal(err)
		}
		if got.header.Get("Service-Delivery-Id") == rcv.received()[0].header.Get("Service-Delivery-Id") {
			t.Fatal("a redelivery reuses the Service-Delivery-Id")
		}
	})
	t.Run("another workspace's developer sees nothing", func(t *testing.T) {
		other := newWorkspace(t, s)
		want(t, s.api(t, other.Dev, "GET", "/dev/installations/"+e.in.ID+"/deliveries", nil, nil), 404)
		want(t, s.api(t, other.Dev, "POST", "/dev/installations/"+e.in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(first, "eventId")}, nil), 404)
	})
}

// pausedEndpoint starts a server and an installation with convs
// conversations whose endpoint fails every attempt until it is paused: the
// first attempt, then one retry every 5 hours of the test clock (more than
// the longest wait), 6 attempts over 25 hours. ev is the failing event.
func pausedEndpoint(t *testing.T, convs int) (s *Server, e *eventsSetup, rcv *receiver, ev map[string]any) {
	t.Helper()
	rcv = newReceiver(t)
	s, _ = deliveryServer(t, rcv, false, "")
	e = newEventsSetup(t, s, rcv, convs)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 500, 0, false })
	e.in.post(t, e.convs[0], "failing")
	for n := 1; ; n++ {
		eventually.True(t, fmt.Sprintf("attempt %d", n), func() bool { return len(rcv.received()) == n })
		eventually.True(t, fmt.Sprintf("attempt %d recorded", n), func() bool { return len(deliveryLog(t, s, e)) >= n })
		if deliveries(t, s, e).Str("endpoint.state") == "paused" {
			if n != 6 {
				t.Fatalf("paused after %d attempts, want 6 (25 hours)", n)
			}
			break
		}
		if n == 6 {
			t.Fatal("not paused after 25 hours of failures")
		}
		advance(t, s, 5*time.Hour)
	}
	return s, e, rcv, rcv.received()[0].event
}

func TestDeliveryEndpointPause(t *testing.T) {
	t.Parallel()
	t.Run("paused after 24 hours of failures; a successful redelivery resumes it", func(t *testing.T) {
		t.Parallel()
		s, e, rcv, ev := pausedEndpoint(t, 2)
		r := deliveries(t, s, e)
		if r.Str("deliveries.0.state") != "retrying" || r.Get("deliveries.0.attempts") != 6.0 || r.Str("deliveries.0.lastErrorCode") != "http_error" || r.Str("endpoint.pausedAt") == "" {
			t.Fatalf("paused, the event is not waiting%s", r)
		}
		if got := deliveryLogEvents(t, s, e); len(got) != 1 || got[0] != "endpoint.paused" {
			t.Fatalf("developer log %q, want endpoint.paused", got)
		}
		// A new event waits; the clock passing sends nothing.
		e.in.post(t, e.convs[1], "while paused")
		eventually.True(t, "the new event queued", func() bool { return deliveries(t, s, e).Str("deliveries.0.state") == "queued" })
		advance(t, s, 5*time.Hour)
		rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
		want(t, s.api(t, e.w.Dev, "POST", "/dev/installations/"+e.in.ID+"/deliveries/redeliver", map[string]any{"eventId": jstr(ev, "eventId")}, nil), 202)
		eventually.True(t, "the redelivery and the event that waited", func() bool { return len(rcv.received()) >= 8 })
		got := rcv.received()
		if len(got) != 8 {
			t.Fatalf("%d requests after the pause, want the redelivery and the waiting event", len(got)-6)
		}
		if jstr(got[6].event, "eventId") != jstr(ev, "eventId") || got[6].header.Get("Service-Retry-Reason") != "redelivery" || got[6].header.Get("Service-Retry-Num") != "6" {
			t.Fatalf("the first request after the pause is %s %v, want the redelivery", got[6].body, got[6].header)
		}
		if jstr(got[7].event, "data.message.text") != "while paused" {
			t.Fatalf("then %s, want the event that waited", got[7].body)
		}
		eventually.True(t, "endpoint.resumed in the log", func() bool { return len(deliveryLogEvents(t, s, e)) == 2 })
		if got := deliveryLogEvents(t, s, e); got[1] != "endpoint.resumed" {
			t.Fatalf("developer log %q", got)
		}
		if st := deliveries(t, s, e).Str("endpoint.state"); st != "healthy" {
			t.Fatalf("endpoint %s after the resume", st)
		}
	})
	t.Run("a new version resumes it", func(t *testing.T) {
		t.Parallel()
		s, e, rcv, ev := pausedEndpoint(t, 1)
		rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
		m := manifest(e.kit.Slug, "1.0.1", baseScopes)
		m["events"] = []string{"message.posted"}
		m["endpoints"] = map[string]any{"events": rcv.srv.URL + "/events"}
		want(t, e.w.uploadVersion(t, m, true), 201)
		want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+e.w.ID+"/installations", map[string]any{"kitId": e.kit.ID}), 201)
		eventually.True(t, "the retry after the new version", func() bool { return len(rcv.received()) >= 7 })
		got := rcv.received()[6]
		if jstr(got.event, "eventId") != jstr(ev, "eventId") || got.header.Get("Service-Retry-Reason") != "http_error" {
			t.Fatalf("after the new version %s %v", got.body, got.header)
		}
		eventually.True(t, "endpoint.resumed in the log", func() bool {
			l := deliveryLogEvents(t, s, e)
			return len(l) == 2 && l[1] == "endpoint.resumed"
		})
	})
}

// kit trigger: a signed test event of the kind asked for reaches the
// dev-install's endpoint, marked as a test, and is in the developer log;
// kit deliveries list shows it and kit deliveries redeliver sends it again.
func TestCLI_TriggerAndDeliveries(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "sandbox " + randHex(3), "sandbox": true})
	want(t, r, 201)
	sb := &Workspace{S: s, ID: r.Str("workspace.id")}
	sb.Owner = sb.user(t, "owner")
	sb.Dev, sb.DevID = sb.devToken(t, sb.Owner.ID)
	m := manifest(newSlug(), "0.1.0", baseScopes)
	setPath(m, "endpoints.events", "https://prod.example.com/kit/events")
	m["events"] = []any{"message.posted"}
	run := kit(t, s, sb.Dev, "dev-install", manifestFile(t, m), "--url", rcv.srv.URL, "--json")
	wantExit(t, run, 0)
	installed := cliJSON(t, run)
	secret, inst := jstr(installed, "signingSecret.signingSecret"), jstr(installed, "installationId")

	run = kit(t, s, sb.Dev, "trigger", "reaction.added")
	wantExit(t, run, 0)
	eventually.True(t, "the test event", func() bool { return len(rcv.received()) == 1 })
	got := rcv.received()[0]
	if got.event["test"] != true || jstr(got.event, "type") != "reaction.added" || jstr(got.event, "installationId") != inst ||
		jstr(got.event, "data.reaction.reaction") == "" {
		t.Fatalf("test event %s", got.body)
	}
	if err := kitverify.Verify(got.header.Get(kitverify.Header), got.body, time.Now(), secret); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.stdout, jstr(got.event, "eventId")) {
		t.Fatalf("kit trigger does not name the event%s", run)
	}
	eventually.True(t, "the attempt in the developer log", func() bool {
		logs := kit(t, s, sb.Dev, "logs", jstr(installed, "kitId"), "--source", "delivery")
		return strings.Contains(logs.stdout, "event.delivery status=delivered")
	})
	run = kit(t, s, sb.Dev, "deliveries", "list", inst)
	wantExit(t, run, 0)
	if !regexp.MustCompile(`(?m)^endpoint  healthy$`).MatchString(run.stdout) ||
		!regexp.MustCompile(`(?m)^1\s+succeeded\s+reaction\.added \(test\)\s+1\s+200 -\s+`+jstr(got.event, "eventId")+`$`).MatchString(run.stdout) {
		t.Fatalf("deliveries list%s", run)
	}
	run = kit(t, s, sb.Dev, "deliveries", "redeliver", inst, jstr(got.event, "eventId"))
	wantExit(t, run, 0)
	eventually.True(t, "the redelivered test event", func() bool { return len(rcv.received()) == 2 })
	if h := rcv.received()[1].header; h.Get("Service-Retry-Reason") != "redelivery" {
		t.Fatalf("redelivery headers %v", h)
	}
	// The route itself, as the OpenAPI conformance check sees it.
	r = s.api(t, sb.Dev, "POST", "/dev/kits/"+jstr(installed, "kitId")+"/test-events", map[string]any{"type": "message.posted"}, nil)
	want(t, r, 202)
	if r.Str("installationId") != inst || r.Get("sequence") != 2.0 {
		t.Fatalf("test event%s", r)
	}
	eventually.True(t, "the second test event", func() bool { return len(rcv.received()) == 3 })
	if ev := rcv.received()[2].event; jstr(ev, "data.message.text") == "" || ev["test"] != true {
		t.Fatalf("a message.posted test event carries %s", rcv.received()[2].body)
	}
	run = kit(t, s, sb.Dev, "trigger", "no.such")
	wantExit(t, run, 1)
	if !cliError("validation_error").MatchString(run.stderr) || strings.Contains(run.stderr, "no.such") {
		t.Fatalf("an unknown kind%s", run)
	}
}
