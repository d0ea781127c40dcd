package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

func TestClusterOptionsNarrowTheRun(t *testing.T) {
	full := options{conversations: 1000, seed: 200, webhooks: 1000, pageLimit: 20, mixed: 20, events: true}
	with := func(cluster int, only string) options {
		o := full
		o.cluster, o.only = cluster, only
		return o
	}
	for _, tc := range []struct {
		name       string
		in         options
		wantOnly   string
		wantEvents bool
		wantSetUp  bool // seeded messages, webhooks, pages and the mixed node kept
	}{
		{"a cluster runs the write load by default", with(3, ""), "post-1000-conversations", false, false},
		{"a cluster runs the write load instead of another scenario", with(3, "get-history"), "post-1000-conversations", false, false},
		{"a cluster runs the events scenario when -only names it", with(3, "events-1000-conversations"), "events-1000-conversations", true, false},
		{"an events scenario of other conversations is not it", with(3, "events-10-conversations"), "post-1000-conversations", false, false},
		{"without -cluster nothing changes", with(0, "get"), "get", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := clusterOptions(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			setUp := o.seed != 0 && o.webhooks != 0 && o.pageLimit != 0 && o.mixed != 0
			noSetUp := o.seed == 0 && o.webhooks == 0 && o.pageLimit == 0 && o.mixed == 0
			if o.only != tc.wantOnly || o.events != tc.wantEvents || tc.wantSetUp && !setUp || !tc.wantSetUp && !noSetUp {
				t.Fatalf("options %+v: want only %q, events %v, set-up kept %v", o, tc.wantOnly, tc.wantEvents, tc.wantSetUp)
			}
		})
	}
}

func TestClusterOptionsRefuse(t *testing.T) {
	with := func(cluster, entry int, only string) options {
		return options{conversations: 1000, cluster: cluster, clusterEntry: entry, only: only}
	}
	for _, tc := range []struct {
		name string
		in   options
		want string
	}{
		{"a cluster of one", with(1, 0, ""), "-cluster must be at least 2"},
		{"an entry without a cluster", with(0, 1, ""), "-cluster-entry needs -cluster"},
		{"more entry nodes than nodes", with(3, 4, ""), "-cluster-entry must be 0 (every node) to -cluster (3)"},
		{"a negative entry", with(3, -1, ""), "-cluster-entry must be 0"},
		{"an entry for the events scenario", with(3, 1, "events-1000-conversations"), "-cluster-entry is for the write load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := clusterOptions(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestClusterTargetSpreadsOverItsEntryNodes(t *testing.T) {
	c := &benchCluster{names: []string{"n1", "n2", "n3"}}
	for i, a := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		c.nodes = append(c.nodes, &benchNode{addr: a, proc: &kitdProc{cmd: &exec.Cmd{Process: &os.Process{Pid: 100 + i}}}})
	}
	for _, tc := range []struct {
		name  string
		entry int
		addrs string
	}{
		{"by default over every node", 0, "127.0.0.1:1 127.0.0.1:2 127.0.0.1:3"},
		{"-cluster-entry 1: every connection into the first", 1, "127.0.0.1:1"},
		{"-cluster-entry 2: over the first two", 2, "127.0.0.1:1 127.0.0.1:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.entry = tc.entry
			tg := c.target(loadgen.Scenario{Name: "post"})
			if tg.server != "cluster of 3" || strings.Join(tg.addrs, " ") != tc.addrs ||
				len(tg.pids) != 3 || tg.pids[0] != 100 || tg.pids[2] != 102 || len(tg.nodes) != 3 || tg.sc.Name != "post" {
				t.Fatalf("target %+v", tg)
			}
			if got, want := strings.Join(c.entryNames(), " "), strings.Join(c.names[:len(tg.addrs)], " "); got != want {
				t.Fatalf("entry names %q, want %q", got, want)
			}
		})
	}
}

func TestClusterRatiosAndRows(t *testing.T) {
	h := &loadgen.Histogram{}
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * 10 * time.Microsecond)
	}
	stats := func(server string, ok uint64, cpu float64) *runStats {
		st := statsOf(server, &loadgen.Result{Elapsed: time.Second, OK: ok, Status: map[int]uint64{201: ok}, Latency: h})
		st.CPUMicrosPerRequest = cpu
		return st
	}
	s := &scenarioReport{Name: "post-1000-conversations", Trivial: stats("trivial", 90000, 10),
		Kitd: stats("kitd", 36000, 33), Cluster: stats("cluster of 3", 6000, 264)}
	s.computeRatios()
	c := s.ClusterRatio
	if c == nil || c.OfAlone.CPU != 8 || c.OfAlone.RPS != 6000.0/36000 || c.OfTrivial.RPS != 6000.0/90000 ||
		c.OfTrivial.CPU != 10.0/264 || c.OfAlone.P99 != 1 {
		t.Fatalf("cluster ratios %+v", c)
	}
	if (&scenarioReport{Trivial: s.Trivial, Kitd: s.Kitd}).ClusterRatio != nil {
		t.Fatal("cluster ratios without a cluster")
	}
	var buf bytes.Buffer
	writeMarkdown(&buf, &report{Scenarios: []*scenarioReport{s}})
	want := strings.Join([]string{
		"| scenario | server | req/s | p50 | p99 | p99.9 | errors by code | CPU/req |",
		"|---|---|--:|--:|--:|--:|---|--:|",
		"| `post-1000-conversations` | trivial | 90000 | 501µs | 989µs | 1.00ms | 0 | 10.0 µs |",
		"|  | kitd | 36000 | 501µs | 989µs | 1.00ms | 0 | 33.0 µs |",
		"|  | cluster of 3 | 6000 | 501µs | 989µs | 1.00ms | 0 | 264.0 µs |",
		"| | kitd÷trivial | 0.400 | 1.00x | 1.00x | 1.00x | | 0.303 |",
		"| | cluster÷trivial | 0.067 | 1.00x | 1.00x | 1.00x | | 0.038 |",
		"| | cluster÷kitd | 0.167 | 1.00x | 1.00x | 1.00x | | 8.00x |",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	buf.Reset()
	printCluster(&buf, s)
	if got := buf.String(); !strings.Contains(got, "264.0 µs") || !strings.Contains(got, "8.00x a node alone's 33.0 µs") ||
		!strings.Contains(got, "0.167 of a node alone's 36000") {
		t.Fatalf("summary %q", got)
	}
}

// TestStartKitdReadsGossipAddress: a member of a cluster is ready once it
// printed its gossip address as well as its HTTP one.
func TestStartKitdReadsGossipAddress(t *testing.T) {
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	p, err := startKitd(t.Context(), os.Args[0], filepath.Join(t.TempDir(), "n1"), "off",
		[]string{"--node-name", "n1", "--cluster-key", "k", "--cluster-bind", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(5 * time.Second)
	if p.Addr == "" || p.Gossip != "127.0.0.1:7946" {
		t.Fatalf("addr %q, gossip %q", p.Addr, p.Gossip)
	}
}

// TestRunClusterWithKitd runs -cluster 2 on real kitd nodes (KITD_BIN; the
// fake kitd has no cluster): the cluster row, its CPU, system calls,
// fdatasyncs (from each node's /metrics) and ratios, and a
// profile of every node.
//
//	make build && KITD_BIN=$PWD/bin/kitd go test ./bench/cmd/kitbench/ -run TestRunClusterWithKitd
func TestRunClusterWithKitd(t *testing.T) {
	bin := os.Getenv("KITD_BIN")
	if bin == "" {
		t.Skip("KITD_BIN not set")
	}
	for _, entry := range []int{0, 1} {
		t.Run(fmt.Sprintf("entry %d", entry), func(t *testing.T) { runClusterWithKitd(t, bin, entry) })
	}
}

func runClusterWithKitd(t *testing.T, bin string, entry int) {
	prof := t.TempDir()
	rep, data, code, err := runReport(t, options{
		kitd: bin, cluster: 2, clusterEntry: entry, pprofDir: prof, concurrency: 4, duration: time.Second, warmup: 200 * time.Millisecond,
		timeout: 10 * time.Second, conversations: 10, rounds: 1, settle: time.Second, trivial: trivialProcess,
	})
	if err != nil || code != 0 {
		t.Fatalf("run: code %d, %v", code, err)
	}
	if len(rep.Scenarios) != 1 {
		t.Fatalf("report %s", data)
	}
	s := rep.Scenarios[0]
	if s.Name != "post-10-conversations" || s.Cluster == nil || s.Cluster.Server != "cluster of 2" || s.Cluster.Requests == 0 ||
		s.Cluster.CPUMicrosPerRequest <= 0 || s.ClusterRatio == nil || s.ClusterRatio.OfAlone.CPU <= 0 {
		t.Fatalf("report %s", data)
	}
	if f := s.Cluster.IO; f == nil || f.WriteCalls <= 0 || f.BytesWritten <= 0 || f.Syncs == nil || *f.Syncs <= 0 {
		t.Errorf("cluster io %+v: want system calls and fdatasyncs per post", f)
	}
	if f := s.Kitd.IO; f == nil || f.Syncs == nil || *f.Syncs <= 0 {
		t.Errorf("node alone io %+v: want its WAL syncs per post", f)
	}
	if p := s.Cluster.Processes; len(p) != 2 || p[0].Name != "n1" || p[1].Name != "n2" || p[0].Syncs == nil ||
		p[0].Counters["kitd_raft_cycles_total"] == 0 || p[0].CPUMicrosPerRequest == nil || p[1].CPUMicrosPerRequest == nil {
		t.Errorf("cluster processes %+v: want each node's counts and CPU", p)
	} else if sum := *p[0].CPUMicrosPerRequest + *p[1].CPUMicrosPerRequest; math.Abs(sum-s.Cluster.CPUMicrosPerRequest) > 0.01*sum {
		t.Errorf("the nodes' CPU per post adds up to %.2f µs, the cluster's is %.2f", sum, s.Cluster.CPUMicrosPerRequest)
	}
	want, entered := 1, "n1 n2"
	if entry == 1 {
		want, entered = 0, "n1"
	}
	if n := strings.Count(s.Cluster.Addr, ","); n != want || strings.Join(s.ClusterEntry, " ") != entered {
		t.Errorf("cluster load went to %q (%v), want %s", s.Cluster.Addr, s.ClusterEntry, entered)
	}
	for _, name := range []string{"alone", "n1", "n2"} {
		if fi, err := os.Stat(filepath.Join(prof, name+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("profile of %s: %v", name, err)
		}
	}
}

// TestRunClusterEventsWithKitd runs the events scenario on a cluster of 2
// real kitd nodes (KITD_BIN), and on a node alone: every event arrives,
// both sides' CPU is every node's, and each side's window is profiled on
// every node.
//
//	make build && KITD_BIN=$PWD/bin/kitd go test ./bench/cmd/kitbench/ -run TestRunClusterEventsWithKitd
func TestRunClusterEventsWithKitd(t *testing.T) {
	bin := os.Getenv("KITD_BIN")
	if bin == "" {
		t.Skip("KITD_BIN not set")
	}
	for _, tc := range []struct {
		name  string
		nodes int
		names []string
	}{
		{"cluster of 2", 2, []string{"n1", "n2"}},
		{"node alone", 0, []string{"alone"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runEventsWithKitd(t, bin, tc.nodes, tc.names) })
	}
}

func runEventsWithKitd(t *testing.T, bin string, cluster int, names []string) {
	prof := t.TempDir()
	o, err := clusterOptions(options{
		kitd: bin, cluster: cluster, pprofDir: prof, only: "events-10-conversations", events: true, eventInstallations: 2,
		concurrency: 4, duration: time.Second, warmup: 200 * time.Millisecond,
		timeout: 10 * time.Second, conversations: 10, rounds: 1, settle: time.Second, trivial: trivialProcess,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, data, code, err := runReport(t, o)
	if err != nil || code != 0 {
		t.Fatalf("run: code %d, %v", code, err)
	}
	if len(rep.Scenarios) != 1 || rep.Scenarios[0].Events == nil {
		t.Fatalf("report %s", data)
	}
	s := rep.Scenarios[0]
	if e := s.Events; e.Nodes != len(names) || e.Posts == 0 || e.Missing != 0 || e.Plain.CPUMicrosPerRequest <= 0 ||
		s.Kitd.CPUMicrosPerRequest <= 0 || s.Cluster != nil {
		t.Fatalf("report %s", data)
	}
	if st := s.Events.Store; st == nil || st.WAL <= 0 || s.Events.PlainStore == nil || s.Events.PlainStore.WAL <= 0 {
		t.Errorf("store bytes %+v / %+v: want both sides' WAL bytes per post", st, s.Events.PlainStore)
	}
	if n := strings.Count(s.Kitd.Addr, ","); n != len(names)-1 {
		t.Errorf("subscribed load went to %q, want every node of %v", s.Kitd.Addr, names)
	}
	for _, name := range names {
		for _, side := range []string{"plain", "subscribed"} {
			file := name + "-" + side + "-round1.pprof"
			if fi, err := os.Stat(filepath.Join(prof, file)); err != nil || fi.Size() == 0 {
				t.Errorf("profile %s: %v", file, err)
			}
		}
	}
}
