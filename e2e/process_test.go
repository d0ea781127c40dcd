package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// OPERATIONS.md section 1: GET /healthz answers 200 {"ok":true} without a token.
func TestProcess_Healthz(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	r := s.do(t, "GET", "/healthz", "", nil, nil)
	want(t, r, 200)
	m, _ := r.JSON.(map[string]any)
	if len(m) != 1 || m["ok"] != true {
		t.Fatalf(`want exactly {"ok":true}%s`, r)
	}
}

// OPERATIONS.md section 2: every operator call carries the operator token;
// any other credential gets 401 invalid_token (with WWW-Authenticate, as
// docs/api.md "Authentication" asks of every 401).
func TestProcess_OperatorAuth(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	cases := []struct {
		name  string
		token string
	}{
		{"missing operator token is rejected", ""},
		{"wrong operator token is rejected", "op_" + randToken()},
		{"operator token with one character changed is rejected", flipLast(s.OpToken)},
		{"bot token is not an operator token", env.In.Token},
		{"developer token is not an operator token", env.W.Dev},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, call := range []struct{ method, path string }{
				{"POST", "/ops/v1/workspaces"},
				{"POST", "/ops/v1/installations/" + env.In.ID + "/bot-tokens"},
				{"POST", "/ops/v1/clock/advance"},
			} {
				r := s.do(t, call.method, call.path, tc.token, map[string]any{"name": "nope", "seconds": 1}, nil)
				wantError(t, r, 401, "invalid_token")
				if h := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
					t.Errorf("401 without a WWW-Authenticate: Bearer header%s", r)
				}
			}
		})
	}
}

func flipLast(s string) string {
	if s == "" {
		return "x"
	}
	last := s[len(s)-1]
	if last == 'A' {
		return s[:len(s)-1] + "B"
	}
	return s[:len(s)-1] + "A"
}

// OPERATIONS.md section 2 "Test clock": POST /ops/v1/clock/advance {seconds}
// answers 200 {now} and moves the clock forward.
func TestProcess_TestClockAdvance(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	r := s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 1})
	want(t, r, 200)
	now1 := parseTime(t, "now", r.Str("now"))
	if d := time.Until(now1); d < -time.Minute {
		t.Errorf("now %v is behind the real time by %v (the test clock starts at the real time)", now1, -d)
	}
	r = s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 2})
	want(t, r, 200)
	now2 := parseTime(t, "now", r.Str("now"))
	if now2.Sub(now1) < 2*time.Second {
		t.Errorf("advancing 2 s moved now from %v to %v only", now1, now2)
	}

	t.Run("seconds must be a number", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": "zz-SENTINEL-zz"})
		wantValidation(t, r, "seconds", "zz-SENTINEL-zz")
	})
}

// OPERATIONS.md section 1: without --operator-token the server generates one
// on first start, writes it to <data>/operator-token with mode 0600 and
// reuses it afterwards. Also: without --test-clock the clock route answers
// 404, and SIGTERM stops the server cleanly (exit 0).
func TestProcess_GeneratedOperatorToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServerOpts(t, ServerOpts{DataDir: dir, NoOpToken: true, NoTestClock: true})

	path := filepath.Join(dir, "operator-token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no operator token file: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %o, want 600", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		t.Fatalf("generated operator token %q is too short to be a secret", token)
	}
	s.OpToken = token

	r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "first start"})
	want(t, r, 201)

	t.Run("clock advance is 404 without --test-clock", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 1})
		wantError(t, r, 404, "not_found")
	})

	s.stopClean(t)

	s2 := startServerOpts(t, ServerOpts{DataDir: dir, NoOpToken: true, NoTestClock: true})
	b2, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b2)) != token {
		t.Errorf("operator token changed on restart: %q -> %q", token, strings.TrimSpace(string(b2)))
	}
	s2.OpToken = token
	r = s2.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "second start"})
	want(t, r, 201)
	r = s2.do(t, "POST", "/ops/v1/workspaces", "op_"+randToken(), map[string]any{"name": "x"}, nil)
	wantError(t, r, 401, "invalid_token")
}

// An explicit --operator-token is the only operator credential.
func TestProcess_ExplicitOperatorToken(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "explicit"})
	want(t, r, 201)
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "operator-token")); err == nil && strings.TrimSpace(string(b)) != s.OpToken {
		r := s.do(t, "POST", "/ops/v1/workspaces", strings.TrimSpace(string(b)), map[string]any{"name": "x"}, nil)
		wantError(t, r, 401, "invalid_token")
	}
}

// OPERATIONS.md section 1: kitd stops cleanly on SIGTERM. A client that has
// opened a connection but not sent a request yet (HTTP clients pre-dial such
// connections all the time) must neither hold the stop up nor get an
// unsolicited answer on that connection.
func TestProcess_SIGTERMWithOpenConnection(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	want(t, s.do(t, "GET", "/healthz", "", nil, nil), 200)

	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(200 * time.Millisecond) // let the server accept it

	got := make(chan string, 1)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(40 * time.Second))
		b, _ := io.ReadAll(conn)
		got <- string(b)
	}()
	start := time.Now()
	if !s.stopClean(t) {
		return
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("SIGTERM took %v with an open connection that carried no request", d.Round(time.Millisecond))
	}
	select {
	case b := <-got:
		if b != "" {
			t.Errorf("the server wrote on a connection that carried no request: %q", clip(b, 300))
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the connection stayed open after the server exited")
	}
}
