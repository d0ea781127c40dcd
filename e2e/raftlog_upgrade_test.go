package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kitd/kitd/persistence"
)

// raftLogInPebbleCommit is the last commit whose kitd keeps the raft log
// in Pebble (r/<g>/log/, r/<g>/hs).
const raftLogInPebbleCommit = "1e96e79"

// A directory a build that kept the raft log in Pebble wrote with
// --replicate serves what it held once the current build has started on
// it: the log moved to <data>/raft, and no log key is left in the store.
func TestRaftLogMovesOutOfPebble(t *testing.T) {
	t.Parallel()
	old := olderBuild(t, raftLogInPebbleCommit)
	dir := t.TempDir()
	before := startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off", Bin: old, Args: []string{"--replicate"}})
	w := writeRecords(t, before, nil)
	before.stopClean(t)
	if n := raftLogKeys(t, dir); n == 0 {
		t.Fatal("the older build wrote no raft log key: nothing to move")
	}

	s := startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off", Args: []string{"--replicate"}})
	r := s.api(t, w.user, "GET", "/messages/"+w.message, nil, nil)
	want(t, r, 200)
	want(t, s.api(t, w.user, "POST", "/messages", map[string]any{"conversationId": w.conv, "text": "new"}, nil), 201)
	s.stopClean(t)

	if n := raftLogKeys(t, dir); n != 0 {
		t.Fatalf("%d raft log keys left in the store", n)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "raft", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no raft log segment in %s: %v", filepath.Join(dir, "raft"), err)
	}
	// Restarted once more, the node serves from the raft log alone.
	s = startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off", Args: []string{"--replicate"}})
	want(t, s.api(t, w.user, "GET", "/messages/"+w.message, nil, nil), 200)
	want(t, s.api(t, w.user, "POST", "/messages", map[string]any{"conversationId": w.conv, "text": "again"}, nil), 201)
}

// raftLogKeys counts the keys r/<g>/log/<index> and r/<g>/hs in the store
// of dir (multiraft/keys.go).
func raftLogKeys(t *testing.T, dir string) int {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	store, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := 0
	if err := store.Scan([]byte("r/"), []byte("r0"), false, func(k, _ []byte) bool {
		if len(k) > 5 && (bytes.HasPrefix(k[5:], []byte("log/")) || bytes.Equal(k[5:], []byte("hs"))) {
			n++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
