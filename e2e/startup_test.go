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
