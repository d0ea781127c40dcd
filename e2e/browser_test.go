package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumPath is Debian's chromium, installed by .ci/run.
const chromiumPath = "/usr/bin/chromium"

// TestBrowser_AuthorizeFlow drives a real browser through the authorize
// flow (e2e/browser/authorize.mjs with playwright-core): sign in with email
// and password, see the consent page, approve, land on the Kit's redirect
// target (a local HTTPS server) with code and state; then the Kit's backend
// exchanges the code. It needs chromium, node and e2e/browser/node_modules,
// which .ci/run installs; elsewhere it is skipped (under CI it fails).
func TestBrowser_AuthorizeFlow(t *testing.T) {
	t.Parallel()
	node, script := browserScript(t, "authorize.mjs")

	// The Kit's redirect target.
	landed := make(chan url.Values, 1)
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		select {
		case landed <- r.URL.Query():
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>Kit callback</title><p>Kit callback reached.</p>")
	}))
	// The browser's first handshake fails on the test certificate before
	// ignoreHTTPSErrors lets it through; that is no news.
	target.Config.ErrorLog = log.New(io.Discard, "", 0)
	target.StartTLS()
	defer target.Close()
	redirectURL := target.URL + "/callback"

	s := sharedServer(t)
	w := newWorkspace(t, s)
	email, password := "browser-"+randHex(6)+"@example.com", "browser pw "+randHex(6)
	r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/users", map[string]any{
		"displayName": "Browser Member", "email": email, "role": "member", "password": password,
	})
	want(t, r, 201)
	userID := r.Str("user.id")
	k := w.kit(t, "users:read")
	m := withOAuth(k.Manifest, "1.0.1", []string{"users:read"})
	m["oauth"] = map[string]any{"redirectUrls": []string{redirectURL}, "userScopes": []string{"users:read"}}
	want(t, w.uploadVersion(t, m, true), 201)
	in := w.install(t, k)
	r = s.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/client-secret", nil)
	want(t, r, 201)
	secret := r.Str("clientSecret")

	verifier, challenge := pkce()
	state := "st-" + randHex(8)
	q := url.Values{
		"workspace": {w.ID}, "kit": {k.Slug}, "token_type": {"user"}, "redirect_uri": {redirectURL},
		"state": {state}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(),
		"AUTHORIZE_URL="+s.URL+"/app/kits/authorize?"+q.Encode(),
		"REDIRECT_URL="+redirectURL, "EMAIL="+email, "PASSWORD="+password,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node authorize.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		SigninURL string `json:"signinURL"`
		Consent   string `json:"consent"`
		URL       string `json:"url"`
		Landed    string `json:"landed"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("browser output: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	if !strings.Contains(out.SigninURL, "/app/signin") {
		t.Errorf("without a session the browser should be at sign-in, was at %q", out.SigninURL)
	}
	for _, want := range []string{"Kit " + k.Slug, w.Name, "See the people of the workspace", "Browser Member"} {
		if !strings.Contains(out.Consent, want) {
			t.Errorf("the consent page lacks %q:\n%s", want, out.Consent)
		}
	}
	if !strings.Contains(out.Landed, "Kit callback reached") {
		t.Errorf("the browser did not land on the redirect target: %q", out.Landed)
	}
	var got url.Values
	select {
	case got = <-landed:
	default:
		t.Fatalf("the redirect target was never reached (browser at %s)", out.URL)
	}
	if got.Get("state") != state || !strings.HasPrefix(got.Get("code"), "kcode_") {
		t.Fatalf("redirect query %v, want code and state %q", got, state)
	}

	r = s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
		"grantType": "authorization_code", "clientId": k.ID, "clientSecret": secret,
		"code": got.Get("code"), "redirectUri": redirectURL, "codeVerifier": verifier,
	}, nil)
	want(t, r, 200)
	a := s.api(t, r.Str("accessToken"), "GET", "/auth/test", nil, nil)
	want(t, a, 200)
	if a.Str("tokenType") != "user" || a.Str("userId") != userID || a.Str("installationId") != in.ID {
		t.Errorf("the browser-authorized token%s", a)
	}
}

// browserScript returns node and the absolute path of the script name in
// e2e/browser. Without node, chromium or playwright-core the test is
// skipped (under CI it fails).
func browserScript(t *testing.T, name string) (node, script string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("browser", name))
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	node, err = exec.LookPath("node")
	switch {
	case err != nil:
		missing = "node"
	case fileMissing(chromiumPath):
		missing = chromiumPath
	case fileMissing(filepath.Join(filepath.Dir(script), "node_modules", "playwright-core")):
		missing = "e2e/browser/node_modules (npm ci in e2e/browser)"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the browser test needs %s; .ci/run installs it", missing)
		}
		t.Skipf("the browser test needs %s", missing)
	}
	return node, script
}

func fileMissing(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}
