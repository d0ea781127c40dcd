package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
	"github.com/kitd/kitd/kitclient/dev"
)

// fakeAPI is a developer API answering canned bodies per "METHOD /path" and
// recording what it was asked.
type fakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	got    []request
}

type request struct {
	Method, Path, Query, Auth string
	Body                      map[string]any
}

func newFakeAPI(t *testing.T, routes map[string]http.HandlerFunc) *fakeAPI {
	f := &fakeAPI{routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			_ = json.Unmarshal(b, &rec.Body)
		}
		f.mu.Lock()
		f.got = append(f.got, rec)
		h := f.routes[r.Method+" "+rec.Path]
		f.mu.Unlock()
		if h == nil {
			answer(w, 404, `{"code":"not_found","message":"route not found","correlationId":"c-404"}`)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.got...)
}

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func fixed(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { answer(w, status, body) }
}

// runKit runs the command line in process with KIT_API_URL apiURL and the
// given token, and returns the exit status and output.
func runKit(t *testing.T, apiURL, token, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	vars := map[string]string{"KIT_API_URL": apiURL, "KIT_DEV_TOKEN": token}
	code = run(context.Background(), args, &env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] },
		http:   &http.Client{Timeout: 10 * time.Second},
	})
	return code, out.String(), errOut.String()
}

const (
	kitList      = `{"kits":[{"kitId":"11111111-2222-4333-8444-555555555555","slug":"my-kit","displayName":"Mine","distribution":"private","state":"active","createdAt":"T","latestVersion":"1.0.0","latestPublishedVersion":null,"installedHere":false}]}`
	kitID        = "11111111-2222-4333-8444-555555555555"
	upload       = `{"kitId":"` + kitID + `","created":true,"version":{"id":"v","version":"1.0.0","published":true,"publishedAt":"T","createdAt":"T","consentHash":"h","manifestHash":"m","distribution":"private"},"installationId":null}`
	invalid      = `{"valid":false,"problems":[{"path":"bot.colour","message":"unknown key"}],"warnings":[],"consent":null,"hosts":[],"unverifiedHosts":[],"diff":null,"existingKitId":null}`
	instID       = "99999999-2222-4333-8444-555555555555"
	deliveryPage = `{"deliveries":[{"eventId":"e3","sequence":3,"type":"message.posted","conversationId":null,"occurredAt":"T","state":"queued","attempts":0,"lastHttpStatus":null,"lastErrorCode":null,"nextAttemptAt":null,"finishedAt":null,"redelivery":false,"test":true},` +
		`{"eventId":"e2","sequence":2,"type":"message.posted","conversationId":"c","occurredAt":"T","state":"dead","attempts":14,"lastHttpStatus":500,"lastErrorCode":"http_error","nextAttemptAt":null,"finishedAt":"T","redelivery":false,"test":false}],` +
		`"nextCursor":"c2","endpoint":{"state":"paused","failingSince":"2026-11-22T10:00:00Z","pausedAt":"2026-11-23T10:00:00Z"},"waitingInOutbox":false}`
	meAnswer = `{"workspaceId":"w","userId":"u","sandbox":false,"token":{"id":"t","name":"n","createdAt":"T","expiresAt":"E","lastUsedAt":null,"revokedAt":null}}`
)

// The command line: exit statuses, environment, flags and error output.
func TestRun(t *testing.T) {
	t.Parallel()
	manifestFile := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(manifestFile, []byte(`{"slug":"my-kit"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An address that answers nothing: a listener that hangs up at once,
	// kept open so that no other test's server can take its port (a
	// closed port was, once, on a busy machine).
	hangUp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangUp.Close() })
	go func() {
		for {
			c, err := hangUp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closedURL := "http://" + hangUp.Addr().String()

	tests := []struct {
		name   string
		routes map[string]http.HandlerFunc
		token  string // "" = no KIT_DEV_TOKEN
		base   string // KIT_API_URL after the fake's origin; "-" = no answer
		stdin  string
		args   []string
		code   int
		out    []string // fragments of stdout
		errOut []string // fragments of stderr
		check  func(t *testing.T, got []request)
	}{
		{name: "without KIT_DEV_TOKEN a command is a usage error", args: []string{"me"}, code: 2,
			errOut: []string{"kit: KIT_DEV_TOKEN is not set", "usage: kit me"},
			check: func(t *testing.T, got []request) {
				if len(got) != 0 {
					t.Errorf("no request may be sent without a token: %v", got)
				}
			}},
		{name: "a KIT_API_URL that is not http is a usage error", token: "kdev_x", base: "ftp", args: []string{"me"}, code: 2,
			errOut: []string{"KIT_API_URL must be an http or https URL"}},
		{name: "an origin as KIT_API_URL gets /api/v1 and the token as bearer", token: "kdev_x", base: "", routes: map[string]http.HandlerFunc{"GET /api/v1/dev/me": fixed(200, meAnswer)},
			args: []string{"me"}, code: 0, out: []string{"workspace  w"},
			check: func(t *testing.T, got []request) {
				if got[0].Auth != "Bearer kdev_x" {
					t.Errorf("Authorization %q", got[0].Auth)
				}
			}},
		{name: "a KIT_API_URL with a path is the API base as is", token: "kdev_x", base: "/gateway/v1/", routes: map[string]http.HandlerFunc{"GET /gateway/v1/dev/me": fixed(200, meAnswer)},
			args: []string{"me"}, code: 0},
		{name: "an unknown command is a usage error", args: []string{"deploy"}, code: 2, errOut: []string{`unknown command "deploy"`}},
		{name: "a group without its subcommand names them", args: []string{"domains"}, code: 2, errOut: []string{"domains needs one of: add, verify, remove"}},
		{name: "a missing argument is a usage error", token: "kdev_x", args: []string{"versions", "publish", "my-kit"}, code: 2,
			errOut: []string{"kit: missing VERSION", "usage: kit versions publish KIT VERSION"}},
		{name: "an extra argument is a usage error", token: "kdev_x", args: []string{"kits", "list", "more"}, code: 2, errOut: []string{`unexpected argument "more"`}},
		{name: "an unknown flag is a usage error", token: "kdev_x", args: []string{"kits", "list", "--colour"}, code: 2, errOut: []string{"flag provided but not defined: -colour"}},
		{name: "help of a command lists its flags", args: []string{"help", "domains", "add"}, code: 0, out: []string{"usage: kit domains add KIT DOMAIN [--method dns|well_known]", "-method string"}},
		{name: "-h of a command is its help", args: []string{"logs", "-h"}, code: 0, out: []string{"usage: kit logs KIT", "-follow"}},
		{name: "help explains KIT_API_URL", args: []string{"help"}, code: 0, out: []string{"KIT_API_URL", "http://127.0.0.1:8080/api/v1"}},
		{name: "help of a group lists its commands", args: []string{"help", "domains"}, code: 0, out: []string{"kit domains add KIT DOMAIN", "kit domains verify KIT DOMAIN", "kit domains remove KIT DOMAIN", "kit help domains COMMAND"}},
		{name: "help of a command of one word", args: []string{"help", "logs"}, code: 0, out: []string{"usage: kit logs KIT", "-follow"}},
		{name: "help of no command is a usage error", args: []string{"help", "deploy"}, code: 2, errOut: []string{`no help for "deploy"`}},
		{name: "help of a group's unknown command is a usage error", args: []string{"help", "domains", "list"}, code: 2, errOut: []string{`no help for "domains list"`}},
		{name: "--method other than dns or well_known is a usage error", token: "kdev_x", args: []string{"domains", "add", kitID, "example.com", "--method", "http"}, code: 2,
			errOut: []string{"--method must be dns or well_known"}},
		{name: "deliveries list prints the endpoint and a table of deliveries", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/installations/" + instID + "/deliveries": fixed(200, deliveryPage)},
			args:   []string{"deliveries", "list", instID, "--limit", "5"}, code: 0,
			out: []string{"endpoint  paused since 2026-11-23T10:00:00.000Z", "2    dead", "500 http_error", "message.posted (test)", "more: kit deliveries list " + instID + " --limit 5 --cursor c2"},
			check: func(t *testing.T, got []request) {
				if got[0].Query != "limit=5" {
					t.Errorf("query %q", got[0].Query)
				}
			}},
		{name: "deliveries list says when more events wait in the outbox", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/installations/" + instID + "/deliveries": fixed(200,
				`{"deliveries":[],"nextCursor":null,"endpoint":{"state":"failing","failingSince":"2026-11-22T10:00:00Z","pausedAt":null},"waitingInOutbox":true}`)},
			args: []string{"deliveries", "list", instID}, code: 0,
			out: []string{"more events wait in the outbox, past what the installation keeps queued: they are listed once taken", "no deliveries"}},
		{name: "deliveries list does not show an earlier failure's code as a success's", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/installations/" + instID + "/deliveries": fixed(200,
				`{"deliveries":[{"eventId":"e2","sequence":2,"type":"message.posted","conversationId":"c","occurredAt":"T","state":"succeeded","attempts":3,"lastHttpStatus":200,"lastErrorCode":"missing_scope","nextAttemptAt":null,"finishedAt":"T","redelivery":false,"test":false}],"nextCursor":null,"endpoint":{"state":"healthy","failingSince":null,"pausedAt":null},"waitingInOutbox":false,"kitState":"active"}`)},
			args: []string{"deliveries", "list", instID}, code: 0,
			out: []string{"200, earlier missing_scope"}},
		{name: "deliveries list says when the Kit is suspended", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/installations/" + instID + "/deliveries": fixed(200,
				`{"deliveries":[],"nextCursor":null,"endpoint":{"state":"healthy","failingSince":null,"pausedAt":null},"waitingInOutbox":false,"kitState":"suspended"}`)},
			args: []string{"deliveries", "list", instID}, code: 0,
			out: []string{"endpoint  healthy\nthe Kit is suspended by the operator: its events wait, not attempted, and go out in order once it is resumed\n"}},
		{name: "deliveries redeliver EVENT_ID sends the event id", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/installations/" + instID + "/deliveries/redeliver": fixed(202, `{"redelivered":1,"sequences":[2],"more":false}`)},
			args:   []string{"deliveries", "redeliver", instID, kitID}, code: 0, out: []string{"1 event queued again"},
			check: func(t *testing.T, got []request) {
				if got[0].Body["eventId"] != kitID || len(got[0].Body) != 1 {
					t.Errorf("body %v", got[0].Body)
				}
			}},
		{name: "deliveries redeliver says when more dead letters remain", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/installations/" + instID + "/deliveries/redeliver": fixed(202, `{"redelivered":2,"sequences":[2,3],"more":true}`)},
			args:   []string{"deliveries", "redeliver", instID, "--dead-since", "2026-11-22T00:00:00Z"}, code: 0,
			out: []string{"2 events queued again", "more dead letters remain past what the queue has room for: run it again once these went"}},
		{name: "deliveries redeliver --dead-since sends the time", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/installations/" + instID + "/deliveries/redeliver": fixed(202, `{"redelivered":3,"sequences":[2,3,4],"more":false}`)},
			args:   []string{"deliveries", "redeliver", instID, "--dead-since", "2026-11-23T00:00:00Z"}, code: 0, out: []string{"3 events queued again"},
			check: func(t *testing.T, got []request) {
				if got[0].Body["deadSince"] != "2026-11-23T00:00:00Z" || len(got[0].Body) != 1 {
					t.Errorf("body %v", got[0].Body)
				}
			}},
		{name: "deliveries redeliver needs EVENT_ID or --dead-since", token: "kdev_x", args: []string{"deliveries", "redeliver", instID}, code: 2,
			errOut: []string{"give EVENT_ID or --dead-since", "usage: kit deliveries redeliver INSTALLATION [EVENT_ID] [--dead-since TIME]"}},
		{name: "deliveries redeliver takes EVENT_ID or --dead-since, not both", token: "kdev_x",
			args: []string{"deliveries", "redeliver", instID, kitID, "--dead-since", "24h"}, code: 2, errOut: []string{"give EVENT_ID or --dead-since"}},
		{name: "deliveries redeliver --dead-since must be a time or a duration", token: "kdev_x",
			args: []string{"deliveries", "redeliver", instID, "--dead-since", "yesterday"}, code: 2, errOut: []string{"--dead-since must be an RFC 3339 time or a duration"}},
		{name: "trigger sends the type to the workspace's only Kit", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": fixed(200, kitList),
				"POST /api/v1/dev/kits/" + kitID + "/test-events": fixed(202, `{"eventId":"e1","sequence":7,"type":"message.posted","installationId":"`+instID+`"}`)},
			args: []string{"trigger", "message.posted"}, code: 0, out: []string{"test event e1 (message.posted, sequence 7) queued for installation " + instID},
			check: func(t *testing.T, got []request) {
				if got[1].Body["type"] != "message.posted" {
					t.Errorf("body %v", got[1].Body)
				}
			}},
		{name: "trigger without --kit in a workspace of several Kits is a usage error", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": fixed(200, `{"kits":[]}`)},
			args:   []string{"trigger", "message.posted"}, code: 2, errOut: []string{"--kit is required: the workspace has 0 Kits"}},
		{name: "dev-install without --url is a usage error", token: "kdev_x", args: []string{"dev-install", manifestFile}, code: 2, errOut: []string{"--url is required"}},
		{name: "flags may follow the arguments: upload FILE --publish publishes", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/kits/versions": fixed(201, upload)},
			args:   []string{"versions", "upload", manifestFile, "--publish"}, code: 0, out: []string{"uploaded and published version 1.0.0"},
			check: func(t *testing.T, got []request) {
				if got[0].Body["publish"] != true || got[0].Body["manifest"] != `{"slug":"my-kit"}` {
					t.Errorf("upload body %v", got[0].Body)
				}
			}},
		{name: "FILE - reads the manifest from standard input", token: "kdev_x", stdin: `{"from":"stdin"}`,
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/kits/versions": fixed(201, upload)},
			args:   []string{"versions", "upload", "-"}, code: 0,
			check: func(t *testing.T, got []request) {
				if got[0].Body["manifest"] != `{"from":"stdin"}` || got[0].Body["publish"] != false {
					t.Errorf("upload body %v", got[0].Body)
				}
			}},
		{name: "a manifest file that cannot be read is exit 1", token: "kdev_x", args: []string{"manifest", "validate", manifestFile + ".missing"}, code: 1,
			errOut: []string{"kit: read manifest:", "no such file"}},
		{name: "an invalid manifest prints the problems and exits 1", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/kits/validate": fixed(200, invalid)},
			args:   []string{"manifest", "validate", manifestFile}, code: 1, out: []string{"invalid: 1 problem", "bot.colour  unknown key"}},
		{name: "--json prints the answer for scripts", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/kits/validate": fixed(200, invalid)},
			args:   []string{"manifest", "validate", "--json", manifestFile}, code: 1, out: []string{`"valid": false`, `"path": "bot.colour"`, `"diff": null`}},
		{name: "an error answer prints message, code and correlation id, exit 1", token: "kdev_x",
			args: []string{"kits", "show", kitID}, code: 1, errOut: []string{"kit: route not found (not_found, correlation id c-404)\n"}},
		{name: "a 429 prints the Retry-After seconds", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "17")
				answer(w, 429, `{"code":"rate_limited","message":"too many requests","correlationId":"c-9"}`)
			}},
			args: []string{"kits", "list"}, code: 1, errOut: []string{"kit: too many requests (rate_limited, correlation id c-9); retry after 17 s"}},
		{name: "an answer without an error body names the HTTP status", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(502)
				_, _ = io.WriteString(w, "<html>bad gateway</html>")
			}},
			args: []string{"kits", "list"}, code: 1, errOut: []string{"kit: server answered HTTP 502 Bad Gateway without an error body"}},
		{name: "no answer says the API cannot be reached, exit 1", token: "kdev_x", base: "-", args: []string{"kits", "list"}, code: 1,
			errOut: []string{"kit: cannot reach the Kit API at " + closedURL + "/api/v1"}},
		{name: "a slug is looked up among the workspace's Kits", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": fixed(200, kitList), "POST /api/v1/dev/kits/" + kitID + "/versions/1.0.0/publish": fixed(200, upload)},
			args:   []string{"versions", "publish", "my-kit", "1.0.0"}, code: 0, out: []string{"published version 1.0.0"}},
		{name: "an unknown slug is exit 1 naming it", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits": fixed(200, kitList)},
			args:   []string{"kits", "show", "other-kit"}, code: 1, errOut: []string{`no Kit of this workspace has the id or slug "other-kit"`}},
		{name: "a domain is escaped into the path; remove prints what it removed", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"DELETE /api/v1/dev/kits/" + kitID + "/domains/a%2Fb.example": fixed(200, `{"ok":true}`)},
			args:   []string{"domains", "remove", kitID, "a/b.example"}, code: 0, out: []string{"removed a/b.example"}},
		{name: "domains add sends the method and prints the proof", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"POST /api/v1/dev/kits/" + kitID + "/domains": fixed(201,
				`{"domain":{"domain":"example.com","method":"dns","verified":false,"verifiedAt":null,"challenge":"CH","proof":{"dns":{"type":"TXT","host":"_kit-challenge.example.com","value":"kit-verification=CH"},"wellKnown":{"url":"u","body":{"kitId":"k","token":"CH"}}}}}`)},
			args: []string{"domains", "add", kitID, "example.com", "--method=dns"}, code: 0, out: []string{"added example.com (method dns)", "value  kit-verification=CH"},
			check: func(t *testing.T, got []request) {
				if got[0].Body["domain"] != "example.com" || got[0].Body["method"] != "dns" {
					t.Errorf("add body %v", got[0].Body)
				}
			}},
		{name: "logs passes its filters and prints oldest first", token: "kdev_x",
			routes: map[string]http.HandlerFunc{"GET /api/v1/dev/kits/" + kitID + "/logs": fixed(200,
				`{"entries":[{"id":"2","at":"2025-01-01T00:00:02Z","source":"audit","level":"info","event":"second"},{"id":"1","at":"2025-01-01T00:00:01Z","source":"audit","level":"info","event":"first"}],"nextCursor":null,"sources":[]}`)},
			args: []string{"logs", kitID, "--source", "audit", "--level", "info", "--limit", "2"}, code: 0, out: []string{"first\n2025-01-01T00:00:02.000Z  audit      info   second\n"},
			check: func(t *testing.T, got []request) {
				if got[0].Query != "level=info&limit=2&source=audit" {
					t.Errorf("logs query %q", got[0].Query)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.routes)
			base := f.srv.URL + tt.base
			switch tt.base {
			case "-":
				base = closedURL
			case "ftp":
				base = "ftp://example.com"
			}
			code, out, errOut := runKit(t, base, tt.token, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			for _, s := range tt.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.errOut {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if tt.check != nil {
				tt.check(t, f.requests())
			}
		})
	}
}

// fakeLog is a developer log served newest first with cursors, as the
// server does; entries are added while a follower polls it.
type fakeLog struct {
	mu      sync.Mutex
	entries []dev.LogEntry // oldest first
	fail    int            // the next this many polls answer 503
}

func (l *fakeLog) add(events ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range events {
		n := len(l.entries) + 1
		l.entries = append(l.entries, dev.LogEntry{ID: fmt.Sprintf("e%05d", n), At: "t", Source: "audit", Level: "info", Event: ev})
	}
}

func (l *fakeLog) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail > 0 {
		l.fail--
		answer(w, 503, `{"code":"internal_error","message":"busy","correlationId":"c"}`)
		return
	}
	limit := 50
	_, _ = fmt.Sscan(r.URL.Query().Get("limit"), &limit)
	cursor := r.URL.Query().Get("cursor")
	var page dev.LogPage
	for i := len(l.entries) - 1; i >= 0 && len(page.Entries) <= limit; i-- {
		if cursor != "" && l.entries[i].ID >= cursor {
			continue
		}
		page.Entries = append(page.Entries, l.entries[i])
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.NextCursor = &page.Entries[limit-1].ID
	}
	b, _ := json.Marshal(page)
	answer(w, 200, string(b))
}

// events is the event names of the printed log lines, in order.
func events(out string) []string {
	var evs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) >= 4 {
			evs = append(evs, f[3])
		}
	}
	return evs
}

// `kit logs --follow`: every entry once, oldest first, until interrupted.
func TestFollow(t *testing.T) {
	t.Parallel()
	seq := func(prefix string, from, to int) []string {
		var s []string
		for i := from; i <= to; i++ {
			s = append(s, fmt.Sprintf("%s%d", prefix, i))
		}
		return s
	}
	tests := []struct {
		name    string
		before  []string // in the log before following
		limit   int      // --limit
		fail    int      // polls that fail (503) before the new entries are read
		later   []string // added after the first page was printed
		want    []string
		wantErr string // stderr fragment
	}{
		{name: "the first page is the newest --limit entries, oldest first", before: seq("old", 1, 5), limit: 3,
			want: []string{"old3", "old4", "old5"}},
		{name: "new entries are printed once, oldest first", before: []string{"a", "b"}, later: []string{"c", "d"},
			want: []string{"a", "b", "c", "d"}},
		{name: "more new entries than a page are all printed, in order", before: []string{"a"}, later: seq("n", 1, 250),
			want: append([]string{"a"}, seq("n", 1, 250)...)},
		{name: "a failing poll is reported and following goes on", before: []string{"a"}, fail: 2, later: []string{"b"},
			want: []string{"a", "b"}, wantErr: "busy (internal_error, correlation id c) (still following)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log := &fakeLog{}
			log.add(tt.before...)
			f := newFakeAPI(t, map[string]http.HandlerFunc{"GET /api/v1/dev/kits/" + kitID + "/logs": log.serve})
			var out, errOut logbuf.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			args := []string{"logs", kitID, "--follow", "--interval", "5ms"}
			if tt.limit > 0 {
				args = append(args, "--limit", fmt.Sprint(tt.limit))
			}
			go func() {
				done <- run(ctx, args, &env{stdout: &out, stderr: &errOut, http: &http.Client{Timeout: 10 * time.Second},
					getenv: func(k string) string {
						return map[string]string{"KIT_API_URL": f.srv.URL, "KIT_DEV_TOKEN": "kdev_x"}[k]
					}})
			}()
			first := tt.before
			if tt.limit > 0 && tt.limit < len(first) {
				first = first[len(first)-tt.limit:]
			}
			eventually.True(t, "the first polls printed", func() bool { return len(events(out.String())) == len(first) })
			log.mu.Lock()
			log.fail = tt.fail
			log.mu.Unlock()
			log.add(tt.later...)
			eventually.True(t, "every event printed", func() bool { return len(events(out.String())) >= len(tt.want) })
			time.Sleep(30 * time.Millisecond) // a few more polls must add nothing
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("an interrupted follow exits %d, want 0; stderr:\n%s", code, errOut.String())
			}
			if got := events(out.String()); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("printed %v\nwant    %v", got, tt.want)
			}
			if tt.wantErr != "" && !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, errOut.String())
			}
		})
	}

	t.Run("an error that a later poll would see too ends the follow", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, nil) // every logs call is 404
		code, _, errOut := runKit(t, f.srv.URL, "kdev_x", "", "logs", kitID, "--follow", "--interval", "5ms")
		if code != 1 || !strings.Contains(errOut, "(not_found, correlation id c-404)") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}
