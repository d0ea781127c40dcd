package server

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
)

// The key that seals the Kits' signing secrets is the same on every node
// of a cluster, a node alone keeps its own, and every older key still
// opens; a backup carries what a restored node alone needs to open them.
func TestSealingKeys(t *testing.T) {
	derive := func(clusterKey string) []byte {
		k, err := actors.ClusterSealKey(clusterKey)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	own := bytes.Repeat([]byte{1}, 32)
	keys := map[string][]byte{
		"secret-key":  own,
		"cluster":     derive("the cluster key"),
		"old cluster": derive("the old cluster key"),
	}
	name := func(k []byte) string {
		for n, v := range keys {
			if bytes.Equal(k, v) {
				return n
			}
		}
		return "an unknown key"
	}
	for _, tc := range []struct {
		rule       string
		secretKey  bool   // <data>/secret-key holds own (else it is made)
		sealingKey string // keys' name <data>/sealing-key holds; "" none
		clusterKey string
		seal       string
		open       []string
		backup     []string // the files a backup carries, in order
		fails      string
	}{
		{rule: "a node alone seals with its secret key", secretKey: true,
			seal: "secret-key", open: []string{"secret-key"}, backup: []string{"secret-key"}},
		{rule: "a node of a cluster seals with the cluster key's, and opens with its own too", secretKey: true, clusterKey: "the cluster key",
			seal: "cluster", open: []string{"cluster", "secret-key"}, backup: []string{"secret-key", "sealing-key=cluster"}},
		{rule: "a node alone restored from a cluster's backup seals with its sealing-key", secretKey: true, sealingKey: "cluster",
			seal: "cluster", open: []string{"cluster", "secret-key"}, backup: []string{"secret-key", "sealing-key=cluster"}},
		{rule: "a restored node that founds a cluster of the same key opens each key once", secretKey: true, sealingKey: "cluster", clusterKey: "the cluster key",
			seal: "cluster", open: []string{"cluster", "secret-key"}, backup: []string{"secret-key", "sealing-key=cluster"}},
		{rule: "a restored node in a cluster of another key opens the old cluster's secrets", secretKey: true, sealingKey: "old cluster", clusterKey: "the cluster key",
			seal: "cluster", open: []string{"cluster", "old cluster", "secret-key"}, backup: []string{"secret-key", "sealing-key=cluster"}},
		{rule: "a sealing-key of another length is refused", secretKey: true, sealingKey: "short", fails: "16 bytes, want 32"},
	} {
		dir := t.TempDir()
		if tc.secretKey {
			os.WriteFile(filepath.Join(dir, "secret-key"), own, 0o600)
		}
		switch tc.sealingKey {
		case "":
		case "short":
			os.WriteFile(filepath.Join(dir, "sealing-key"), make([]byte, 16), 0o600)
		default:
			os.WriteFile(filepath.Join(dir, "sealing-key"), keys[tc.sealingKey], 0o600)
		}
		k, err := sealingKeys(dir, tc.clusterKey)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("%s: got %v, want %q", tc.rule, err, tc.fails)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.rule, err)
			continue
		}
		var open, backup []string
		for _, o := range k.open {
			open = append(open, name(o))
		}
		for _, f := range backupFiles(k) {
			n := f.Name
			if f.Name != "secret-key" || !bytes.Equal(f.Data, own) {
				n += "=" + name(f.Data)
			}
			backup = append(backup, n)
		}
		if name(k.seal) != tc.seal || !slices.Equal(open, tc.open) || !slices.Equal(backup, tc.backup) {
			t.Errorf("%s: seals with %s, opens with %v, backs up %v; want %s, %v, %v", tc.rule, name(k.seal), open, backup, tc.seal, tc.open, tc.backup)
		}
	}
}

// A node alone makes its secret key on the first start and keeps it.
func TestSealingKeysMakeTheSecretKeyOnce(t *testing.T) {
	dir := t.TempDir()
	first, err := sealingKeys(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := sealingKeys(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.seal) != 32 || !bytes.Equal(first.seal, again.seal) || !bytes.Equal(first.seal, first.own) {
		t.Fatal("the secret key changed between starts, or is not the sealing key of a node alone")
	}
}
