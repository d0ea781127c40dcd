package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/persistence"
)

// layout1Commit is the last commit whose kitd writes data layout 1 (keys
// without partitions): the upgrade test builds it to write a directory.
const layout1Commit = "da60abd"

// A data directory written by a build of the layout before partitions
// serves everything it held once the current build has started on it:
// every key is under its partition and decodes, and what was written
// reads back through the API, tokens and webhook URLs included.
func TestDirectoryOfAnOlderBuildUpgrades(t *testing.T) {
	t.Parallel()
	old := olderBuild(t, layout1Commit)
	dir := t.TempDir()
	before := startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off", Bin: old})
	w := writeRecords(t, before, nil)
	before.stopClean(t)

	s := startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off"})
	for _, tc := range []struct {
		rule string
		run  func(t *testing.T)
	}{
		{"a message reads back by its id", func(t *testing.T) {
			r := s.api(t, w.user, "GET", "/messages/"+w.message, nil, nil)
			want(t, r, 200)
			if r.Str("message.text") != "parent" {
				t.Fatalf("message %s", r)
			}
		}},
		{"the history of the conversation is whole", func(t *testing.T) {
			r := s.api(t, w.user, "GET", "/conversations/"+w.conv+"/messages?limit=50", nil, nil)
			want(t, r, 200)
			if n := len(jarr(r.JSON, "messages")); n < 3 {
				t.Fatalf("%d messages in the history, want at least 3%s", n, r)
			}
		}},
		{"a file uploaded before file ids carried a tag reads back", func(t *testing.T) {
			want(t, s.api(t, w.user, "GET", "/files/"+w.file, nil, nil), 200)
		}},
		{"a token issued before is accepted", func(t *testing.T) {
			want(t, s.api(t, w.user, "GET", "/auth/test", nil, nil), 200)
		}},
		{"a webhook URL issued before posts", func(t *testing.T) {
			want(t, s.do(t, "POST", w.hook.Path, "", map[string]any{"text": "after the upgrade"}, nil), 200)
		}},
		{"a new message goes on after the older ones", func(t *testing.T) {
			want(t, s.api(t, w.user, "POST", "/messages", map[string]any{"conversationId": w.conv, "text": "new"}, nil), 201)
		}},
		{"the log says the upgrade's steps and their keys", func(t *testing.T) {
			// The log is flushed within 100 ms (cmd/kitd/logging.go).
			for _, line := range []string{`"msg":"upgrading the data layout","node":`, `"msg":"data layout step done","node":`, `"msg":"upgraded the data layout","node":`} {
				eventually.True(t, "a "+line+" line in the log", func() bool { return strings.Contains(string(s.errOut.all()), line) })
			}
		}},
	} {
		t.Run(tc.rule, tc.run)
	}
	s.stopClean(t)

	store, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := 0
	if err := store.Scan(nil, nil, false, func(k, _ []byte) bool {
		if actors.KeyKind(k) == "" {
			t.Errorf("after the upgrade, a key no constructor builds: %q", k)
		}
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys, each under its partition", n)
}

// olderBuild builds kitd as of commit from this repository's history, or
// takes KITD_OLD_BIN when set.
func olderBuild(t *testing.T, commit string) string {
	t.Helper()
	if bin := os.Getenv("KITD_OLD_BIN"); bin != "" {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", "git archive --format=tar "+commit+" | tar -x -C "+src)
	archive.Dir = root
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "kitd-"+commit)
	// -trimpath keeps the source's directory, a fresh temporary one each
	// run, out of the build cache's keys: the second run on a machine
	// takes the build from the cache instead of compiling it again.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/kitd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kitd %s: %v\n%s", commit, err, out)
	}
	return bin
}
