package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcIO(t *testing.T) {
	full := "rchar: 1000\nwchar: 2000\nsyscr: 30\nsyscw: 40\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n"
	for _, tc := range []struct {
		name string
		in   string
		want ioCounters
		ok   bool
	}{
		{"the four counters are read, the disk's ignored", full, ioCounters{ReadCalls: 30, WriteCalls: 40, BytesRead: 1000, BytesWritten: 2000}, true},
		{"a counter missing reads nothing", "rchar: 1000\nwchar: 2000\nsyscr: 30\n", ioCounters{}, false},
		{"a counter that is not a number reads nothing", strings.Replace(full, "syscw: 40", "syscw: x", 1), ioCounters{}, false},
		{"an empty file reads nothing", "", ioCounters{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProcIO([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("%+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	t.Run("this process's own counters can be read", func(t *testing.T) {
		if _, err := os.Stat("/proc/self/io"); err != nil {
			t.Skip("no /proc/<pid>/io here")
		}
		if c, ok := procIO(os.Getpid()); !ok || c.ReadCalls == 0 {
			t.Fatalf("%+v, %v", c, ok)
		}
	})
}

func TestParseCounter(t *testing.T) {
	m := map[string]uint64{}
	for _, line := range []string{
		"# HELP kitd_raft_syncs_total Syncs.",
		"# TYPE kitd_raft_syncs_total counter",
		"kitd_raft_syncs_total 42",
		`kitd_raft_partitions{role="leader"} 64`,
		"kitd_pebble_wal_syncs_total 1.5e+06",
		"kitd_raft_cycles_total_other 7",
		"kitd_raft_cycles_total",
		"kitd_pebble_compaction_bytes_written_total 123456",
	} {
		parseCounter(line, m)
	}
	if len(m) != 3 || m["kitd_raft_syncs_total"] != 42 || m["kitd_pebble_wal_syncs_total"] != 1500000 ||
		m["kitd_pebble_compaction_bytes_written_total"] != 123456 {
		t.Fatalf("read %v: want the three unlabelled counters of the list only", m)
	}
}

func TestSyncsOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters map[string]uint64
		want     uint64
		ok       bool
	}{
		{"a node alone syncs its store's WAL", map[string]uint64{"kitd_pebble_wal_syncs_total": 30}, 30, true},
		{"a node with raft groups syncs its raft log too", map[string]uint64{"kitd_pebble_wal_syncs_total": 2,
			"kitd_raft_cycles_total": 90, "kitd_raft_syncs_total": 70}, 72, true},
		{"a node with raft groups but no kitd_raft_syncs_total gives no figure",
			map[string]uint64{"kitd_pebble_wal_syncs_total": 2, "kitd_raft_cycles_total": 90}, 0, false},
		{"no kitd_pebble_wal_syncs_total gives no figure", map[string]uint64{"kitd_raft_cycles_total": 90, "kitd_raft_syncs_total": 70}, 0, false},
		{"zero syncs is a figure", map[string]uint64{"kitd_pebble_wal_syncs_total": 0}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := syncsOf(tc.counters); got != tc.want || ok != tc.ok {
				t.Fatalf("%d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestFiguresOf(t *testing.T) {
	io := ioCounters{ReadCalls: 300, WriteCalls: 400, BytesRead: 10000, BytesWritten: 50000}
	t.Run("every figure is per request", func(t *testing.T) {
		f := figuresOf(io, true, 25, true, 100)
		if f == nil || f.ReadCalls != 3 || f.WriteCalls != 4 || f.BytesRead != 100 || f.BytesWritten != 500 ||
			f.Syncs == nil || *f.Syncs != 0.25 || f.PerSync == nil || *f.PerSync != 4 {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("no request gives no figure", func(t *testing.T) {
		if f := figuresOf(io, true, 25, true, 0); f != nil {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("io that could not be read gives no figure", func(t *testing.T) {
		if f := figuresOf(io, false, 25, true, 100); f != nil {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("syncs that could not be counted give no sync figure rather than zero", func(t *testing.T) {
		if f := figuresOf(io, true, 0, false, 100); f == nil || f.Syncs != nil || f.PerSync != nil {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("no sync is zero per request and no requests per sync", func(t *testing.T) {
		if f := figuresOf(io, true, 0, true, 100); f == nil || f.Syncs == nil || *f.Syncs != 0 || f.PerSync != nil {
			t.Fatalf("%+v", f)
		}
	})
}

// nodeScrape is a node's counters with syncs WAL syncs and raft syncs of
// the raft log (none: a node alone).
func nodeScrape(wal, raft uint64) map[string]uint64 {
	m := map[string]uint64{"kitd_pebble_wal_syncs_total": wal}
	if raft > 0 {
		m["kitd_raft_syncs_total"], m["kitd_raft_cycles_total"] = raft, raft+10
	}
	return m
}

func TestMeasureWindowIO(t *testing.T) {
	io := func(r, w uint64) ioReading {
		return ioReading{c: ioCounters{ReadCalls: r, WriteCalls: w, BytesRead: 10 * r, BytesWritten: 100 * w}, ok: true}
	}
	nodes := []watched{{name: "n1", pid: 11, addr: "a1", token: "t"}, {name: "n2", pid: 12, addr: "a2", token: "t"}}
	run := func(t *testing.T, s *scriptedSampler, procs []watched) []procUsage {
		t.Helper()
		w := s.sampler().measureProcs(context.Background(), procs, time.Second, time.Second)
		s.tick(t)
		s.tick(t)
		return w.usage()
	}
	t.Run("each node's io and syncs over the window", func(t *testing.T) {
		s := newScriptedSampler(0, 0, time.Second, time.Second)
		s.ios = []ioReading{io(100, 200), io(1000, 2000), io(150, 260), io(1100, 2300)}
		s.scrapes = []map[string]uint64{nodeScrape(1, 50), nodeScrape(5, 500), nodeScrape(1, 80), nodeScrape(6, 520)}
		u := run(t, s, nodes)
		if len(u) != 2 || u[0].name != "n1" || u[0].io != (ioCounters{50, 60, 500, 6000}) || !u[0].ioOK ||
			u[1].io != (ioCounters{100, 300, 1000, 30000}) {
			t.Fatalf("usage %+v", u)
		}
		if n, ok := u[0].syncs(); !ok || n != 30 {
			t.Fatalf("n1 syncs %d, %v; want 30", n, ok)
		}
		if n, ok := u[1].syncs(); !ok || n != 21 {
			t.Fatalf("n2 syncs %d, %v; want 1+20", n, ok)
		}
	})
	// cpuOf measures both nodes whose CPU times read cpu in turn (each
	// node at the start, then each at the end).
	cpuOf := func(t *testing.T, cpu ...time.Duration) (time.Duration, bool, []procUsage) {
		s := newScriptedSampler(cpu...)
		s.ios = []ioReading{io(1, 1), io(1, 1), io(2, 2), io(2, 2)}
		s.scrapes = []map[string]uint64{nodeScrape(1, 1), nodeScrape(1, 1), nodeScrape(1, 1), nodeScrape(1, 1)}
		w := s.sampler().measureProcs(context.Background(), nodes, time.Second, time.Second)
		s.tick(t)
		s.tick(t)
		used, ok := w.result()
		return used, ok, w.usage()
	}
	t.Run("each process's CPU over the window, and their sum the server's", func(t *testing.T) {
		used, ok, u := cpuOf(t, 2*time.Second, 5*time.Second, 3*time.Second, 9*time.Second)
		if !ok || used != 5*time.Second || u[0].cpu != time.Second || !u[0].cpuOK || u[1].cpu != 4*time.Second {
			t.Fatalf("used %v, %v; usage %+v", used, ok, u)
		}
		st := &runStats{Requests: 1000}
		st.setIO(u)
		if p := st.Processes; len(p) != 2 || p[0].CPUMicrosPerRequest == nil || *p[0].CPUMicrosPerRequest != 1000 ||
			*p[1].CPUMicrosPerRequest != 4000 {
			t.Fatalf("processes %+v: want 1000 and 4000 µs a request", p)
		}
	})
	t.Run("a process whose CPU cannot be read leaves the server's CPU and its own unmeasured", func(t *testing.T) {
		used, ok, u := cpuOf(t, 2*time.Second, 5*time.Second, 3*time.Second) // n2's second reading fails
		if ok || used != 0 || !u[0].cpuOK || u[1].cpuOK {
			t.Fatalf("used %v, %v; usage %+v", used, ok, u)
		}
		st := &runStats{Requests: 1000}
		st.setIO(u)
		if p := st.Processes; len(p) != 2 || p[0].CPUMicrosPerRequest == nil || p[1].CPUMicrosPerRequest != nil {
			t.Fatalf("processes %+v", p)
		}
	})
	t.Run("a process whose /proc/io cannot be read measures nothing", func(t *testing.T) {
		s := newScriptedSampler(0, 0, time.Second, time.Second)
		s.ios = []ioReading{io(100, 200), io(1000, 2000), io(150, 260), {}}
		s.scrapes = []map[string]uint64{nodeScrape(1, 50), nodeScrape(5, 500), nodeScrape(1, 80), nodeScrape(6, 520)}
		u := run(t, s, nodes)
		if !u[0].ioOK || u[1].ioOK || u[1].io != (ioCounters{}) {
			t.Fatalf("usage %+v", u)
		}
		st := &runStats{Requests: 10}
		st.setIO(u)
		if st.IO != nil {
			t.Fatalf("the cluster's io %+v without every node's", st.IO)
		}
		if len(st.Processes) != 2 || st.Processes[1].ReadCalls != nil || st.Processes[1].PerRequest != nil ||
			st.Processes[0].PerRequest == nil || st.Processes[1].Syncs == nil {
			t.Fatalf("processes %+v", st.Processes)
		}
	})
	t.Run("raft messages per request, every node's, when every node counts them", func(t *testing.T) {
		withMessages := func(wal, raft, sent uint64) map[string]uint64 {
			m := nodeScrape(wal, raft)
			m[raftMessagesCounter] = sent
			return m
		}
		s := newScriptedSampler(0, 0, time.Second, time.Second)
		s.ios = []ioReading{io(1, 1), io(1, 1), io(2, 2), io(2, 2)}
		s.scrapes = []map[string]uint64{withMessages(1, 50, 100), withMessages(1, 50, 200), withMessages(1, 80, 130), withMessages(1, 80, 250)}
		st := &runStats{Requests: 10}
		st.setIO(run(t, s, nodes))
		if st.IO == nil || st.IO.RaftMessages == nil || *st.IO.RaftMessages != 8 {
			t.Fatalf("io %+v: want (30+50)/10 raft messages a request", st.IO)
		}
		s = newScriptedSampler(0, 0, time.Second, time.Second)
		s.ios = []ioReading{io(1, 1), io(1, 1), io(2, 2), io(2, 2)}
		s.scrapes = []map[string]uint64{withMessages(1, 50, 100), nodeScrape(1, 50), withMessages(1, 80, 130), nodeScrape(1, 80)}
		st = &runStats{Requests: 10}
		st.setIO(run(t, s, nodes))
		if st.IO == nil || st.IO.RaftMessages != nil {
			t.Fatalf("io %+v: a node that does not count them leaves no figure", st.IO)
		}
	})
	t.Run("a metric missing gives no sync figure rather than zero", func(t *testing.T) {
		s := newScriptedSampler(0, 0, time.Second, time.Second)
		s.ios = []ioReading{io(1, 1), io(1, 1), io(2, 2), io(2, 2)}
		old := nodeScrape(1, 50)
		delete(old, "kitd_raft_syncs_total") // a build before it
		s.scrapes = []map[string]uint64{nodeScrape(1, 50), old, nodeScrape(1, 80), old}
		u := run(t, s, nodes)
		if _, ok := u[1].syncs(); ok {
			t.Fatal("a sync figure without kitd_raft_syncs_total")
		}
		st := &runStats{Requests: 10}
		st.setIO(u)
		if st.IO == nil || st.IO.Syncs != nil || st.IO.PerSync != nil || st.Processes[0].PerRequest.Syncs == nil {
			t.Fatalf("io %+v, processes %+v", st.IO, st.Processes)
		}
	})
	t.Run("a /metrics that cannot be read gives no sync figure", func(t *testing.T) {
		s := newScriptedSampler(0, time.Second)
		s.ios = []ioReading{io(1, 1), io(2, 2)}
		s.scrapes = []map[string]uint64{nodeScrape(1, 0), nil}
		u := run(t, s, nodes[:1])
		if _, ok := u[0].syncs(); ok || !u[0].ioOK {
			t.Fatalf("usage %+v", u)
		}
	})
	t.Run("a process that is not a kitd node has no /metrics and no syncs", func(t *testing.T) {
		s := newScriptedSampler(0, time.Second)
		s.ios = []ioReading{io(1, 1), io(3, 3)}
		u := run(t, s, []watched{{name: "trivial", pid: 7}})
		if len(s.scrapes) != 0 || !u[0].ioOK || u[0].node {
			t.Fatalf("usage %+v", u)
		}
		st := &runStats{Requests: 2}
		st.setIO(u)
		if st.IO == nil || st.IO.ReadCalls != 1 || st.IO.Syncs != nil {
			t.Fatalf("io %+v", st.IO)
		}
	})
	t.Run("a pid of 0 measures nothing, one entry a process", func(t *testing.T) {
		u := procSampler().measureProcs(context.Background(), []watched{{name: "alone", pid: 0, addr: "x"}}, 0, time.Millisecond).usage()
		if len(u) != 1 || u[0].ioOK || u[0].counters != nil {
			t.Fatalf("usage %+v", u)
		}
	})
}

func TestAddUsage(t *testing.T) {
	round := func(r uint64, ok bool, wal uint64) []procUsage {
		return []procUsage{{name: "n1", node: true, io: ioCounters{ReadCalls: r}, ioOK: ok, counters: map[string]uint64{"kitd_pebble_wal_syncs_total": wal}}}
	}
	t.Run("the rounds of a run add up", func(t *testing.T) {
		u := addUsage(addUsage(nil, round(10, true, 3)), round(5, true, 4))
		if n, ok := u[0].syncs(); u[0].io.ReadCalls != 15 || !u[0].ioOK || !ok || n != 7 {
			t.Fatalf("%+v", u)
		}
	})
	t.Run("a round that could not be read spoils the run", func(t *testing.T) {
		bad := round(5, false, 0)
		bad[0].counters = nil
		u := addUsage(addUsage(nil, round(10, true, 3)), bad)
		if _, ok := u[0].syncs(); u[0].ioOK || ok {
			t.Fatalf("%+v", u)
		}
	})
}

func TestIOTableAndSummary(t *testing.T) {
	f := func(r, w, b, syncs float64) *ioFigures {
		out := &ioFigures{ReadCalls: r, WriteCalls: w, BytesWritten: b}
		if syncs > 0 {
			per := 1 / syncs
			out.Syncs, out.PerSync = &syncs, &per
		}
		return out
	}
	s := &scenarioReport{Name: "post-1000-conversations",
		Trivial: &runStats{Server: "trivial", RPS: 90000, CPUMicrosPerRequest: 10, IO: f(1, 1, 170, 0)},
		Kitd:    &runStats{Server: "kitd", RPS: 36000, CPUMicrosPerRequest: 33, IO: f(1.5, 2.25, 600, 0.03125)},
		Cluster: &runStats{Server: "cluster of 3", RPS: 6000, CPUMicrosPerRequest: 264, IO: f(12, 15.5, 2500, 0.125)}}
	messages := 4.5
	s.Cluster.IO.RaftMessages = &messages
	s.computeRatios()
	var buf bytes.Buffer
	if !writeIOTable(&buf, &report{Scenarios: []*scenarioReport{s}}) {
		t.Fatal("no table")
	}
	want := strings.Join([]string{
		"| scenario | server | read calls/req | write calls/req | bytes written/req | fdatasyncs/req | req/fdatasync |",
		"|---|---|--:|--:|--:|--:|--:|",
		"| `post-1000-conversations` | trivial | 1.00 | 1.00 | 170 | - | - |",
		"|  | kitd | 1.50 | 2.25 | 600 | 0.0312 | 32.0 |",
		"|  | cluster of 3 | 12.00 | 15.50 | 2500 | 0.1250 | 8.0 |",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	buf.Reset()
	printCluster(&buf, s)
	if got := buf.String(); !strings.Contains(got, "per post, every node together: 12.00 read + 15.50 write calls, 2500 B written, 0.1250 fdatasyncs (8.0 posts a sync), 4.50 raft messages;") ||
		!strings.Contains(got, "a node alone: 1.50 read + 2.25 write calls, 600 B written, 0.0312 fdatasyncs (32.0 posts a sync)\n") {
		t.Fatalf("summary %q", got)
	}
	t.Run("each node's share, under the nodes the load entered", func(t *testing.T) {
		cpu1, cpu2, syncs := 43.5, 28.25, 0.09
		s := &scenarioReport{Name: "post-1000-conversations", Trivial: s.Trivial, Kitd: s.Kitd, ClusterEntry: []string{"n1"},
			Cluster: &runStats{Server: "cluster of 2", Requests: 100, CPUMicrosPerRequest: cpu1 + cpu2, Processes: []processIO{
				{Name: "n1", CPUMicrosPerRequest: &cpu1, PerRequest: &ioFigures{ReadCalls: 2.43, WriteCalls: 1.44, BytesWritten: 980, Syncs: &syncs},
					Counters: map[string]uint64{raftMessagesCounter: 112, compactedCounter: 40000}},
				{Name: "n2", CPUMicrosPerRequest: &cpu2},
			}}}
		s.computeRatios()
		var buf bytes.Buffer
		printCluster(&buf, s)
		want := strings.Join([]string{
			"each node's share of a post (the connections entered n1):",
			"",
			"| node | CPU/post | read calls/post | write calls/post | bytes written/post | of them compacted | fdatasyncs/post | raft messages/post |",
			"|---|--:|--:|--:|--:|--:|--:|--:|",
			"| n1 | 43.5 µs | 2.43 | 1.44 | 980 | 400 | 0.0900 | 1.12 |",
			"| n2 | 28.2 µs | - | - | - | - | - | - |",
			"",
		}, "\n")
		if got := buf.String(); !strings.HasSuffix(got, want) {
			t.Fatalf("got\n%s\nwant it to end with\n%s", got, want)
		}
	})
	t.Run("no figures, no table and no line", func(t *testing.T) {
		for _, st := range s.runs() {
			st.IO = nil
		}
		buf.Reset()
		if writeIOTable(&buf, &report{Scenarios: []*scenarioReport{s}}) || buf.Len() > 0 {
			t.Fatalf("wrote %q", buf.String())
		}
		printCluster(&buf, s)
		if strings.Contains(buf.String(), "per post") {
			t.Fatalf("summary %q", buf.String())
		}
	})
	t.Run("the JSON report has them, a missing sync figure absent", func(t *testing.T) {
		st := &runStats{Requests: 4}
		st.setIO([]procUsage{{name: "n1", pid: 9, node: true, io: ioCounters{ReadCalls: 8, WriteCalls: 4, BytesWritten: 400}, ioOK: true}})
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		got := string(data)
		for _, want := range []string{`"io":{"readCallsPerRequest":2,"writeCallsPerRequest":1,"bytesReadPerRequest":0,"bytesWrittenPerRequest":100}`,
			`"processes":[{"name":"n1","pid":9,"readCalls":8,"writeCalls":4,"bytesRead":0,"bytesWritten":400,"perRequest":`} {
			if !strings.Contains(got, want) {
				t.Errorf("JSON %s lacks %s", got, want)
			}
		}
		if strings.Contains(got, "syncs") {
			t.Errorf("JSON %s has a sync figure without the counters", got)
		}
	})
}
