package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func dirListing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// A --data that is not empty and holds no kitd data (a typo: --data ~,
// --data /var/lib) is refused, untouched: kitd wrote a Pebble store,
// operator-token and secret-key into it and served before.
func TestProcess_AForeignDataDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "photos"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)
	s, err := launch(ServerOpts{DataDir: dir})
	if err == nil {
		s.stop(15 * time.Second)
		t.Errorf("kitd served a directory that holds no kitd data")
	}
	if after := dirListing(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the directory was changed: before %v, after %v", before, after)
	}
}

// A data directory that another kitd holds: the error says so,
// not "resource temporarily unavailable".
func TestProcess_ADataDirectoryInUseSaysSo(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{})
	out, err := exec.Command(kitdBin, "serve", "--data", s.DataDir, "--listen", "127.0.0.1:0").CombinedOutput()
	if err == nil {
		t.Fatalf("a second kitd started on %s", s.DataDir)
	}
	msg := string(out)
	if !strings.Contains(msg, "in use") && !strings.Contains(msg, "another") && !strings.Contains(msg, "locked") {
		t.Errorf("the error should say the directory is in use by another process:\n%s", msg)
	}
}

// Asking for help is an answer, not a failure: `kitd serve --help` printed
// its flags, then "kitd: flag: help requested" and exited 2, as a mistyped
// flag does (a script that checks the usage saw a failure). Each asks
// here, and a mistake still exits 2.
func TestProcess_HelpIsAnAnswer(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		args []string
		want int    // exit status
		says string // in the output
	}{
		{"serve --help lists the flags", []string{"serve", "--help"}, 0, "-listen"},
		{"serve -h lists the flags", []string{"serve", "-h"}, 0, "-public-url"},
		{"restore --help lists its flags", []string{"restore", "--help"}, 0, "-from"},
		{"--help gives the usage", []string{"--help"}, 0, "kitd serve [flags]"},
		{"help gives the usage", []string{"help"}, 0, "kitd serve [flags]"},
		{"an unknown flag is a usage error", []string{"serve", "--no-such-flag"}, 2, "-listen"},
		{"no command is a usage error", nil, 2, "kitd serve [flags]"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, err := exec.Command(kitdBin, r.args...).CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != r.want || !strings.Contains(string(out), r.says) {
				t.Errorf("kitd %s: exit %d, want %d, with %q in:\n%s", strings.Join(r.args, " "), code, r.want, r.says, out)
			}
			if strings.Contains(string(out), "help requested") {
				t.Errorf("kitd %s reports help as an error:\n%s", strings.Join(r.args, " "), out)
			}
		})
	}
}
