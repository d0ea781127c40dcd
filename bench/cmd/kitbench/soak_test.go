package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
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
		limit: 50, pageLimit: 2, trivial: trivialInProcess, rate: 200, events: true, // -events is on by default
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
	if err != nil || len(rows) < 12 || len(rows[0]) != 14 || rows[0][8] != "cache_bytes" || rows[0][1] != "rss_bytes" {
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
	if !strings.Contains(rep.Scenario, "get-history-3-conversations") {
		t.Errorf("the soak reads one channel only: %s", rep.Scenario)
	}
	last := rep.Samples[len(rep.Samples)-1]
	if last.RSSBytes <= 0 || last.Goroutines <= 0 || last.Threads <= 0 || last.OpenFiles <= 0 || last.OK == 0 {
		t.Fatalf("last sample %+v", last)
	}
	if last.Cache == nil || last.Cache.Limit != 1<<20 || last.Cache.Bytes == 0 || rows[len(rows)-1][9] != "1048576" {
		t.Fatalf("the history cache is not sampled: %+v, csv %v", last.Cache, rows[len(rows)-1])
	}
	if c := rep.HistoryCache; c == nil || c.Over != 0 || c.Limit != 1<<20 || c.Samples != len(rep.Samples) {
		t.Fatalf("history cache verdict %+v", c)
	}
	for _, s := range rep.Series {
		if s.Verdict.Why == "" || s.Verdict.Mean == 0 {
			t.Errorf("series %s not judged: %+v", s.Name, s.Verdict)
		}
	}
}

// TestHistoryManyScenario: the soak's reads go round-robin over every
// write channel, so that many conversations keep windows.
func TestHistoryManyScenario(t *testing.T) {
	fx := &fixture{BotToken: "kbot_x", Conversations: []string{"c1", "c2", "c3"}}
	sd := historyManyScenario(fx, 50)
	if sd.sc.Name != "get-history-3-conversations" {
		t.Fatalf("name %q", sd.sc.Name)
	}
	var got []string
	for n := uint64(0); n < 4; n++ {
		var req fasthttp.Request
		sd.sc.Build(n, &req)
		if string(req.Header.Peek("Authorization")) != "Bearer kbot_x" {
			t.Fatalf("request %d without the bot's token", n)
		}
		got = append(got, string(req.RequestURI()))
	}
	want := []string{"/api/v1/conversations/c1/messages?limit=50", "/api/v1/conversations/c2/messages?limit=50",
		"/api/v1/conversations/c3/messages?limit=50", "/api/v1/conversations/c1/messages?limit=50"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("requests %v, want %v", got, want)
	}
}
