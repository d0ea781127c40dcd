package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kitd/kitd/http/tlscert/tlscerttest"
	"github.com/kitd/kitd/internal/eventually"
)

// README's promise: `make run` on a fresh data directory prints a demo
// workspace and copy-paste commands that work. This runs each printed curl
// command (parsed, sent with Go's HTTP client, so no curl is needed) and the
// kit CLI line against the server that printed them.
func TestDemoCommandsWork(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Args: []string{"--demo"}})
	var out string
	if !eventually.Holds(eventually.Within, func() bool {
		out = s.out.tail(64 << 10)
		return strings.Contains(out, "bin/kit kits show")
	}) {
		t.Fatalf("no demo commands printed%s", s.tail(4<<10))
	}
	// A curl command may continue on the next line after a backslash.
	joined := strings.ReplaceAll(out, "\\\n", " ")
	var curls []string
	for _, line := range strings.Split(joined, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "curl ") {
			curls = append(curls, line)
		}
	}
	if len(curls) != 3 {
		t.Fatalf("want 3 curl commands, found %d in:\n%s", len(curls), out)
	}
	header := regexp.MustCompile(`-H '([^:']+): ([^']*)'`)
	data := regexp.MustCompile(`-d '([^']*)'`)
	target := regexp.MustCompile(`'?(http://[^' ]+)'?\s*$`)
	for i, c := range curls {
		u := target.FindStringSubmatch(c)
		if u == nil {
			t.Fatalf("no URL in curl command %d", i+1)
		}
		method, body := "GET", ""
		if d := data.FindStringSubmatch(c); d != nil {
			method, body = "POST", d[1]
		}
		path, _, _ := strings.Cut(strings.TrimPrefix(u[1], s.URL), "?")
		t.Run(method+" "+path, func(t *testing.T) {
			req, err := http.NewRequest(method, u[1], strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range header.FindAllStringSubmatch(c, -1) {
				req.Header.Set(h[1], h[2])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode/100 != 2 {
				t.Fatalf("%s %s: status %d", method, u[1], res.StatusCode)
			}
		})
	}
	t.Run("the web app's address and the owner's sign-in work", func(t *testing.T) {
		app := regexp.MustCompile(`web app +(http://\S+)`).FindStringSubmatch(out)
		who := regexp.MustCompile(`sign in as +(\S+) / (\S+)`).FindStringSubmatch(out)
		if app == nil || who == nil {
			t.Fatalf("no web app address or sign-in in:\n%s", out)
		}
		if app[1] != s.URL+"/app/" {
			t.Fatalf("web app %q, want %s/app/", app[1], s.URL)
		}
		b, _ := openSignIn(t, s, "")
		signedInAs(t, s, sessionOf(t, b.signIn(t, who[1], who[2], "/app/"), "/app/"), "Demo Owner")
	})
	t.Run("the kit CLI line", func(t *testing.T) {
		m := regexp.MustCompile(`KIT_DEV_TOKEN=(\S+) KIT_API_URL=(\S+) bin/kit (.+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no kit CLI line in:\n%s", out)
		}
		cmd := exec.Command(kitCLI(t), strings.Fields(m[3])...)
		cmd.Env = append(cmd.Environ(), "KIT_DEV_TOKEN="+m[1], "KIT_API_URL="+m[2])
		got, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(got), "demo-kit") {
			t.Fatalf("kit %s: %v\n%s", m[3], err, got)
		}
	})
}

// The demo calls the node itself: over HTTPS with a certificate that no
// system root signed (self-signed, or a private CA's), it trusts the one
// the node serves. It failed with "certificate signed by unknown
// authority" and made no workspace.
func TestDemoOverHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pair := tlscerttest.New(t, "kitd-e2e-demo")
	pair.Write(t, certFile, keyFile)
	for _, line := range strings.Split(string(pair.KeyPEM), "\n") {
		if !strings.HasPrefix(line, "-----") {
			secrets.seen.add(line) // the output must never hold the key
		}
	}
	s := startServerOpts(t, ServerOpts{Args: []string{"--demo", "--tls-cert", certFile, "--tls-key", keyFile}})
	if !eventually.Holds(eventually.Within, func() bool {
		return strings.Contains(s.out.tail(64<<10), "bin/kit kits show") || strings.Contains(s.out.tail(64<<10), "demo workspace")
	}) || !strings.Contains(s.out.tail(64<<10), "Demo workspace created") {
		t.Fatalf("no demo workspace over HTTPS%s", s.tail(4<<10))
	}
}
