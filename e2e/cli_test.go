package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/logbuf"
)

// The `kit` command-line tool (cmd/kit), run as a built binary against a real
// kitd: what a developer types and what they see.

// cliBin is the kit binary under test: KIT_CLI_BIN, or built once per test
// process. The built binary's directory is left in the temp dir: TestMain
// (harness_test.go) has no hook to remove it.
var cliBin struct {
	once sync.Once
	path string
	err  error
}

func kitCLI(t testing.TB) string {
	t.Helper()
	cliBin.once.Do(func() {
		if p := os.Getenv("KIT_CLI_BIN"); p != "" {
			cliBin.path, cliBin.err = filepath.Abs(p)
			return
		}
		root, err := moduleRoot()
		if err != nil {
			cliBin.err = err
			return
		}
		dir, err := os.MkdirTemp("", "kit-cli-e2e-")
		if err != nil {
			cliBin.err = err
			return
		}
		cliBin.path = filepath.Join(dir, "kit")
		cmd := exec.Command("go", "build", "-o", cliBin.path, "./cmd/kit")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			cliBin.err = fmt.Errorf("go build ./cmd/kit: %v\n%s", err, out)
		}
	})
	if cliBin.err != nil {
		t.Fatalf("kit binary: %v", cliBin.err)
	}
	return cliBin.path
}

// cliRun is one finished run of the kit binary.
type cliRun struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r *cliRun) String() string {
	return fmt.Sprintf("\n  kit %s\n  exit %d\n  stdout:\n%s\n  stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cliCommand prepares the kit binary with KIT_API_URL = {base_url} of s and
// KIT_DEV_TOKEN = token ("" leaves it unset).
func cliCommand(ctx context.Context, t testing.TB, apiURL, token string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, kitCLI(t), args...)
	cmd.Env = append(cleanEnv(), "KIT_API_URL="+apiURL)
	if token != "" {
		cmd.Env = append(cmd.Env, "KIT_DEV_TOKEN="+token)
	}
	return cmd
}

// kit runs the kit binary against s with token and waits for it.
func kit(t testing.TB, s *Server, token string, args ...string) *cliRun {
	t.Helper()
	return kitAt(t, s.URL+"/api/v1", token, args...)
}

func kitAt(t testing.TB, apiURL, token string, args ...string) *cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := cliCommand(ctx, t, apiURL, token, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := &cliRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running kit: %v%s", err, r)
	}
	return r
}

// wantExit fails the test unless the run ended with code.
func wantExit(t testing.TB, r *cliRun, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit status %d%s", code, r)
	}
}

// cliJSON decodes the stdout of a --json run.
func cliJSON(t testing.TB, r *cliRun) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("--json output does not parse: %v%s", err, r)
	}
	return v
}

// manifestFile writes m to a file for the kit binary.
func manifestFile(t testing.TB, m map[string]any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte(manifestString(m)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cliError matches the error line of the error body (docs/api.md "Errors").
func cliError(code string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^kit: .+ \(` + code + `, correlation id \S+\)`)
}

func TestCLI_ManifestValidate(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	published := w.kit(t, baseScopes...)

	t.Run("a valid manifest exits 0 and says valid", func(t *testing.T) {
		t.Parallel()
		m := manifest(newSlug(), "1.0.0", baseScopes)
		r := kit(t, s, w.Dev, "manifest", "validate", manifestFile(t, m))
		wantExit(t, r, 0)
		if !strings.HasPrefix(r.stdout, "valid: "+m["slug"].(string)+" 1.0.0 (a new Kit)\n") || !strings.Contains(r.stdout, "bot scope") {
			t.Fatalf("want valid and the consent of a new Kit%s", r)
		}
	})
	t.Run("problems exit 1 and print their paths, never the submitted value", func(t *testing.T) {
		t.Parallel()
		sentinel := "SENTINEL-" + randHex(8)
		m := manifest(newSlug(), "1.0.0", baseScopes)
		setPath(m, "bot.colour", sentinel)
		m["privacyPolicyUrl"] = "http://" + sentinel + ".example.com/privacy"
		r := kit(t, s, w.Dev, "manifest", "validate", manifestFile(t, m))
		wantExit(t, r, 1)
		if !strings.HasPrefix(r.stdout, "invalid: ") || !regexp.MustCompile(`(?m)^  bot\s+\S`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^  privacyPolicyUrl\s+\S`).MatchString(r.stdout) {
			t.Fatalf("want the problems table with the paths%s", r)
		}
		if strings.Contains(r.stdout+r.stderr, sentinel) {
			t.Fatalf("the output echoes the submitted value%s", r)
		}
	})
	t.Run("--json prints the validate answer", func(t *testing.T) {
		t.Parallel()
		m := manifest(newSlug(), "1.0.0", baseScopes)
		setPath(m, "bot.colour", "red")
		r := kit(t, s, w.Dev, "manifest", "validate", "--json", manifestFile(t, m))
		wantExit(t, r, 1)
		v := cliJSON(t, r)
		if jget(v, "valid") != false || jstr(v, "problems.0.path") != "bot" || !has(v, "", "diff") {
			t.Fatalf("want the validate answer%s", r)
		}
	})
	t.Run("the consent diff to the published version is a table, with wider", func(t *testing.T) {
		t.Parallel()
		m := manifest(published.Slug, "2.0.0", append(without(baseScopes, "users:read"), "files:read"))
		setPath(m, "endpoints.events", "https://events.example.com/hook")
		m["events"] = []any{"message.posted"}
		r := kit(t, s, w.Dev, "manifest", "validate", manifestFile(t, m))
		wantExit(t, r, 0)
		for _, re := range []string{
			`(?m)^valid: ` + published.Slug + ` 2\.0\.0 \(a new version of Kit ` + published.ID + `\)$`,
			`(?m)^  CHANGE\s+KIND\s+NAME\s+DETAIL$`,
			`(?m)^  added\s+bot scope\s+files:read$`,
			`(?m)^  removed\s+bot scope\s+users:read$`,
			`(?m)^  added\s+event\s+message\.posted$`,
			`(?m)^Unverified hosts: events\.example\.com$`,
			`(?m)^wider: yes`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Fatalf("output lacks %s%s", re, r)
			}
		}
	})
	t.Run("a narrower version says wider: no", func(t *testing.T) {
		t.Parallel()
		r := kit(t, s, w.Dev, "manifest", "validate", manifestFile(t, manifest(published.Slug, "2.0.0", without(baseScopes, "users:read"))))
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "\nwider: no") {
			t.Fatalf("want wider: no%s", r)
		}
	})
}

func TestCLI_VersionsKitsLogs(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	slug := newSlug()

	up := kit(t, s, w.Dev, "versions", "upload", manifestFile(t, manifest(slug, "1.0.0", baseScopes)), "--json")
	wantExit(t, up, 0)
	v := cliJSON(t, up)
	kitID := jstr(v, "kitId")
	if !isUUID(kitID) || jget(v, "created") != true || jget(v, "version.published") != false || jstr(v, "version.version") != "1.0.0" {
		t.Fatalf("want the upload answer of a new draft%s", up)
	}

	t.Run("upload --publish registers and publishes", func(t *testing.T) {
		r := kit(t, s, w.Dev, "versions", "upload", manifestFile(t, manifest(slug, "1.1.0", baseScopes)), "--publish")
		wantExit(t, r, 0)
		if !strings.HasPrefix(r.stdout, "uploaded and published version 1.1.0\n") || !regexp.MustCompile(`(?m)^kit\s+`+kitID+`$`).MatchString(r.stdout) {
			t.Fatalf("want the published upload%s", r)
		}
	})
	t.Run("publish by slug publishes the draft", func(t *testing.T) {
		r := kit(t, s, w.Dev, "versions", "publish", slug, "1.0.0")
		wantExit(t, r, 0)
		if !strings.HasPrefix(r.stdout, "published version 1.0.0\n") {
			t.Fatalf("want published%s", r)
		}
		d := s.api(t, w.Dev, "GET", "/dev/kits/"+kitID, nil, nil)
		want(t, d, 200)
		if d.Get("detail.versions.0.published") != true || d.Get("detail.versions.1.published") != true {
			t.Fatalf("both versions should be published%s", d)
		}
	})
	t.Run("kits list shows the Kit", func(t *testing.T) {
		r := kit(t, s, w.Dev, "kits", "list")
		wantExit(t, r, 0)
		if !regexp.MustCompile(`(?m)^ID\s+SLUG\s+NAME`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^`+kitID+`\s+`+slug+`\s+Kit `+slug+`\s+private\s+active\s+1\.1\.0\s+1\.1\.0\s+no$`).MatchString(r.stdout) {
			t.Fatalf("want the Kit's line%s", r)
		}
		j := cliJSON(t, kit(t, s, w.Dev, "kits", "list", "--json"))
		if jstr(j, "kits.0.kitId") != kitID || len(jarr(j, "kits")) != 1 {
			t.Fatalf("--json: want {kits: [the Kit]}: %v", j)
		}
	})
	t.Run("kits show shows the versions", func(t *testing.T) {
		r := kit(t, s, w.Dev, "kits", "show", kitID)
		wantExit(t, r, 0)
		for _, re := range []string{`(?m)^Kit ` + slug + ` \(` + slug + `\)$`, `(?m)^  1\.0\.0\s+published `, `(?m)^  1\.1\.0\s+published `, `(?m)^Domains: none$`} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Fatalf("output lacks %s%s", re, r)
			}
		}
	})
	t.Run("logs show the audit entries of the uploads and publishes, oldest first", func(t *testing.T) {
		r := kit(t, s, w.Dev, "logs", slug)
		wantExit(t, r, 0)
		order := []string{"version.uploaded status=1.0.0", "version.uploaded status=1.1.0", "version.published status=1.1.0", "version.published status=1.0.0"}
		at := -1
		for _, o := range order {
			i := strings.Index(r.stdout, "audit      info   "+o+"\n")
			if i <= at {
				t.Fatalf("want the audit entries %q in this order%s", order, r)
			}
			at = i
		}
		j := cliJSON(t, kit(t, s, w.Dev, "logs", slug, "--source", "audit", "--limit", "1", "--json"))
		if len(jarr(j, "entries")) != 1 || jstr(j, "entries.0.event") != "version.published" || jstr(j, "entries.0.status") != "1.0.0" || jget(j, "nextCursor") == nil {
			t.Fatalf("--json --limit 1: want the newest entry and a cursor: %v", j)
		}
	})
	t.Run("logs --follow prints new entries as they come and exits 0 on SIGINT", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := cliCommand(ctx, t, s.URL+"/api/v1", w.Dev, "logs", slug, "--follow", "--interval", "100ms")
		out, errOut := &logbuf.Buffer{}, &logbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitOutput(t, out, "version.published status=1.0.0\n")
		want(t, w.uploadVersion(t, manifest(slug, "1.2.0", baseScopes), false), 201)
		waitOutput(t, out, "version.uploaded status=1.2.0\n")
		time.Sleep(300 * time.Millisecond) // more polls must print nothing again
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if err != nil {
			t.Fatalf("kit logs --follow after SIGINT: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		for _, e := range []string{"version.uploaded status=1.0.0", "version.published status=1.0.0", "version.uploaded status=1.2.0"} {
			if n := strings.Count(out.String(), e+"\n"); n != 1 {
				t.Fatalf("%q printed %d times, want once\nstdout:\n%s", e, n, out)
			}
		}
		if strings.Index(out.String(), "status=1.2.0") < strings.Index(out.String(), "version.published status=1.0.0") {
			t.Fatalf("the new entry must come last\nstdout:\n%s", out)
		}
	})
}

func TestCLI_Errors(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)

	t.Run("without KIT_DEV_TOKEN: a clear message, exit 2", func(t *testing.T) {
		t.Parallel()
		r := kit(t, s, "", "kits", "list")
		wantExit(t, r, 2)
		if !strings.Contains(r.stderr, "KIT_DEV_TOKEN is not set") {
			t.Fatalf("want the message naming KIT_DEV_TOKEN%s", r)
		}
	})
	t.Run("a usage mistake exits 2", func(t *testing.T) {
		t.Parallel()
		wantExit(t, kit(t, s, w.Dev, "versions", "publish", newUUID()), 2)
		wantExit(t, kit(t, s, w.Dev, "frobnicate"), 2)
	})
	t.Run("an unknown Kit is the 404 error line, exit 1", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"kits", "show", newUUID()}, {"versions", "publish", newUUID(), "1.0.0"}, {"logs", newUUID()}} {
			r := kit(t, s, w.Dev, args...)
			wantExit(t, r, 1)
			if !cliError("not_found").MatchString(r.stderr) || r.stdout != "" {
				t.Fatalf("want kit: <message> (not_found, correlation id <id>)%s", r)
			}
		}
	})
	t.Run("an unknown slug names it, exit 1", func(t *testing.T) {
		t.Parallel()
		r := kit(t, s, w.Dev, "kits", "show", "no-such-kit")
		wantExit(t, r, 1)
		if !strings.Contains(r.stderr, `"no-such-kit"`) {
			t.Fatalf("want the slug named%s", r)
		}
	})
	t.Run("a revoked token is invalid_token, exit 1", func(t *testing.T) {
		t.Parallel()
		tok, id := w.devToken(t, w.Admin.ID)
		want(t, s.ops(t, "DELETE", "/ops/v1/developer-tokens/"+id, nil), 200)
		r := kit(t, s, tok, "me")
		wantExit(t, r, 1)
		if !cliError("invalid_token").MatchString(r.stderr) {
			t.Fatalf("want the invalid_token line%s", r)
		}
	})
	t.Run("a server that does not answer: a clear message, exit 1", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		r := kitAt(t, "http://"+addr+"/api/v1", w.Dev, "kits", "list")
		wantExit(t, r, 1)
		if !strings.Contains(r.stderr, "kit: cannot reach the Kit API at http://"+addr+"/api/v1") {
			t.Fatalf("want the cannot-reach message%s", r)
		}
	})
	t.Run("an origin as KIT_API_URL means its /api/v1", func(t *testing.T) {
		t.Parallel()
		r := kitAt(t, s.URL, w.Dev, "me")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "workspace  "+w.ID+"\n") {
			t.Fatalf("want the workspace%s", r)
		}
	})
	t.Run("429 prints the Retry-After seconds", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "limits.json")
		if err := os.WriteFile(file, []byte(`{"developer": {"capacity": 1, "refill": 1, "windowSeconds": 60}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		ls := startServerOpts(t, ServerOpts{Limits: file})
		lw := newWorkspace(t, ls)
		wantExit(t, kit(t, ls, lw.Dev, "me"), 0)
		r := kit(t, ls, lw.Dev, "me")
		wantExit(t, r, 1)
		if !regexp.MustCompile(`^kit: .+ \(rate_limited, correlation id \S+\); retry after [1-9][0-9]* s\n$`).MatchString(r.stderr) {
			t.Fatalf("want the rate_limited line with the Retry-After seconds%s", r)
		}
	})
}

func TestCLI_DevInstall(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "sandbox " + randHex(3), "sandbox": true})
	want(t, r, 201)
	sb := &Workspace{S: s, ID: r.Str("workspace.id")}
	sb.Owner = sb.user(t, "owner")
	sb.Dev, sb.DevID = sb.devToken(t, sb.Owner.ID)
	slug := newSlug()
	m := manifest(slug, "0.1.0", baseScopes)
	setPath(m, "endpoints.events", "https://prod.example.com/kit/events")
	m["events"] = []any{"message.posted"}
	file := manifestFile(t, m)

	t.Run("me says sandbox", func(t *testing.T) {
		r := kit(t, s, sb.Dev, "me")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "workspace  "+sb.ID+" (developer sandbox)\n") {
			t.Fatalf("want the sandbox workspace%s", r)
		}
	})
	t.Run("the first dev-install moves the endpoints and shows the signing secret once", func(t *testing.T) {
		r := kit(t, s, sb.Dev, "dev-install", file, "--url", "https://abc123.tunnel.example")
		wantExit(t, r, 0)
		for _, re := range []string{
			`(?m)^installed ` + slug + ` 0\.1\.0 in the sandbox$`,
			`(?m)^endpoints\s+https://abc123\.tunnel\.example/kit/events$`,
			`(?m)^signing secret\s+kss_[A-Za-z0-9_-]{43}  \(shown once`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Fatalf("output lacks %s%s", re, r)
			}
		}
	})
	t.Run("again: the same version is reused, no secret", func(t *testing.T) {
		r := kit(t, s, sb.Dev, "dev-install", file, "--url", "https://abc123.tunnel.example", "--json")
		wantExit(t, r, 0)
		v := cliJSON(t, r)
		if jstr(v, "slug") != slug || !isUUID(jstr(v, "installationId")) || has(v, "", "signingSecret") && jget(v, "signingSecret") != nil {
			t.Fatalf("want the dev-install answer without a secret%s", r)
		}
	})
	t.Run("a workspace that is not a sandbox is forbidden, exit 1", func(t *testing.T) {
		w := newWorkspace(t, s)
		r := kit(t, s, w.Dev, "dev-install", manifestFile(t, manifest(newSlug(), "0.1.0", baseScopes)), "--url", "https://t.example")
		wantExit(t, r, 1)
		if !cliError("forbidden").MatchString(r.stderr) {
			t.Fatalf("want the forbidden line%s", r)
		}
	})
}

func TestCLI_Domains(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	k := w.kit(t, baseScopes...)

	t.Run("add prints the DNS record to publish", func(t *testing.T) {
		r := kit(t, s, w.Dev, "domains", "add", k.Slug, "desk.example.com")
		wantExit(t, r, 0)
		for _, re := range []string{
			`(?m)^added desk\.example\.com \(method dns\); it is not verified yet$`,
			`(?m)then run: kit domains verify ` + k.Slug + ` desk\.example\.com$`,
			`(?m)^  type\s+TXT$`,
			`(?m)^  host\s+_kit-challenge\.desk\.example\.com$`,
			`(?m)^  value\s+kit-verification=[A-Za-z0-9_-]{43}$`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Fatalf("output lacks %s%s", re, r)
			}
		}
	})
	t.Run("add --method well_known prints the file to serve", func(t *testing.T) {
		r := kit(t, s, w.Dev, "domains", "add", k.ID, "wk.example.com", "--method", "well_known")
		wantExit(t, r, 0)
		if !regexp.MustCompile(`(?m)^  url\s+https://wk\.example\.com/\.well-known/kit-verification\.json$`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^  body\s+\{"kitId":"`+k.ID+`","token":"[A-Za-z0-9_-]{43}"\}$`).MatchString(r.stdout) {
			t.Fatalf("want the well-known URL and body%s", r)
		}
	})
	t.Run("add again with --json is the domain the Kit has", func(t *testing.T) {
		r := kit(t, s, w.Dev, "domains", "add", k.Slug, "desk.example.com", "--json")
		wantExit(t, r, 0)
		if v := cliJSON(t, r); jstr(v, "domain.domain") != "desk.example.com" || jget(v, "domain.verified") != false {
			t.Fatalf("want {domain}%s", r)
		}
	})
	t.Run("kits show lists the domains", func(t *testing.T) {
		r := kit(t, s, w.Dev, "kits", "show", k.Slug)
		wantExit(t, r, 0)
		if !regexp.MustCompile(`(?m)^  desk\.example\.com\s+dns\s+no$`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^  wk\.example\.com\s+well_known\s+no$`).MatchString(r.stdout) {
			t.Fatalf("want both domains%s", r)
		}
	})
	t.Run("verify of a domain the Kit does not have is 404, exit 1", func(t *testing.T) {
		r := kit(t, s, w.Dev, "domains", "verify", k.Slug, "other.example.com")
		wantExit(t, r, 1)
		if !cliError("not_found").MatchString(r.stderr) {
			t.Fatalf("want the not_found line%s", r)
		}
	})
	t.Run("remove removes it; removing again is 404", func(t *testing.T) {
		r := kit(t, s, w.Dev, "domains", "remove", k.Slug, "desk.example.com")
		wantExit(t, r, 0)
		if r.stdout != "removed desk.example.com\n" {
			t.Fatalf("want removed%s", r)
		}
		if show := kit(t, s, w.Dev, "kits", "show", k.Slug); strings.Contains(show.stdout, "desk.example.com") {
			t.Fatalf("the removed domain is still shown%s", show)
		}
		again := kit(t, s, w.Dev, "domains", "remove", k.Slug, "desk.example.com")
		wantExit(t, again, 1)
		if !cliError("not_found").MatchString(again.stderr) {
			t.Fatalf("want the not_found line%s", again)
		}
	})
}

// waitOutput waits until out contains s.
func waitOutput(t testing.TB, out *logbuf.Buffer, s string) {
	t.Helper()
	if !eventually.Holds(eventually.Within, func() bool { return strings.Contains(out.String(), s) }) {
		t.Fatalf("no %q in %v; output:\n%s", s, eventually.Within, out)
	}
}

func TestCLI_InstallLink(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	m := manifest(newSlug(), "1.0.0", baseScopes)
	m["distribution"] = "unlisted"
	want(t, w.uploadVersion(t, m, true), 201)
	slug := m["slug"].(string)

	t.Run("create prints the URL once", func(t *testing.T) {
		r := kit(t, s, w.Dev, "install-link", "create", slug)
		wantExit(t, r, 0)
		if !regexp.MustCompile(`(?m)^url\s+\S+/app/kits/install\?link=kil_[A-Za-z0-9_-]{43}$`).MatchString(r.stdout) ||
			!strings.Contains(r.stdout, "shown once") {
			t.Fatalf("want the install URL%s", r)
		}
		show := kit(t, s, w.Dev, "kits", "show", slug)
		wantExit(t, show, 0)
		if !strings.Contains(show.stdout, "install link") || strings.Contains(show.stdout, "kil_") {
			t.Fatalf("kits show must say the link is active, never its URL%s", show)
		}
	})
	t.Run("delete ends it; deleting again is an error", func(t *testing.T) {
		wantExit(t, kit(t, s, w.Dev, "install-link", "delete", slug), 0)
		r := kit(t, s, w.Dev, "install-link", "delete", slug)
		wantExit(t, r, 1)
		if !cliError("not_found").MatchString(r.stderr) {
			t.Fatalf("want a not_found error%s", r)
		}
	})
	t.Run("a private Kit has no install link", func(t *testing.T) {
		r := kit(t, s, w.Dev, "install-link", "create", w.kit(t, baseScopes...).Slug)
		wantExit(t, r, 1)
		if !cliError("conflict").MatchString(r.stderr) {
			t.Fatalf("want a conflict error%s", r)
		}
	})
}
