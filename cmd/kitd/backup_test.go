package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
)

func TestRestoreCommand(t *testing.T) {
	src, err := persistence.Open(t.TempDir(), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	err = backup.Node(&whole, src, backup.Header{Kitd: "test", CreatedAt: time.Now()}, []backup.File{{Name: "secret-key", Data: make([]byte, 32)}}, nil)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kitd.backup")
	os.WriteFile(file, whole.Bytes(), 0o600)

	for _, tc := range []struct {
		rule  string
		args  func(dir string) []string
		stdin []byte
		fails string
	}{
		{"--from and --data restore", func(dir string) []string { return []string{"--from", file, "--data", dir} }, nil, ""},
		{"--from - reads standard input", func(dir string) []string { return []string{"--from", "-", "--data", dir} }, whole.Bytes(), ""},
		{"--from is required", func(dir string) []string { return []string{"--data", dir} }, nil, "needs --from"},
		{"--data is required", func(string) []string { return []string{"--from", file} }, nil, "needs --from"},
		{"a missing file is refused", func(dir string) []string { return []string{"--from", file + ".none", "--data", dir} }, nil, "no such file"},
		{"a refusal says the directory is as it was", func(dir string) []string { return []string{"--from", "-", "--data", dir} }, whole.Bytes()[:20], "left as it was"},
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
