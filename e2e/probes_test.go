package e2e

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// OPERATIONS.md section 8: /livez and /readyz answer without a token, as
// /healthz still does.
func TestProbes(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		t.Run(path+" answers 200 {\"ok\":true} without a token", func(t *testing.T) {
			r := s.do(t, "GET", path, "", nil, nil)
			want(t, r, 200)
			if m, _ := r.JSON.(map[string]any); len(m) != 1 || m["ok"] != true {
				t.Fatalf(`want exactly {"ok":true}%s`, r)
			}
		})
	}
}

// OPERATIONS.md section 8: GET / sends a browser to the app host's home,
// with 302 (temporary: the app's address follows --public-url).
func TestRootRedirectsToTheApp(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	res, err := noRedirect.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 302 || res.Header.Get("Location") != s.URL+"/app/" {
		t.Fatalf("GET /: %d to %q, want 302 to %s/app/", res.StatusCode, res.Header.Get("Location"), s.URL)
	}
	// Followed, it reaches the app (its sign-in page).
	res, err = client.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Request.URL.Path, "/app/") {
		t.Fatalf("GET / followed: %d at %s", res.StatusCode, res.Request.URL)
	}
}

// OPERATIONS.md section 8: --metrics-token reads GET /metrics and nothing
// else (the operator token still may), and /metrics says which build runs.
func TestMetricsTokenReadsMetricsOnly(t *testing.T) {
	t.Parallel()
	scrape := "scrape_" + randToken()
	s := startServerOpts(t, ServerOpts{Args: []string{"--metrics-token", scrape}})
	env := newBotEnv(t, s)
	t.Run("the metrics token reads /metrics", func(t *testing.T) {
		want(t, s.do(t, "GET", "/metrics", scrape, nil, nil), 200)
	})
	t.Run("the operator token still reads /metrics", func(t *testing.T) {
		want(t, s.do(t, "GET", "/metrics", s.OpToken, nil, nil), 200)
	})
	t.Run("the metrics token is refused by the operator API", func(t *testing.T) {
		wantError(t, s.do(t, "POST", "/ops/v1/workspaces", scrape, map[string]any{"name": "nope"}, nil), 401, "invalid_token")
		wantError(t, s.do(t, "GET", "/ops/v1/cluster", scrape, nil, nil), 401, "invalid_token")
	})
	t.Run("the metrics token is refused by the Web API", func(t *testing.T) {
		wantError(t, s.api(t, scrape, "GET", "/auth/test", nil, nil), 401, "invalid_token")
		wantError(t, s.api(t, scrape, "GET", "/conversations/"+env.Chan.ID+"/messages", nil, nil), 401, "invalid_token")
	})
	t.Run("kitd_build_info names the version, the commit and the Go version kitd version prints", func(t *testing.T) {
		r := s.do(t, "GET", "/metrics", scrape, nil, nil)
		want(t, r, 200)
		mfs := metricstest.Parse(t, r.Body)
		fam := mfs["kitd_build_info"]
		if fam == nil || len(fam.GetMetric()) != 1 {
			t.Fatalf("no single kitd_build_info series in /metrics")
		}
		m := fam.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		v := kitdVersion(t)
		if m.GetGauge().GetValue() != 1 || labels["version"] != v.version || labels["commit"] != v.commit || labels["goversion"] != v.goVersion {
			t.Fatalf("kitd_build_info %v = %v, want 1 with %+v", labels, m.GetGauge().GetValue(), v)
		}
	})
}

type versionOutput struct{ version, commit, goVersion string }

// kitdVersion runs `kitd version` and reads its three lines.
func kitdVersion(t *testing.T) versionOutput {
	t.Helper()
	out, err := exec.Command(kitdBin, "version").Output()
	if err != nil {
		t.Fatalf("kitd version: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^kitd (\S+)\ncommit (\S+)\n(go\S+)\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("kitd version printed %q, want kitd VERSION, commit COMMIT and the Go version on three lines", out)
	}
	return versionOutput{m[1], m[2], m[3]}
}

// `kitd version` prints the version and the commit of the build's VCS
// stamp (vcs.revision, vcs.modified), as the binary records them; a
// build without a stamp (-buildvcs=false, no git) says "unknown".
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	v := kitdVersion(t)
	info, err := buildinfo.ReadFile(kitdBin)
	if err != nil {
		t.Fatal(err)
	}
	commit, modified := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		commit += "+modified"
	}
	if v.commit != commit {
		t.Fatalf("kitd version says commit %q, the binary's stamp %q", v.commit, commit)
	}
	if v.goVersion != info.GoVersion {
		t.Fatalf("kitd version says %q, the binary was built by %q", v.goVersion, info.GoVersion)
	}
	if want := info.Main.Version; want != "" && v.version != want {
		t.Fatalf("kitd version says version %q, the main module's is %q", v.version, want)
	}
}

// Secrets may come from files (KIT_OPERATOR_TOKEN_FILE and the others),
// and what the environment says wrong stops kitd at start with an error
// naming the variable, never the secret.
func TestConfigFromTheEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := "op_" + randToken()
	file := filepath.Join(dir, "operator-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("KIT_OPERATOR_TOKEN_FILE is the operator token", func(t *testing.T) {
		s := startServerOpts(t, ServerOpts{NoOpToken: true, Env: []string{"KIT_OPERATOR_TOKEN_FILE=" + file}})
		s.OpToken = token
		want(t, s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "from a file"}), 201)
		if _, err := os.Stat(filepath.Join(s.DataDir, "operator-token")); err == nil {
			t.Errorf("kitd generated an operator token though KIT_OPERATOR_TOKEN_FILE gave one")
		}
	})
	for _, tc := range []struct {
		rule string
		env  []string
		args []string
		says string
	}{
		{"a variable and its _FILE together are refused", []string{"KIT_OPERATOR_TOKEN=" + token, "KIT_OPERATOR_TOKEN_FILE=" + file}, nil, "KIT_OPERATOR_TOKEN and KIT_OPERATOR_TOKEN_FILE are both set"},
		{"an unreadable _FILE is refused, naming the variable", []string{"KIT_METRICS_TOKEN_FILE=" + filepath.Join(dir, "absent")}, nil, "KIT_METRICS_TOKEN_FILE: cannot read"},
		{"a boolean variable other than 1, 0, true, false is refused", []string{"KIT_DEMO=yes"}, nil, "KIT_DEMO must be 1, 0, true or false"},
		{"--pprof on every interface is refused", nil, []string{"--pprof", "0.0.0.0:0"}, "--pprof must be a loopback address"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s, err := launch(ServerOpts{DataDir: t.TempDir(), NoOpToken: true, Env: tc.env, Args: tc.args})
			if err == nil {
				s.stop(startupTimeout)
				t.Fatal("kitd started")
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("kitd did not say %q:\n%v", tc.says, err)
			}
			if strings.Contains(err.Error(), token) {
				t.Fatalf("kitd printed the token of the file")
			}
		})
	}
}
