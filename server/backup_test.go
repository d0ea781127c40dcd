package server

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
)

// A backup of a cluster's node, restored as a node alone, seals and opens
// with the cluster's key: the secrets sealed on any member open.
func TestRestoredClusterBackupSealsWithTheClusterKey(t *testing.T) {
	src := t.TempDir()
	keys, err := sealingKeys(src, "the cluster key")
	if err != nil {
		t.Fatal(err)
	}
	store, err := persistence.Open(filepath.Join(src, "db"), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var b bytes.Buffer
	h := backup.Header{Kitd: "test", CreatedAt: time.Now(), Partitions: partition.Count}
	if err := backup.Node(&b, store, h, backupFiles(keys), nil); err != nil {
		t.Fatal(err)
	}
	// What `kitd restore` does once its flags are read.
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := backup.Restore(&b, dir, func(backup.Header) error { return nil }); err != nil {
		t.Fatal(err)
	}
	restored, err := sealingKeys(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restored.seal, keys.seal) || !bytes.Equal(restored.own, keys.own) || len(restored.open) != 2 {
		t.Fatalf("the restored node alone seals with another key than its cluster did, or opens with %d keys, want 2", len(restored.open))
	}
}
