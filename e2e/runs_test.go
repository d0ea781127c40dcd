package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/kitverify"
)

// toolKit is a Kit's endpoints on loopback (https, trusted through
// --delivery-ca): /tools answers each tool call as answer says, /events
// takes every event. It keeps every request.
type toolKit struct {
	srv    *httptest.Server
	caPath string
	answer atomic.Pointer[func(call map[string]any) (status int, body string, wait time.Duration)]

	mu  sync.Mutex
	got []delivered
}

func newToolKit(t *testing.T) *toolKit {
	t.Helper()
	k := &toolKit{}
	k.answerWith(func(map[string]any) (int, string, time.Duration) { return 200, `{"result":null}`, 0 })
	k.srv = httptest.NewTLSServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	k.caPath = filepath.Join(t.TempDir(), "toolkit-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	if err := os.WriteFile(k.caPath, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *toolKit) answerWith(f func(call map[string]any) (int, string, time.Duration)) {
	k.answer.Store(&f)
}

func (k *toolKit) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivered{header: req.Header.Clone(), body: body, at: time.Now()}
	_ = json.Unmarshal(body, &d.event)
	k.mu.Lock()
	k.got = append(k.got, d)
	k.mu.Unlock()
	if req.URL.Path != "/tools" {
		return
	}
	status, answer, wait := (*k.answer.Load())(d.event)
	slowly(req, wait) // the Kit's own slowness, part of what is tested
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// calls is every tool call received so far.
func (k *toolKit) calls() []delivered {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(k.got), func(d delivered) bool { return jstr(d.event, "type") != "tool_call" })
}

func (k *toolKit) all() []delivered {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

// toolsSetup is a workspace with a Kit of two tools, "lookup" (audience
// any) and "secret" (private), installed with its bot in conv (the owner,
// the admin and the member in it) and in botOnly (the owner alone); a
// signed-in session of the member; user tokens of the member and the admin
// with runs:read, and one of the member without it (another Kit).
type toolsSetup struct {
	s                     *Server
	opts                  ServerOpts // s's, to start it again
	w                     *Workspace
	kit                   *Kit
	in                    *Install
	conv, botOnly, noBot  string
	cookie, csrf          string
	memToken, adminToken  string
	noScopeToken, signing string
}

func newToolsSetup(t *testing.T, tk *toolKit) *toolsSetup {
	t.Helper()
	return newToolsSetupLimits(t, tk, "off")
}

// newToolsSetupLimits is newToolsSetup on a server of --limits limits.
func newToolsSetupLimits(t *testing.T, tk *toolKit, limits string) *toolsSetup {
	t.Helper()
	return newToolsSetupOpts(t, tk, limits, kitTimeout)
}

// newToolsSetupOpts is newToolsSetupLimits whose Kit has timeout (the
// server's --delivery-timeout) to answer a call.
func newToolsSetupOpts(t *testing.T, tk *toolKit, limits string, timeout time.Duration) *toolsSetup {
	t.Helper()
	opts := ServerOpts{DataDir: t.TempDir(), OpToken: "op_" + randToken(), Limits: limits, Args: []string{
		"--delivery-ca", tk.caPath, "--delivery-allow", strings.TrimPrefix(tk.srv.URL, "https://"),
		"--delivery-timeout", timeout.String(),
	}}
	s := startServerOpts(t, opts)
	e := &toolsSetup{s: s, opts: opts, w: newWorkspace(t, s)}
	w := e.w
	e.conv = w.channel(t, "public", w.Owner.ID, w.Admin.ID, w.Mem.ID).ID
	e.botOnly = w.channel(t, "public", w.Owner.ID).ID
	e.noBot = w.channel(t, "public", w.Owner.ID, w.Mem.ID).ID

	tool := func(name, audience string) map[string]any {
		return map[string]any{
			"name": name, "displayName": map[string]any{"en": name}, "description": map[string]any{"en": "Tool " + name},
			"access": "read", "dataClass": "standard", "audience": audience,
		}
	}
	e.kit = &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: baseScopes}
	m := manifest(e.kit.Slug, e.kit.Version, baseScopes)
	m["endpoints"] = map[string]any{"tools": tk.srv.URL + "/tools", "events": tk.srv.URL + "/events"}
	m["events"] = []string{"message.posted"}
	m["tools"] = []any{tool("lookup", "any"), tool("secret", "private")}
	m["oauth"] = map[string]any{"redirectUrls": []string{e2eRedirect}, "userScopes": append(slices.Clone(baseScopes), "runs:read")}
	e.kit.Manifest = m
	r := w.uploadVersion(t, m, true)
	want(t, r, 201)
	e.kit.ID = r.Str("kitId")
	r = s.ops(t, "POST", "/ops/v1/kits/"+e.kit.ID+"/signing-secret", nil)
	want(t, r, 201)
	e.signing = r.Str("signingSecret")
	e.in = w.install(t, e.kit, e.conv, e.botOnly)

	e.memToken = authorizeGrant(t, e.in, w.Mem.ID).access()
	e.adminToken = authorizeGrant(t, e.in, w.Admin.ID).access()
	other := w.install(t, w.kit(t, baseScopes...), e.conv)
	e.noScopeToken = authorizeGrant(t, other, w.Mem.ID).access()

	e.cookie, _ = webSession(t, s, w.Mem.ID)
	e.csrf = memberSession(t, s, e.cookie)
	return e
}

// invoke is the member's POST /app/api/tools/invoke.
func (e *toolsSetup) invoke(t *testing.T, body any) *Resp {
	t.Helper()
	return memberCall(t, e.s, "POST", "/app/api/tools/invoke", e.cookie, e.csrf, body)
}

func (e *toolsSetup) call(conv, tool string, args any) map[string]any {
	return map[string]any{"installationId": e.in.ID, "conversationId": conv, "tool": tool, "arguments": args}
}

// finished polls GET /runs/{id} with token until the run succeeded or
// failed, and returns it.
func (e *toolsSetup) finished(t *testing.T, id, token string) map[string]any {
	t.Helper()
	var run map[string]any
	eventually.True(t, "run "+id+" to finish", func() bool {
		r := e.s.api(t, token, "GET", "/runs/"+id, nil, nil)
		want(t, r, 200)
		run = jobj(r.JSON, "run")
		st := jstr(run, "status")
		return st == "succeeded" || st == "failed"
	})
	return run
}

// docs/deliveries.md "Tool calls and runs": a member's tool call is a run, queued when answered,
// then running while the Kit is called, then succeeded or failed.
func TestToolRuns(t *testing.T) {
	t.Parallel()
	tk := newToolKit(t)
	e := newToolsSetup(t, tk)
	s, w := e.s, e.w

	var private string // the member's succeeded private run
	t.Run("invoke answers 202 with the run queued; the Kit gets the signed tool_call; the run succeeds with its result", func(t *testing.T) {
		tk.answerWith(func(call map[string]any) (int, string, time.Duration) {
			return 200, `{"result": {"echo": ` + mustJSON(call["arguments"]) + `, "n": 7}, "ignored": true}`, 0
		})
		r := e.invoke(t, e.call(e.conv, "secret", map[string]any{"order": "A-1"}))
		want(t, r, 202)
		run := jobj(r.JSON, "run")
		private = jstr(run, "id")
		if !isUUID(private) || jstr(run, "status") != "queued" || jstr(run, "tool") != "secret" || jstr(run, "requesterUserId") != w.Mem.ID ||
			jstr(run, "conversationId") != e.conv || run["finishedAt"] != nil || run["result"] != nil || run["errorCode"] != nil {
			t.Fatalf("queued run%s", r)
		}
		got := e.finished(t, private, e.memToken)
		if jstr(got, "status") != "succeeded" || mustJSON(got["result"]) != `{"echo":{"order":"A-1"},"n":7}` || got["finishedAt"] == nil || got["errorCode"] != nil {
			t.Fatalf("finished run %v", got)
		}
		// kitclient reads the same run (its Run agrees with the server's).
		kc, _ := kitClient(t, s, e.memToken)
		kr, err := kc.Run(context.Background(), private)
		if err != nil || kr.ID != private || kr.Status != "succeeded" || kr.RequesterUserID != w.Mem.ID || kr.ConversationID != e.conv ||
			kr.Tool != "secret" || kr.FinishedAt == nil || kr.ErrorCode != nil || string(kr.Result) != `{"echo":{"order":"A-1"},"n":7}` {
			t.Fatalf("kitclient run %+v, %v", kr, err)
		}
		entry := toolLogEntry(t, e)
		if jstr(entry, "level") != "info" || jstr(entry, "status") != "succeeded" || entry["httpStatus"] != float64(200) || entry["errorCode"] != nil {
			t.Fatalf("log entry %v", entry)
		}
		if _, ok := entry["durationMs"].(float64); !ok {
			t.Fatalf("no durationMs: %v", entry)
		}
		calls := tk.calls()
		if len(calls) != 1 {
			t.Fatalf("%d tool calls, want 1", len(calls))
		}
		c := calls[0]
		if err := kitverify.Verify(c.header.Get(kitverify.Header), c.body, time.Now(), e.signing); err != nil {
			t.Fatalf("signature: %v", err)
		}
		if c.header.Get("Service-Installation-Id") != e.in.ID {
			t.Fatalf("Service-Installation-Id %q", c.header.Get("Service-Installation-Id"))
		}
		body := c.event
		if jstr(body, "runId") != private || jstr(body, "tool") != "secret" || mustJSON(body["arguments"]) != `{"order":"A-1"}` ||
			jstr(body, "userId") != w.Mem.ID || jstr(body, "conversationId") != e.conv || jstr(body, "installationId") != e.in.ID || len(body) != 7 {
			t.Fatalf("tool_call body %s", c.body)
		}
	})

	failures := []struct {
		rule, errorCode string
		httpStatus      float64
		status          int
		answer          string
		wait            time.Duration
	}{
		{"a 500 answer fails the run with http_error", "http_error", 500, 500, `{"result":1}`, 0},
		{"no answer within the timeout fails the run with http_timeout", "http_timeout", 0, 200, `{"result":1}`, tooLate},
		{"a 2xx answer without result fails the run with invalid_answer", "invalid_answer", 200, 200, `{"answer":1}`, 0},
		{"a 2xx answer that is no JSON object fails the run with invalid_answer", "invalid_answer", 200, 200, `[1]`, 0},
	}
	for _, tc := range failures {
		t.Run(tc.rule, func(t *testing.T) {
			tk.answerWith(func(map[string]any) (int, string, time.Duration) { return tc.status, tc.answer, tc.wait })
			r := e.invoke(t, e.call(e.conv, "lookup", map[string]any{}))
			want(t, r, 202)
			id := r.Str("run.id")
			got := e.finished(t, id, e.memToken)
			if jstr(got, "status") != "failed" || jstr(got, "errorCode") != tc.errorCode || got["result"] != nil || got["finishedAt"] == nil {
				t.Fatalf("run %v", got)
			}
			entry := toolLogEntry(t, e)
			if jstr(entry, "level") != "error" || jstr(entry, "status") != "failed" || jstr(entry, "errorCode") != tc.errorCode ||
				jstr(entry, "installationId") != e.in.ID {
				t.Fatalf("log entry %v", entry)
			}
			if hs, _ := entry["httpStatus"].(float64); hs != tc.httpStatus {
				t.Fatalf("httpStatus %v, want %v: %v", entry["httpStatus"], tc.httpStatus, entry)
			}
			if _, ok := entry["durationMs"].(float64); !ok {
				t.Fatalf("no durationMs: %v", entry)
			}
		})
	}
	tk.answerWith(func(map[string]any) (int, string, time.Duration) { return 200, `{"result":"ok"}`, 0 })

	anyRun := ""
	t.Run("a run of audience any is visible to another member of its conversation", func(t *testing.T) {
		r := e.invoke(t, e.call(e.conv, "lookup", map[string]any{}))
		want(t, r, 202)
		anyRun = r.Str("run.id")
		if got := e.finished(t, anyRun, e.adminToken); jstr(got, "requesterUserId") != w.Mem.ID {
			t.Fatalf("run %v", got)
		}
	})
	t.Run("another member's private run is 404, as an unknown one", func(t *testing.T) {
		wantError(t, s.api(t, e.adminToken, "GET", "/runs/"+private, nil, nil), 404, "not_found")
	})
	t.Run("an unknown run is 404", func(t *testing.T) {
		wantError(t, s.api(t, e.memToken, "GET", "/runs/"+newUUID(), nil, nil), 404, "not_found")
	})
	t.Run("a bot token gets 403 forbidden", func(t *testing.T) {
		wantError(t, s.api(t, e.in.Token, "GET", "/runs/"+private, nil, nil), 403, "forbidden")
	})
	t.Run("a user token without runs:read gets 403 missing_scope", func(t *testing.T) {
		r := s.api(t, e.noScopeToken, "GET", "/runs/"+private, nil, nil)
		wantError(t, r, 403, "missing_scope")
		if r.Header.Get("X-Service-Required-Scope") != "runs:read" {
			t.Fatalf("X-Service-Required-Scope%s", r)
		}
	})

	t.Run("a private result appears in no message history and no event", func(t *testing.T) {
		marker := "private-" + randHex(8)
		tk.answerWith(func(map[string]any) (int, string, time.Duration) { return 200, `{"result":"` + marker + `"}`, 0 })
		r := e.invoke(t, e.call(e.conv, "secret", map[string]any{}))
		want(t, r, 202)
		if got := e.finished(t, r.Str("run.id"), e.memToken); jstr(got, "result") != marker {
			t.Fatalf("run %v", got)
		}
		// An event posted after the run: once it arrived, any event the run
		// had caused would have too.
		e.in.post(t, e.conv, "after the run")
		eventually.True(t, "the event of the later post", func() bool {
			return slices.ContainsFunc(tk.all(), func(d delivered) bool { return bytes.Contains(d.body, []byte("after the run")) })
		})
		for _, d := range tk.all() {
			if jstr(d.event, "type") != "tool_call" && bytes.Contains(d.body, []byte(marker)) {
				t.Fatalf("an event carries the private result: %s", d.body)
			}
		}
		for _, token := range []string{e.memToken, e.adminToken, e.in.Token} {
			h := s.api(t, token, "GET", "/conversations/"+e.conv+"/messages?limit=200", nil, nil)
			want(t, h, 200)
			if bytes.Contains(h.Body, []byte(marker)) {
				t.Fatalf("the history carries the private result%s", h)
			}
		}
	})
}

// toolLogEntry is the newest developer log entry of source tool_call: the
// entry of the run that finished last (it commits with the run's final
// status; entries do not name their run).
func toolLogEntry(t *testing.T, e *toolsSetup) map[string]any {
	t.Helper()
	r := e.s.api(t, e.w.Dev, "GET", "/dev/kits/"+e.kit.ID+"/logs?source=tool_call&limit=1", nil, nil)
	want(t, r, 200)
	entries := jarr(r.JSON, "entries")
	if len(entries) != 1 {
		t.Fatalf("no tool_call entry%s", r)
	}
	entry, _ := entries[0].(map[string]any)
	if jstr(entry, "source") != "tool_call" || jstr(entry, "event") != "tool.call" {
		t.Fatalf("entry %v", entry)
	}
	return entry
}

// A kill -9 while a run's call is in flight leaves nobody to report its
// outcome: after the restart the run is failed as interrupted, logged.
func TestToolRunInterruptedByKill9(t *testing.T) {
	t.Parallel()
	tk := newToolKit(t)
	e := newToolsSetup(t, tk)
	tk.answerWith(func(map[string]any) (int, string, time.Duration) { return 200, `{"result":1}`, 2500 * time.Millisecond })
	r := e.invoke(t, e.call(e.conv, "lookup", map[string]any{}))
	want(t, r, 202)
	id := r.Str("run.id")
	eventually.True(t, "the tool call", func() bool { return len(tk.calls()) == 1 })
	e.s.kill()

	e.s = startServerOpts(t, e.opts)
	r = e.s.api(t, e.memToken, "GET", "/runs/"+id, nil, nil)
	want(t, r, 200)
	got := jobj(r.JSON, "run")
	if jstr(got, "status") != "failed" || jstr(got, "errorCode") != "interrupted" || got["finishedAt"] == nil || got["result"] != nil {
		t.Fatalf("run after the restart %v", got)
	}
	if entry := toolLogEntry(t, e); jstr(entry, "errorCode") != "interrupted" || jstr(entry, "level") != "error" {
		t.Fatalf("log entry %v", entry)
	}
}

// The refusals of POST /app/api/tools/invoke: none records a run.
func TestToolInvokeRefusals(t *testing.T) {
	t.Parallel()
	tk := newToolKit(t)
	e := newToolsSetup(t, tk)
	good := e.call(e.conv, "lookup", map[string]any{})
	with := func(k string, v any) map[string]any {
		m := e.call(e.conv, "lookup", map[string]any{})
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		rule      string
		cookie    string
		csrf      string
		body      map[string]any
		status    int
		code      string
		path      string // validation errors: the field path named
		sentinels []string
	}{
		{"without X-CSRF-Token: 403 csrf_rejected", e.cookie, "", good, 403, "csrf_rejected", "", nil},
		{"with another X-CSRF-Token: 403 csrf_rejected", e.cookie, "not-" + e.csrf, good, 403, "csrf_rejected", "", nil},
		{"without a session: 401 unauthenticated", "", e.csrf, good, 401, "unauthenticated", "", nil},
		{"an unknown tool: 404", e.cookie, e.csrf, with("tool", "nothing_here"), 404, "not_found", "", nil},
		{"an unknown installation: 404", e.cookie, e.csrf, with("installationId", newUUID()), 404, "not_found", "", nil},
		{"a conversation the member is not in: 404", e.cookie, e.csrf, with("conversationId", e.botOnly), 404, "not_found", "", nil},
		{"a conversation the Kit bot is not in: 404", e.cookie, e.csrf, with("conversationId", e.noBot), 404, "not_found", "", nil},
		{"arguments that are no object: 400 at arguments", e.cookie, e.csrf, with("arguments", []any{"sentinel-args"}), 400, "validation_error", "arguments", []string{"sentinel-args"}},
		{"arguments missing: 400 at arguments", e.cookie, e.csrf, with("arguments", nil), 400, "validation_error", "arguments", nil},
		{"installationId missing: 400 at installationId", e.cookie, e.csrf, with("installationId", nil), 400, "validation_error", "installationId", nil},
		{"installationId no UUID: 400 at installationId", e.cookie, e.csrf, with("installationId", "sentinel-inst"), 400, "validation_error", "installationId", []string{"sentinel-inst"}},
		{"conversationId missing: 400 at conversationId", e.cookie, e.csrf, with("conversationId", nil), 400, "validation_error", "conversationId", nil},
		{"tool missing: 400 at tool", e.cookie, e.csrf, with("tool", nil), 400, "validation_error", "tool", nil},
		{"tool of another type: 400 at tool", e.cookie, e.csrf, with("tool", 12345), 400, "validation_error", "tool", nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := memberCall(t, e.s, "POST", "/app/api/tools/invoke", tc.cookie, tc.csrf, tc.body)
			if tc.path != "" {
				wantValidation(t, r, tc.path, tc.sentinels...)
				return
			}
			wantError(t, r, tc.status, tc.code)
		})
	}
	t.Run("a key given twice in the arguments: 400 at arguments", func(t *testing.T) {
		// docs/decisions.md "Request bodies": at any depth. The arguments
		// go to the Kit as sent, whose parser would pick one.
		body := raw(`{"installationId":"` + e.in.ID + `","conversationId":"` + e.conv + `","tool":"lookup","arguments":{"a":"sentinel-1","a":"sentinel-2"}}`)
		wantValidation(t, e.invoke(t, body), "arguments", "sentinel-1", "sentinel-2")
	})
	t.Run("arguments that are not UTF-8: 400 at arguments", func(t *testing.T) {
		// The arguments go to the Kit as sent, and JSON text is UTF-8
		// (RFC 8259 8.1): a Kit's parser may refuse the whole call.
		body := raw("{\"installationId\":\"" + e.in.ID + "\",\"conversationId\":\"" + e.conv + "\",\"tool\":\"lookup\",\"arguments\":{\"a\":\"sentinel-\xff\"}}")
		wantValidation(t, e.invoke(t, body), "arguments", "sentinel-")
	})
	t.Run("an archived conversation: 409 conflict", func(t *testing.T) {
		c := e.w.channel(t, "public", e.w.Owner.ID, e.w.Mem.ID)
		want(t, e.s.ops(t, "POST", "/ops/v1/installations/"+e.in.ID+"/channels", map[string]any{"conversationId": c.ID}), 200)
		want(t, e.s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/archive", nil), 200)
		wantError(t, e.invoke(t, e.call(c.ID, "lookup", map[string]any{})), 409, "conflict")
	})
	t.Run("a member of another workspace: the installation is 404", func(t *testing.T) {
		other := newWorkspace(t, e.s)
		cookie, _ := webSession(t, e.s, other.Mem.ID)
		csrf := memberSession(t, e.s, cookie)
		wantError(t, memberCall(t, e.s, "POST", "/app/api/tools/invoke", cookie, csrf, good), 404, "not_found")
	})
	t.Run("none of them called the Kit: the next call is the first", func(t *testing.T) {
		r := e.invoke(t, good)
		want(t, r, 202)
		e.finished(t, r.Str("run.id"), e.memToken)
		if calls := tk.calls(); len(calls) != 1 || jstr(calls[0].event, "runId") != r.Str("run.id") {
			t.Fatalf("%d tool calls, want only the last run's", len(calls))
		}
	})
	// After the row above, which counts the Kit's calls.
	t.Run("arguments are passed on as sent: a number no float64 holds is no problem", func(t *testing.T) {
		body := raw(`{"installationId":"` + e.in.ID + `","conversationId":"` + e.conv + `","tool":"lookup","arguments":{"n":1e400}}`)
		r := e.invoke(t, body)
		want(t, r, 202)
		e.finished(t, r.Str("run.id"), e.memToken)
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
