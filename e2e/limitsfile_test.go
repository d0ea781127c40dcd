package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// OPERATIONS.md section 1: `--limits FILE` overrides single rows of the spec
// limits; the others keep their spec values.
func TestLimitsFile_OverridesOneRow(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "limits.json")
	if err := os.WriteFile(file, []byte(`{"post_message": {"capacity": 2, "refill": 1, "windowSeconds": 60}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerOpts(t, ServerOpts{Limits: file})
	env := newBotEnv(t, s)

	for i := range 2 {
		r := env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "burst"))
		want(t, r, 201)
		if i == 0 && !strings.Contains(r.Header.Get("RateLimit-Policy"), `"write";q=50;w=60`) {
			t.Errorf("the write row keeps its spec value: RateLimit-Policy %q", r.Header.Get("RateLimit-Policy"))
		}
	}
	r := env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "third"))
	checkRetryAfter(t, r, 60)
	if p := r.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"post_message";q=2;w=120`) {
		t.Errorf("the overridden row is in force: RateLimit-Policy %q", p)
	}
}

// A limits file with an unknown row or a bad value stops the server at
// start, naming the key, instead of running with limits nobody asked for.
func TestLimitsFile_BadFileStopsTheServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, key string
	}{
		{"an unknown limit name", `{"wrtie": {"capacity": 5}}`, "wrtie"},
		{"a negative capacity", `{"write": {"capacity": -1}}`, "write"},
		{"not JSON", `{`, "limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "limits.json")
			if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(kitdBin, "serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
				"--operator-token", randToken(), "--limits", file)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("kitd kept running with a bad limits file")
			}
			if err == nil {
				t.Fatalf("kitd exited 0 with a bad limits file; output:\n%s", out)
			}
			if strings.Contains(string(out), "kitd listening on") {
				t.Fatalf("kitd served with a bad limits file:\n%s", out)
			}
			if !strings.Contains(string(out), "--limits") || !strings.Contains(string(out), tc.key) {
				t.Fatalf("the error should name --limits and %q:\n%s", tc.key, out)
			}
		})
	}
}
