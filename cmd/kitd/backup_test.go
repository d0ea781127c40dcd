package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
)

func TestRestoreCommand(t *testing.T) {
	src, err := persistence.Open(t.TempDir(), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	backupOf := func(partitions int) []byte {
		var b bytes.Buffer
		h := backup.Header{Kitd: "test", CreatedAt: time.Now(), Partitions: partitions}
		if err := backup.Node(&b, src, h, []backup.File{{Name: "secret-key", Data: make([]byte, 32)}}, nil); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	whole := backupOf(partition.Count)
	file := filepath.Join(t.TempDir(), "kitd.backup")
	os.WriteFile(file, whole, 0o600)

	for _, tc := range []struct {
		rule  string
		args  func(dir string) []string
		stdin []byte
		fails string
	}{
		{"--from and --data restore", func(dir string) []string { return []string{"--from", file, "--data", dir} }, nil, ""},
		{"--from - reads standard input", func(dir string) []string { return []string{"--from", "-", "--data", dir} }, whole, ""},
		{"--from is required", func(dir string) []string { return []string{"--data", dir} }, nil, "needs --from"},
		{"--data is required", func(string) []string { return []string{"--from", file} }, nil, "needs --from"},
		{"a missing file is refused", func(dir string) []string { return []string{"--from", file + ".none", "--data", dir} }, nil, "no such file"},
		{"a backup of another partition count is refused", func(dir string) []string { return []string{"--from", "-", "--data", dir} }, backupOf(32), "32 partitions"},
		{"a refusal says the directory is as it was", func(dir string) []string { return []string{"--from", "-", "--data", dir} }, whole[:20], "left as it was"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var out bytes.Buffer
			err := restore(tc.args(dir), bytes.NewReader(tc.stdin), &out)
			if tc.fails == "" {
				if err != nil || !strings.Contains(out.String(), "restored") {
					t.Fatalf("restore: %v, %q", err, out.String())
				}
				if _, err := os.Stat(filepath.Join(dir, "secret-key")); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Fatalf("restore: %v, want an error saying %q", err, tc.fails)
			}
		})
	}
}
