package actors_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// toolManifest is manifestJSON with two tools: "lookup" (audience any) and
// "secret" (private), called at endpoints.tools.
func toolManifest(slug, version string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(manifestJSON(slug, version, chatScopes...)), &m); err != nil {
		panic(err)
	}
	tool := func(name, audience string) map[string]any {
		return map[string]any{
			"name": name, "displayName": map[string]any{"en": name}, "description": map[string]any{"en": "Tool " + name},
			"access": "read", "dataClass": "standard", "audience": audience,
		}
	}
	m["endpoints"] = map[string]any{"tools": "https://tools.example.com/call"}
	m["tools"] = []any{tool("lookup", actors.AudienceAny), tool("secret", actors.AudiencePrivate)}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// toolEnv is a workspace with the tool Kit installed, its bot in conv with
// members alice and bob; carol is a member of the workspace outside conv.
type toolEnv struct {
	ws                 string
	inst               *kitpb.Installation
	conv, botless      string
	alice, bob, carol  string
	otherWS, otherUser string
}

func (n *testNode) toolEnv(t *testing.T) *toolEnv {
	t.Helper()
	w := n.workspace(t, 3)
	e := &toolEnv{ws: w.id, alice: w.users[0], bob: w.users[1], carol: w.users[2]}
	e.conv = n.channel(t, w.id, e.alice, e.bob)
	e.botless = n.channel(t, w.id, e.alice, e.bob)
	v := n.mustUpload(t, w.id, toolManifest(newSlug(), "1.0.0"), true)
	e.inst = n.addChannel(t, n.install(t, w.id, v.Kit.Id, "").Id, e.conv)
	other := n.workspace(t, 1)
	e.otherWS, e.otherUser = other.id, other.users[0]
	return e
}

func (e *toolEnv) invoke(user, conv, tool string) *kitpb.InvokeTool {
	return &kitpb.InvokeTool{WorkspaceId: e.ws, UserId: user, ConversationId: conv, Tool: tool}
}

func TestInvokeToolRules(t *testing.T) {
	n := shared
	e := n.toolEnv(t)
	t.Run("a member of a channel the bot is in gets a queued run of the tool, with its endpoint", func(t *testing.T) {
		r := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, e.inst.Id, e.invoke(e.alice, e.conv, "secret"))
		run := r.Run
		if !ids.Valid(run.Id) || run.Status != actors.RunQueued || run.Tool != "secret" || run.Audience != actors.AudiencePrivate ||
			run.RequesterUserId != e.alice || run.ConversationId != e.conv || run.CreatedAt == 0 || run.CreatedAt > n.clk.Now().UnixNano() || run.FinishedAt != 0 {
			t.Fatalf("run %v", run)
		}
		if r.KitId != e.inst.KitId || r.Endpoint != "https://tools.example.com/call" {
			t.Fatalf("reply %v", r)
		}
		got := ask[*kitpb.RunReply](t, n, actors.KindInstallation, e.inst.Id, &kitpb.GetRun{RunId: run.Id, UserId: e.alice}).Run
		if got.Status != actors.RunQueued {
			t.Fatalf("stored run %v", got)
		}
	})
	for _, tc := range []struct {
		rule string
		m    *kitpb.InvokeTool
	}{
		{"a member of another workspace: the installation is not found",
			&kitpb.InvokeTool{WorkspaceId: e.otherWS, UserId: e.otherUser, ConversationId: e.conv, Tool: "lookup"}},
		{"a tool the installed version does not declare is not found", e.invoke(e.alice, e.conv, "missing")},
		{"a conversation the Kit bot is not in is not found", e.invoke(e.alice, e.botless, "lookup")},
		{"a conversation the member is not a member of is not found", e.invoke(e.carol, e.conv, "lookup")},
		{"a conversation of no one is not found", e.invoke(e.alice, ids.New(), "lookup")},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, e.inst.Id, tc.m)
			wantCode(t, err, kiterr.NotFound)
		})
	}
	t.Run("a member's calls spend their interactions bucket", func(t *testing.T) {
		dave := n.user(t, e.ws)
		ask[*kitpb.Ok](t, n, actors.KindConversation, e.conv, &kitpb.AddMember{UserId: dave, UserWorkspaceId: e.ws})
		for i := range limits.Spec()[limits.Interactions].Capacity {
			if _, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, e.inst.Id, e.invoke(dave, e.conv, "lookup")); err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		_, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, e.inst.Id, e.invoke(dave, e.conv, "lookup"))
		wantCode(t, err, kiterr.RateLimited)
		// Another member's bucket is their own.
		ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, e.inst.Id, e.invoke(e.bob, e.conv, "lookup"))
	})
	t.Run("an uninstalled installation is not found", func(t *testing.T) {
		ask[*kitpb.Ok](t, n, actors.KindInstallation, e.inst.Id, &kitpb.Uninstall{})
		_, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, e.inst.Id, e.invoke(e.alice, e.conv, "lookup"))
		wantCode(t, err, kiterr.NotFound)
	})
}

func TestRunStatusChanges(t *testing.T) {
	n := shared
	e := n.toolEnv(t)
	inst := e.inst.Id
	queue := func() string {
		return ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "lookup")).Run.Id
	}
	get := func(id string) *kitpb.Run {
		return ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: id, UserId: e.alice}).Run
	}
	start := func(id string) error {
		_, err := try[*kitpb.RunReply](n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: id})
		return err
	}
	logOf := func(id string) []*kitpb.DevLogEntry {
		entries, _, err := actors.ReadDevLog(n.env, e.inst.KitId, "", 100, func(le *kitpb.DevLogEntry) bool { return le.SubjectId == id })
		noErr(t, err)
		return entries
	}

	ok := queue()
	t.Run("a queued run starts: running", func(t *testing.T) {
		noErr(t, start(ok))
		if r := get(ok); r.Status != actors.RunRunning || r.FinishedAt != 0 {
			t.Fatalf("run %v", r)
		}
	})
	t.Run("a run already running does not start again", func(t *testing.T) {
		wantCode(t, start(ok), kiterr.Conflict)
	})
	t.Run("a 2xx answer makes it succeeded with its result, finished, logged with its status and duration", func(t *testing.T) {
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{
			RunId: ok, Succeeded: true, Result: []byte(`{"answer":42}`), HttpStatus: 200, DurationMs: 12,
		})
		r := get(ok)
		if r.Status != actors.RunSucceeded || string(r.Result) != `{"answer":42}` || r.FinishedAt < r.CreatedAt || r.ErrorCode != "" {
			t.Fatalf("run %v", r)
		}
		l := logOf(ok)
		if len(l) != 1 || l[0].Source != actors.LogSourceToolCall || l[0].Level != actors.LogLevelInfo || l[0].Status != actors.RunSucceeded ||
			l[0].GetHttpStatus() != 200 || l[0].GetDurationMs() != 12 || l[0].InstallationId != inst {
			t.Fatalf("log %v", l)
		}
	})
	t.Run("a second outcome changes nothing: the first final status stays", func(t *testing.T) {
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: ok, ErrorCode: "http_error", HttpStatus: 500})
		if r := get(ok); r.Status != actors.RunSucceeded || len(logOf(ok)) != 1 {
			t.Fatalf("run %v", r)
		}
	})
	t.Run("no 2xx makes it failed with the reason, logged at error", func(t *testing.T) {
		bad := queue()
		noErr(t, start(bad))
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: bad, ErrorCode: "http_timeout", DurationMs: 3000})
		r := get(bad)
		if r.Status != actors.RunFailed || r.ErrorCode != "http_timeout" || r.Result != nil || r.FinishedAt == 0 {
			t.Fatalf("run %v", r)
		}
		l := logOf(bad)
		if len(l) != 1 || l[0].Level != actors.LogLevelError || l[0].ErrorCode != "http_timeout" || l[0].HttpStatus != nil {
			t.Fatalf("log %v", l)
		}
	})
	t.Run("an outcome of a run that never started changes nothing", func(t *testing.T) {
		q := queue()
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: q, Succeeded: true, Result: []byte(`1`)})
		if r := get(q); r.Status != actors.RunQueued {
			t.Fatalf("run %v", r)
		}
	})
	t.Run("a run of no one is not found", func(t *testing.T) {
		wantCode(t, start(ids.New()), kiterr.NotFound)
	})
	// Last: these uninstall the installation.
	t.Run("a call in flight at an uninstall is still recorded: its outcome and log entry", func(t *testing.T) {
		inFlight, queued := queue(), queue()
		noErr(t, start(inFlight))
		ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.Uninstall{})
		// The Kit answered: the developer sees the call it did.
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: inFlight, Succeeded: true, Result: []byte(`1`), HttpStatus: 200})
		if l := logOf(inFlight); len(l) != 1 || l[0].Status != actors.RunSucceeded || l[0].GetHttpStatus() != 200 {
			t.Fatalf("log %v", l)
		}
		// No call goes to a Kit uninstalled before its run started.
		wantCode(t, start(queued), kiterr.NotFound)
	})
}

func TestRunVisibility(t *testing.T) {
	n := shared
	e := n.toolEnv(t)
	inst := e.inst.Id
	private := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "secret")).Run.Id
	anyRun := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "lookup")).Run.Id
	for _, tc := range []struct {
		rule    string
		run     string
		user    string
		visible bool
	}{
		{"the requester sees their private run", private, e.alice, true},
		{"another member of the conversation does not see a private run", private, e.bob, false},
		{"another member of the conversation sees a run of audience any", anyRun, e.bob, true},
		{"a member outside the conversation does not see a run of audience any", anyRun, e.carol, false},
		{"a run of no one is not found", ids.New(), e.alice, false},
		{"a run id that is no id is not found", "not-an-id", e.alice, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r, err := try[*kitpb.RunReply](n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: tc.run, UserId: tc.user})
			if !tc.visible {
				wantCode(t, err, kiterr.NotFound)
				return
			}
			noErr(t, err)
			if r.Run.Id != tc.run {
				t.Fatalf("run %v", r.Run)
			}
		})
	}
}

// A kill -9 leaves runs queued or running with nobody to report their
// outcome: the installation's next activation fails them as interrupted.
func TestRunsOpenAtARestartFailAsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := n.toolEnv(t)
	inst := e.inst.Id
	queue := func() string {
		return ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "lookup")).Run.Id
	}
	queued, running, done := queue(), queue(), queue()
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: running})
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: done})
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: done, Succeeded: true, Result: []byte(`"ok"`)})
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.stop() })
	get := func(id string) *kitpb.Run {
		return ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: id, UserId: e.alice}).Run
	}
	for _, tc := range []struct{ rule, run string }{
		{"a run left queued is failed as interrupted", queued},
		{"a run left running is failed as interrupted", running},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := get(tc.run)
			if r.Status != actors.RunFailed || r.ErrorCode != actors.RunInterrupted || r.FinishedAt == 0 {
				t.Fatalf("run %v", r)
			}
			entries, _, err := actors.ReadDevLog(n.env, e.inst.KitId, "", 10, func(le *kitpb.DevLogEntry) bool { return le.SubjectId == tc.run })
			noErr(t, err)
			if len(entries) != 1 || entries[0].ErrorCode != actors.RunInterrupted || entries[0].Source != actors.LogSourceToolCall {
				t.Fatalf("log %v", entries)
			}
		})
	}
	t.Run("a finished run stays as it was", func(t *testing.T) {
		if r := get(done); r.Status != actors.RunSucceeded || string(r.Result) != `"ok"` {
			t.Fatalf("run %v", r)
		}
	})
	t.Run("an interrupted run does not start, and a late outcome changes nothing", func(t *testing.T) {
		_, err := try[*kitpb.RunReply](n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: queued})
		wantCode(t, err, kiterr.Conflict)
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: running, Succeeded: true, Result: []byte(`1`)})
		if r := get(running); r.Status != actors.RunFailed {
			t.Fatalf("run %v", r)
		}
	})
}

// An installation with runs in flight does not passivate: its next
// activation would fail them as interrupted while their runner still
// works. Once their outcomes are in, it passivates as any actor.
func TestInstallationStaysActiveWhileRunsAreInFlight(t *testing.T) {
	n := ownNode(t)
	const idle = 100 * time.Millisecond
	n.env.IdleTimeout = idle
	e := n.toolEnv(t)
	inst := e.inst.Id
	id := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "lookup")).Run.Id
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: id})

	time.Sleep(4 * idle) // two idle checks, at least, with nothing asked
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: id, Succeeded: true, Result: []byte(`1`)})
	r := ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: id, UserId: e.alice}).Run
	if r.Status != actors.RunSucceeded {
		t.Fatalf("run %v: the installation passivated with the run in flight", r)
	}

	// A run whose runner never reports keeps it active for a minute only.
	lost := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, e.invoke(e.alice, e.conv, "lookup")).Run.Id
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: lost})
	n.clk.Advance(time.Minute)
	deadline := time.Now().Add(5 * time.Second) // idle checks, with slack on a loaded machine
	for {
		time.Sleep(idle)
		r := ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: lost, UserId: e.alice}).Run
		if r.Status == actors.RunFailed && r.ErrorCode == actors.RunInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %v: the installation stayed active for a run nobody reports", r)
		}
		time.Sleep(2 * idle) // nothing asked: the next idle checks may passivate it
	}
}
