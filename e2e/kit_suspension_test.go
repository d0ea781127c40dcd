package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

// suspendKit calls the operator's suspend or resume of the Kit and checks
// the 200 {kit} it answers.
func suspendKit(t *testing.T, s *Server, kitID, action, state string) {
	t.Helper()
	r := s.ops(t, "POST", "/ops/v1/kits/"+kitID+"/"+action, nil)
	want(t, r, 200)
	if r.Str("kit.kitId") != kitID || r.Str("kit.state") != state {
		t.Fatalf("%s: want the Kit with state %s%s", action, state, r)
	}
}

// A suspended Kit (docs/api.md "Kit state"): its tokens, grants, installs
// and authorizations are refused, and its events wait, not attempted, and
// go out in order once it is resumed, which restores everything.
func TestKitSuspension(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	conv := e.convs[0]
	g := authorizeGrant(t, e.in, e.w.Mem.ID)
	// A second code, issued before the suspension and exchanged after it.
	cookie, _ := webSession(t, s, e.w.Mem.ID)
	verifier, challenge := pkce()
	code := approveCode(t, e.in, cookie, "user", challenge)
	// Another Kit's bot posts while the first is suspended: its events are
	// the first Kit's too.
	other := e.w.install(t, e.w.kit(t, baseScopes...), conv)
	e.in.post(t, conv, "before")
	eventually.True(t, "the event before the suspension", func() bool { return len(rcv.received()) == 1 })

	t.Run("unknown Kit: 404", func(t *testing.T) {
		want(t, s.ops(t, "POST", "/ops/v1/kits/0190a0a0-0000-7000-8000-000000000000/suspend", nil), 404)
	})
	suspendKit(t, s, e.kit.ID, "suspend", "suspended")
	suspendKit(t, s, e.kit.ID, "suspend", "suspended") // again: the same 200

	refused := func(t *testing.T, r *Resp, status int, code string) {
		t.Helper()
		want(t, r, status)
		if r.Str("code") != code {
			t.Fatalf("want code %s%s", code, r)
		}
	}
	t.Run("its bot and user tokens are refused", func(t *testing.T) {
		refused(t, e.in.api(t, "GET", "/conversations", nil), 403, "forbidden")
		refused(t, s.api(t, e.in.Token, "POST", "/messages", map[string]any{"conversationId": conv, "text": "x"}, nil), 403, "forbidden")
		refused(t, s.api(t, g.access(), "GET", "/conversations", nil, nil), 403, "forbidden")
		// The no-scope routes answer no 403 (SPEC.md 7).
		r := authTest(t, s, e.in.Token)
		refused(t, r, 401, "invalid_token")
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("401 without WWW-Authenticate%s", r)
		}
	})
	t.Run("code exchange and refresh are refused, and spend nothing", func(t *testing.T) {
		refused(t, refresh(t, e.in, g.Secret, g.refresh()), 403, "forbidden")
		refused(t, exchange(t, e.in, g.Secret, code, verifier), 403, "forbidden")
		// A wrong secret still learns nothing of the state.
		refused(t, refresh(t, e.in, "kcs_"+randToken()[:43], g.refresh()), 401, "invalid_credentials")
	})
	t.Run("no install, update or authorization", func(t *testing.T) {
		refused(t, s.ops(t, "POST", "/ops/v1/workspaces/"+e.w.ID+"/installations", map[string]any{"kitId": e.kit.ID}), 403, "forbidden")
		_, challenge := pkce()
		r := s.page(t, "GET", "/app/kits/authorize?"+authorizeQuery(e.in, "user", challenge, "st").Encode(), cookie, nil)
		want(t, r, 403)
	})
	t.Run("the developer API shows it suspended", func(t *testing.T) {
		r := s.api(t, e.w.Dev, "GET", "/dev/kits/"+e.kit.ID, nil, nil)
		want(t, r, 200)
		if r.Str("detail.kit.state") != "suspended" {
			t.Fatalf("want state suspended%s", r)
		}
	})
	t.Run("its events wait", func(t *testing.T) {
		for _, text := range []string{"held 1", "held 2", "held 3"} {
			other.post(t, conv, text)
		}
		eventually.True(t, "three events queued", func() bool {
			d := jarr(deliveries(t, s, e).JSON, "deliveries")
			return len(d) == 4 && jstr(d[0], "state") == "queued"
		})
		if n := len(rcv.received()); n != 1 {
			t.Fatalf("%d requests reached the suspended Kit", n-1)
		}
	})

	suspendKit(t, s, e.kit.ID, "resume", "active")
	suspendKit(t, s, e.kit.ID, "resume", "active")
	t.Run("resumed, everything works again", func(t *testing.T) {
		want(t, e.in.api(t, "GET", "/conversations", nil), 200)
		want(t, authTest(t, s, e.in.Token), 200)
		want(t, s.api(t, g.access(), "GET", "/conversations", nil, nil), 200)
		want(t, exchange(t, e.in, g.Secret, code, verifier), 200)
		want(t, refresh(t, e.in, g.Secret, g.refresh()), 200)
		eventually.True(t, "the held events", func() bool { return len(rcv.received()) == 4 })
		for i, text := range []string{"held 1", "held 2", "held 3"} {
			if got := jstr(rcv.received()[i+1].event, "data.message.text"); got != text {
				t.Fatalf("event %d after the resume is %q, want %q", i+1, got, text)
			}
		}
	})
	t.Run("its webhooks are refused, and post again once it is resumed", func(t *testing.T) {
		_, c, in := webhookEnv(t, s, 5)
		h := in.hook(t, c.ID)
		suspendKit(t, s, in.Kit.ID, "suspend", "suspended")
		refused(t, h.post(t, map[string]any{"text": "while suspended"}), 403, "forbidden")
		suspendKit(t, s, in.Kit.ID, "resume", "active")
		want(t, h.post(t, map[string]any{"text": "resumed"}), 200)
	})
	t.Run("a suspension of days neither attempts nor dead-letters", func(t *testing.T) {
		suspendKit(t, s, e.kit.ID, "suspend", "suspended")
		other.post(t, conv, "held long")
		eventually.True(t, "the event queued", func() bool {
			return jstr(deliveries(t, s, e).JSON, "deliveries.0.state") == "queued"
		})
		advance(t, s, 49*time.Hour)
		if st := jstr(deliveries(t, s, e).JSON, "deliveries.0.state"); st != "queued" || len(rcv.received()) != 4 {
			t.Fatalf("after 49 hours: %s, %d requests", st, len(rcv.received())-4)
		}
		suspendKit(t, s, e.kit.ID, "resume", "active")
		eventually.True(t, "the event after the resume", func() bool { return len(rcv.received()) == 5 })
		if got := jstr(rcv.received()[4].event, "data.message.text"); got != "held long" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("an event that failed before a suspension of days is retried after it, not dead-lettered", func(t *testing.T) {
		rcv.answerWith(func(int) (int, time.Duration, bool) { return 500, 0, false })
		other.post(t, conv, "failing")
		eventually.True(t, "the first failure", func() bool {
			return jstr(deliveries(t, s, e).JSON, "deliveries.0.state") == "retrying"
		})
		sent := len(rcv.received())
		suspendKit(t, s, e.kit.ID, "suspend", "suspended")
		advance(t, s, 49*time.Hour)
		suspendKit(t, s, e.kit.ID, "resume", "active")
		eventually.True(t, "the retry after the resume", func() bool { return len(rcv.received()) > sent })
		eventually.True(t, "the retry's failure recorded", func() bool {
			d := deliveries(t, s, e).JSON
			return jget(d, "deliveries.0.attempts") == 2.0 || jstr(d, "deliveries.0.state") == "dead"
		})
		if st := jstr(deliveries(t, s, e).JSON, "deliveries.0.state"); st != "retrying" {
			t.Fatalf("after its failure past the suspension the event is %s, want retrying: a new 24 hours", st)
		}
		rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
		advance(t, s, 25*time.Second) // past the second wait (20 s and at most 20%)
		eventually.True(t, "the event delivered", func() bool {
			return jstr(deliveries(t, s, e).JSON, "deliveries.0.state") == "succeeded"
		})
	})
}

// An event handed out before the suspension but not yet attempted is not
// attempted while the Kit is suspended: the chain that had taken it with
// the record of the attempt in flight at the suspension gives it back,
// and it goes out after the resume (docs/deliveries.md "A suspended
// Kit").
func TestKitSuspensionStopsTheChainOfAnAttemptInFlight(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	// The attempt held in flight ends by its release, not by a timeout: with
	// the contract's 3 s a loaded machine slower than that from its arrival
	// to the suspension saw it time out, never to be recorded succeeded.
	s, _ := deliveryServer(t, rcv, false, "", "--delivery-timeout", eventually.Within.String())
	e := newEventsSetup(t, s, rcv, 1)
	conv := e.convs[0]
	other := e.w.install(t, e.w.kit(t, baseScopes...), conv)
	arrived, release := make(chan struct{}), make(chan struct{})
	rcv.answerWith(func(n int) (int, time.Duration, bool) {
		if n == 1 {
			close(arrived)
			<-release // the attempt is in flight while the Kit is suspended
		}
		return 200, 0, false
	})
	other.post(t, conv, "in flight")
	select {
	case <-arrived:
	case <-time.After(eventually.Within):
		t.Fatal("the first event never reached the Kit")
	}
	other.post(t, conv, "behind it") // the same conversation: it waits for the first
	eventually.True(t, "the second event queued", func() bool {
		return len(jarr(deliveries(t, s, e).JSON, "deliveries")) == 2
	})
	suspendKit(t, s, e.kit.ID, "suspend", "suspended")
	close(release)
	eventually.True(t, "the attempt in flight recorded", func() bool {
		return jstr(deliveries(t, s, e).JSON, "deliveries.1.state") == "succeeded"
	})
	if eventually.Holds(time.Second, func() bool { return len(rcv.received()) > 1 }) {
		t.Fatalf("an event was attempted while the Kit was suspended: %q", jstr(rcv.received()[1].event, "data.message.text"))
	}
	suspendKit(t, s, e.kit.ID, "resume", "active")
	eventually.True(t, "the held event after the resume", func() bool { return len(rcv.received()) == 2 })
	if got := jstr(rcv.received()[1].event, "data.message.text"); got != "behind it" {
		t.Fatalf("after the resume: %q", got)
	}
	eventually.True(t, "both delivered", func() bool {
		d := deliveries(t, s, e).JSON
		return jstr(d, "deliveries.0.state") == "succeeded" && jstr(d, "deliveries.1.state") == "succeeded"
	})
}

// A suspended Kit refuses only what is aimed at it (docs/api.md "Kit
// state"): a slash command of another Kit of the workspace, installed
// after it, still reaches that Kit, and a command no Kit declares is
// still 404.
func TestASuspendedKitRefusesOnlyItsOwnCommands(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s := memberServer(t, rcv)
	first := newMemberKit(t, s, rcv, "", "/deploy")
	second := *first
	second.addKit(t, rcv.srv.URL+"/commands", "/other")
	suspendKit(t, s, first.kit.ID, "suspend", "suspended")
	for _, c := range []struct {
		rule    string
		command string
		status  int
		code    string
	}{
		{"the suspended Kit's command is 403", "/deploy", 403, "forbidden"},
		{"another Kit's command reaches it", "/other", 200, ""},
		{"a command no Kit declares is 404", "/nothing", 404, "not_found"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			r := second.command(t, c.command, "x")
			if c.code == "" {
				want(t, r, c.status)
				return
			}
			wantError(t, r, c.status, c.code)
		})
	}
}

// The install page of a suspended Kit's link answers 403, as the install
// it would ask for does (docs/api.md "Kit state"): an admin is not asked
// to consent to what is refused. Resumed, the link works again.
func TestASuspendedKitsInstallPageIsRefused(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	dev := newWorkspace(t, s)
	other := newWorkspace(t, s)
	k := dev.unlistedKit(t)
	link := newInstallLink(t, dev, k)
	admin, _ := webSession(t, s, other.Admin.ID)
	page := s.page(t, "GET", installPage(link), admin, nil)
	want(t, page, 200)
	suspendKit(t, s, k.ID, "suspend", "suspended")
	t.Run("the consent page is 403", func(t *testing.T) {
		r := s.page(t, "GET", installPage(link), admin, nil)
		want(t, r, 403)
		if strings.Contains(string(r.Body), ">Install</button>") {
			t.Fatalf("the 403 page offers an install%s", r)
		}
	})
	t.Run("the install is 403 and not logged", func(t *testing.T) {
		form := url.Values{"link": {link}, "csrf": {csrfOf(t, page)}, "version": {"1.0.0"}}
		want(t, s.page(t, "POST", "/app/kits/install", admin, form), 403)
		if got := logsOf(t, dev, k, "install_link.used"); len(got) != 0 {
			t.Fatalf("a refused install was logged: %v", got)
		}
	})
	suspendKit(t, s, k.ID, "resume", "active")
	want(t, installVia(t, s, admin, link), 200)
}

// A tool run queued before the suspension whose call still waits for one
// of its installation's slots when the suspension lands is not sent: it
// fails with errorCode kit_suspended (docs/deliveries.md "Tool calls and
// runs"), and nothing reaches the suspended Kit.
func TestKitSuspensionStopsAToolCallThatWaitsForItsSlot(t *testing.T) {
	t.Parallel()
	tk := newToolKit(t)
	// The 10 held calls and the 11th's wait for a slot end by the gate, not
	// by a deadline: with kitTimeout's 1.5 s, a loaded machine slower than
	// that from the first call to the suspension saw a held call time out
	// and the 11th take its slot and reach the Kit before the suspension.
	e := newToolsSetupOpts(t, tk, "off", eventually.Within)
	gate := make(chan struct{})
	tk.answerWith(func(call map[string]any) (int, string, time.Duration) {
		if jget(call, "arguments.hold") == true {
			<-gate // the installation's 10 slots stay taken
		}
		return 200, `{"result":null}`, 0
	})
	for range 10 {
		want(t, e.invoke(t, e.call(e.conv, "lookup", map[string]any{"hold": true})), 202)
	}
	eventually.True(t, "the 10 calls at the Kit", func() bool { return len(tk.calls()) == 10 })
	r := e.invoke(t, e.call(e.conv, "lookup", map[string]any{"hold": false}))
	want(t, r, 202)
	waiting := r.Str("run.id")
	eventually.True(t, "the 11th run started, waiting for a slot", func() bool {
		r := e.s.api(t, e.memToken, "GET", "/runs/"+waiting, nil, nil)
		return jstr(r.JSON, "run.status") == "running"
	})
	suspendKit(t, e.s, e.kit.ID, "suspend", "suspended")
	close(gate)
	// Its tokens refused, the Kit's developer log tells how the runs ended.
	var entries []any
	eventually.True(t, "the 11 runs' outcomes in the developer log", func() bool {
		r := e.s.api(t, e.w.Dev, "GET", "/dev/kits/"+e.kit.ID+"/logs?source=tool_call&limit=100", nil, nil)
		want(t, r, 200)
		entries = jarr(r.JSON, "entries")
		return len(entries) == 11
	})
	suspended := 0
	for _, en := range entries {
		if m, _ := en.(map[string]any); jstr(m, "status") == "failed" && jstr(m, "errorCode") == "kit_suspended" {
			suspended++
		}
	}
	if suspended != 1 {
		t.Fatalf("%d runs failed as kit_suspended, want the one that waited: %v", suspended, entries)
	}
	if n := len(tk.calls()); n != 10 {
		t.Fatalf("%d tool calls reached the Kit, want the 10 made before the suspension", n)
	}
	suspendKit(t, e.s, e.kit.ID, "resume", "active")
	if run := e.finished(t, waiting, e.memToken); jstr(run, "status") != "failed" || jstr(run, "errorCode") != "kit_suspended" {
		t.Fatalf("the run after the resume: %v", run)
	}
}

// kit deliveries list of a suspended Kit's installation says why its
// events wait (docs/api.md "Kit state"): the endpoint is healthy and
// nothing is attempted, so without the Kit's state the developer sees
// events queued for no reason. Resumed, the line is gone.
func TestCLI_DeliveriesListSaysTheKitIsSuspended(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	other := e.w.install(t, e.w.kit(t, baseScopes...), e.convs[0])
	suspendKit(t, s, e.kit.ID, "suspend", "suspended")
	other.post(t, e.convs[0], "held")
	eventually.True(t, "the event queued", func() bool {
		return jstr(deliveries(t, s, e).JSON, "deliveries.0.state") == "queued"
	})
	const line = "the Kit is suspended"
	if r := deliveries(t, s, e); r.Str("kitState") != "suspended" {
		t.Errorf("the deliveries page does not say the Kit is suspended%s", r)
	}
	run := kit(t, s, e.w.Dev, "deliveries", "list", e.in.ID)
	wantExit(t, run, 0)
	if !strings.Contains(run.stdout, line) {
		t.Errorf("kit deliveries list hides why the events wait%s", run)
	}
	suspendKit(t, s, e.kit.ID, "resume", "active")
	eventually.True(t, "the event after the resume", func() bool { return len(rcv.received()) == 1 })
	run = kit(t, s, e.w.Dev, "deliveries", "list", e.in.ID)
	wantExit(t, run, 0)
	if strings.Contains(run.stdout, line) {
		t.Errorf("kit deliveries list of a resumed Kit%s", run)
	}
}
