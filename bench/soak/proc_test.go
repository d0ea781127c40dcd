package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	const status = "Name:\tkitd\nVmPeak:\t  900000 kB\nVmRSS:\t  123456 kB\nRssAnon:\t 100000 kB\nThreads:\t14\nSigQ:\t0/95442\n"
	p, err := parseStatus(strings.NewReader(status))
	if err != nil || p.RSSBytes != 123456<<10 || p.Threads != 14 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := parseStatus(strings.NewReader("Name:\tkitd\nThreads:\t3\n")); err == nil {
		t.Fatal("a status without VmRSS parsed")
	}
}

func TestReadProcessOfItself(t *testing.T) {
	p, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if p.RSSBytes <= 0 || p.Threads < 1 || p.OpenFiles < 3 {
		t.Fatalf("%+v", p)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"a.sst": 1000, "wal/000001.log": 234} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := DirSize(dir); err != nil || got != 1234 {
		t.Fatalf("%d %v, want 1234", got, err)
	}
}

func TestParseGoroutineTotal(t *testing.T) {
	if n, err := parseGoroutineTotal([]byte("goroutine profile: total 87\n")); n != 87 || err != nil {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := parseGoroutineTotal([]byte("<html>")); err == nil {
		t.Fatal("parsed html")
	}
}
