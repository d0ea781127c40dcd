package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// screenshotDir is where the browser tests save their pages: a folder of
// this run under e2e/browser/screenshots (ignored by git), or
// $KIT_SCREENSHOTS.
func screenshotDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("KIT_SCREENSHOTS")
	if base == "" {
		base = filepath.Join("browser", "screenshots")
	}
	dir, err := filepath.Abs(filepath.Join(base, t.Name()+"-"+time.Now().UTC().Format("20060102-150405")+"-"+randHex(2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", dir)
	return dir
}

// signsIn adds a user of role who signs in with an email and password.
func signsIn(t *testing.T, w *Workspace, role string) (id, email, password string) {
	t.Helper()
	email, password = role+"-"+randHex(6)+"@example.com", role+" pw "+randHex(6)
	r := w.S.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/users", map[string]any{
		"displayName": "Browser " + role, "email": email, "role": role, "password": password,
	})
	want(t, r, 201)
	return r.Str("user.id"), email, password
}

// docs/decisions.md "Home and API access pages", in a real browser at a phone's width (e2e/browser/apiaccess.mjs):
// an admin signs in, makes a bot token (with the keyboard) and a webhook
// on the API access page, the test uses both, the admin revokes both on
// the page and the test sees 401 and 404; a member gets the 403 page; the
// admin uninstalls after the confirmation.
func TestBrowser_APIAccessPage(t *testing.T) {
	t.Parallel()
	node, script := browserScript(t, "apiaccess.mjs")
	s := sharedServer(t)
	w := newWorkspace(t, s)
	admin, adminEmail, adminPassword := signsIn(t, w, "admin")
	_, memberEmail, memberPassword := signsIn(t, w, "member")
	c := w.channel(t, "public", admin, w.Mem.ID)
	k := w.webhookKit(t, 2)
	in := w.install(t, k)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(),
		"ACCESS_URL="+s.URL+"/app/installations/"+in.ID, "HOME_URL="+s.URL+"/app/",
		"ADMIN_EMAIL="+adminEmail, "ADMIN_PASSWORD="+adminPassword,
		"MEMBER_EMAIL="+memberEmail, "MEMBER_PASSWORD="+memberPassword,
		"CHANNEL="+c.Name, "SHOTS="+screenshotDir(t),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil && !t.Failed() {
			t.Errorf("node apiaccess.mjs: %v\nstderr:\n%s", err, stderr.String())
		}
	}()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	type shot struct {
		File  string `json:"file"`
		Fits  bool   `json:"fits"`
		Title string `json:"title"`
	}
	var out struct {
		Step         string          `json:"step"`
		Token        string          `json:"token"`
		Tabs         int             `json:"tabs"`
		URL          string          `json:"url"`
		Page         string          `json:"page"`
		Home         string          `json:"home"`
		MemberStatus int             `json:"memberStatus"`
		MemberPage   string          `json:"memberPage"`
		GoneStatus   int             `json:"goneStatus"`
		Pages        map[string]shot `json:"pages"`
	}
	// next reads the script's next step, which must be name.
	next := func(name string) {
		t.Helper()
		if !lines.Scan() {
			cancel()
			t.Fatalf("the browser script ended before %s: %v\nstderr:\n%s", name, lines.Err(), stderr.String())
		}
		out.Step = ""
		if err := json.Unmarshal(lines.Bytes(), &out); err != nil || out.Step != name {
			cancel()
			t.Fatalf("step %q (%v), want %s: %s\nstderr:\n%s", out.Step, err, name, lines.Text(), stderr.String())
		}
	}
	goOn := func() {
		if _, err := io.WriteString(stdin, "next\n"); err != nil {
			t.Fatal(err)
		}
	}

	next("bot-token")
	token := out.Token
	secrets.seen.add(token) // the servers must never log it (e2e/secrets_log_test.go)
	a := s.api(t, token, "GET", "/auth/test", nil, nil)
	want(t, a, 200)
	if a.Str("tokenType") != "bot" || a.Str("installationId") != in.ID {
		t.Fatalf("the token the page showed%s", a)
	}
	t.Logf("the Create bot token button was reached with %d presses of Tab", out.Tabs)
	goOn()

	next("webhook")
	hookURL := out.URL
	prefix := s.URL + "/hooks/v1/" + in.ID + "/"
	if !strings.HasPrefix(hookURL, prefix) {
		t.Fatalf("webhook URL %q, want it under %s", hookURL, prefix)
	}
	hookPath := strings.TrimPrefix(hookURL, s.URL)
	secrets.seen.add(hookURL[strings.LastIndexByte(hookURL, '/')+1:])
	want(t, s.do(t, "POST", hookPath, "", map[string]any{"text": "posted through the page's webhook"}, nil), 200)
	goOn()

	next("revoked")
	wantError(t, s.api(t, token, "GET", "/auth/test", nil, nil), 401, "invalid_token")
	wantError(t, s.do(t, "POST", hookPath, "", map[string]any{"text": "after revocation"}, nil), 404, "not_found")
	want(t, s.api(t, in.Token, "GET", "/auth/test", nil, nil), 200) // the other token stays
	if strings.Contains(out.Page, token) || strings.Contains(out.Page, hookURL) {
		t.Fatal("the page shows a secret again after it was revoked")
	}
	goOn()

	next("done")
	for _, want := range []string{w.Name, "Kit " + k.Slug, "#" + c.Name, "Post messages into a channel through an incoming webhook", "API access of Kit " + k.Slug} {
		if !strings.Contains(out.Home, want) {
			t.Errorf("the home page lacks %q:\n%s", want, out.Home)
		}
	}
	if out.MemberStatus != 403 || !strings.Contains(out.MemberPage, "Only an admin or owner") {
		t.Errorf("a member opening the page: %d\n%s", out.MemberStatus, out.MemberPage)
	}
	if out.GoneStatus != 404 {
		t.Errorf("the page of the uninstalled Kit answered %d, want 404", out.GoneStatus)
	}
	wantError(t, s.api(t, in.Token, "GET", "/auth/test", nil, nil), 401, "invalid_token") // uninstalled
	for name, p := range out.Pages {
		if !p.Fits {
			t.Errorf("the %s page is wider than a phone: %s", name, p.File)
		}
		if fileMissing(p.File) {
			t.Errorf("no screenshot of the %s page", name)
		}
	}
	goOn()
}
