package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSoakWithFakeKitd runs a short soak against the fake kitd: it samples
// the process (its /proc, its data directory, its pprof endpoint), writes
// the series as CSV and JSON, judges every series, and passes.
func TestSoakWithFakeKitd(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	prefix := filepath.Join(t.TempDir(), "soak")
	code, err := run(options{
		kitd: os.Args[0], concurrency: 2, duration: time.Second, timeout: 5 * time.Second, conversations: 3, seed: 5,
		limit: 50, pageLimit: 2, trivial: trivialInProcess, rate: 200,
		soak: 3 * time.Second, soakEvery: 150 * time.Millisecond, soakOut: prefix,
	})
	if code != 0 || err != nil {
		t.Fatalf("soak: code %d, %v", code, err)
	}
	f, err := os.Open(prefix + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 12 || len(rows[0]) != 8 || rows[0][1] != "rss_bytes" {
		t.Fatalf("csv: %d rows, %v: %v", len(rows), err, rows[:min(2, len(rows))])
	}
	data, err := os.ReadFile(prefix + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var rep soakReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) != len(rows)-1 || len(rep.Series) != 5 || len(rep.Grew) != 0 || rep.Load.Requests == 0 {
		t.Fatalf("report: %d samples, series %+v, grew %v, load %+v", len(rep.Samples), rep.Series, rep.Grew, rep.Load)
	}
	last := rep.Samples[len(rep.Samples)-1]
	if last.RSSBytes <= 0 || last.Goroutines <= 0 || last.Threads <= 0 || last.OpenFiles <= 0 || last.OK == 0 {
		t.Fatalf("last sample %+v", last)
	}
	for _, s := range rep.Series {
		if s.Verdict.Why == "" || s.Verdict.Mean == 0 {
			t.Errorf("series %s not judged: %+v", s.Name, s.Verdict)
		}
	}
}
