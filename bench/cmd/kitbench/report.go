package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

// runStats is one server's figures for one scenario.
type runStats struct {
	Server   string            `json:"server"`
	Addr     string            `json:"addr"`
	Requests uint64            `json:"requests"`
	Errors   uint64            `json:"errors"`
	Status   map[string]uint64 `json:"status"`
	// ErrorsByCode counts the answers that were not 2xx by status
	// ("transport": no answer). In the mixed scenario a 429 is an expected
	// answer, judged by the limit checks instead (scenarioReport.Limits).
	ErrorsByCode map[string]uint64 `json:"errorsByCode,omitempty"`
	RPS          float64           `json:"rps"`
	P50Ms        float64           `json:"p50Ms"`
	P90Ms        float64           `json:"p90Ms"`
	P99Ms        float64           `json:"p99Ms"`
	P999Ms       float64           `json:"p999Ms"`
	MaxMs        float64           `json:"maxMs"`
	MeanMs       float64           `json:"meanMs"`
	RespBytes    float64           `json:"meanResponseBytes"`
	ElapsedSec   float64           `json:"elapsedSeconds"`
	// CPUMicrosPerRequest is the server process's CPU time (user and
	// system, from /proc) over the measured windows per request served; 0
	// when it could not be measured (no /proc, or a trivial server inside
	// kitbench). It moves less with the neighbours' load than req/s.
	CPUMicrosPerRequest float64 `json:"cpuMicrosPerRequest,omitempty"`
	// IO is the read and write system calls, bytes and fdatasyncs per
	// request over the measured windows, of every process of the server
	// together (syscalls.go); nil when any could not be read. Like the
	// CPU, they move less with the neighbours' load than req/s.
	IO *ioFigures `json:"io,omitempty"`
	// Processes are each process's counts (a cluster: each node's), with
	// its own figures per request.
	Processes   []processIO      `json:"processes,omitempty"`
	FirstErrors []loadgen.Sample `json:"firstErrors,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func statsOf(server string, r *loadgen.Result) *runStats {
	st := &runStats{
		Server:      server,
		Addr:        r.Addr,
		Requests:    r.OK,
		Errors:      r.Errors,
		Status:      map[string]uint64{},
		RPS:         r.RPS(),
		P50Ms:       ms(r.Latency.Quantile(0.50)),
		P90Ms:       ms(r.Latency.Quantile(0.90)),
		P99Ms:       ms(r.Latency.Quantile(0.99)),
		P999Ms:      ms(r.Latency.Quantile(0.999)),
		MaxMs:       ms(r.Latency.Max()),
		MeanMs:      ms(r.Latency.Mean()),
		RespBytes:   r.MeanRespBytes(),
		ElapsedSec:  r.Elapsed.Seconds(),
		FirstErrors: r.FirstErrors,
	}
	for code, n := range r.Status {
		key := fmt.Sprint(code)
		if code == 0 {
			key = "transport"
		}
		st.Status[key] = n
		if code < 200 || code > 299 {
			if st.ErrorsByCode == nil {
				st.ErrorsByCode = map[string]uint64{}
			}
			st.ErrorsByCode[key] = n
		}
	}
	return st
}

// ratios compare kitd with the trivial server of the same scenario.
type ratios struct {
	RPS float64 `json:"rps"` // kitd req/s ÷ trivial req/s
	P50 float64 `json:"p50"` // kitd p50 ÷ trivial p50
	P99 float64 `json:"p99"` // kitd p99 ÷ trivial p99
	// P999 is kitd p99.9 ÷ trivial p99.9.
	P999 float64 `json:"p999"`
	// CPU is trivial CPU per request ÷ kitd CPU per request (0 when either
	// is unknown): like RPS, the share of the trivial handler's efficiency
	// that kitd reaches.
	CPU float64 `json:"cpu,omitempty"`
}

type scenarioReport struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Trivial     *runStats `json:"trivial"`
	Kitd        *runStats `json:"kitd"`
	Ratio       ratios    `json:"ratio"`
	// Cluster is the same stream on the nodes of -cluster, spread over
	// them; its CPU is that of every node's process together.
	Cluster      *runStats      `json:"cluster,omitempty"`
	ClusterRatio *clusterRatios `json:"clusterRatio,omitempty"`
	// ClusterEntry names the nodes the cluster's connections entered
	// (-cluster-entry), spread over them round-robin.
	ClusterEntry []string `json:"clusterEntry,omitempty"`
	// Limits holds the rate-limit checks of a scenario run with limits on.
	Limits *limitsReport `json:"limits,omitempty"`
	// Events holds the events scenario's figures (events.go); its Trivial
	// is nil: it compares kitd with and without a subscriber.
	Events *eventsReport `json:"events,omitempty"`
}

// runs are the scenario's runs, in the table's order.
func (s *scenarioReport) runs() []*runStats {
	var out []*runStats
	for _, st := range []*runStats{s.Trivial, s.events().Plain, s.Kitd, s.Cluster} {
		if st != nil {
			out = append(out, st)
		}
	}
	return out
}

func (s *scenarioReport) events() *eventsReport {
	if s.Events == nil {
		return &eventsReport{}
	}
	return s.Events
}

// errors counts the failed requests of every run, and the events that
// never arrived.
func (s *scenarioReport) errors() uint64 {
	var n uint64
	for _, st := range s.runs() {
		n += st.Errors
	}
	return n + s.events().Missing
}

type report struct {
	StartedAt   time.Time `json:"startedAt"`
	Concurrency int       `json:"concurrency"`
	DurationSec float64   `json:"durationSeconds"`
	WarmupSec   float64   `json:"warmupSeconds"`
	Rounds      int       `json:"rounds"`
	// Rate is the open-loop arrival rate per second; 0 for closed loops.
	Rate        float64           `json:"rate,omitempty"`
	Machine     map[string]string `json:"machine"`
	Kitd        string            `json:"kitd"`
	Trivial     string            `json:"trivial"` // where the trivial server ran (-trivial)
	Setup       map[string]any    `json:"setup"`
	Scenarios   []*scenarioReport `json:"scenarios"`
	TotalErrors uint64            `json:"totalErrors"`
	// LimitViolations counts what the limit checks found wrong.
	LimitViolations int `json:"limitViolations"`
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// clusterRatios compare the cluster with the node alone and with the
// trivial server of the same scenario.
type clusterRatios struct {
	// OfAlone is cluster ÷ node alone for every figure, CPU per request
	// included (docs/cluster.md "Goals": at most 2.5).
	OfAlone ratios `json:"ofAlone"`
	// OfTrivial is as Ratio, with the cluster in kitd's place: its CPU is
	// trivial's CPU per request ÷ the cluster's.
	OfTrivial ratios `json:"ofTrivial"`
}

// ratiosOf is a ÷ b for every figure; the CPU ratio, b's ÷ a's when
// cpuShare, else a's ÷ b's.
func ratiosOf(a, b *runStats, cpuShare bool) ratios {
	r := ratios{
		RPS:  div(a.RPS, b.RPS),
		P50:  div(a.P50Ms, b.P50Ms),
		P99:  div(a.P99Ms, b.P99Ms),
		P999: div(a.P999Ms, b.P999Ms),
		CPU:  div(a.CPUMicrosPerRequest, b.CPUMicrosPerRequest),
	}
	if cpuShare {
		r.CPU = div(b.CPUMicrosPerRequest, a.CPUMicrosPerRequest)
	}
	return r
}

func (s *scenarioReport) computeRatios() {
	if s.Trivial == nil || s.Kitd == nil {
		return
	}
	s.Ratio = ratiosOf(s.Kitd, s.Trivial, true)
	if s.Cluster != nil {
		s.ClusterRatio = &clusterRatios{OfAlone: ratiosOf(s.Cluster, s.Kitd, false), OfTrivial: ratiosOf(s.Cluster, s.Trivial, true)}
	}
}

func machineInfo() map[string]string {
	host, _ := os.Hostname()
	return map[string]string{
		"goos":       runtime.GOOS,
		"goarch":     runtime.GOARCH,
		"numCPU":     fmt.Sprint(runtime.NumCPU()),
		"gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)),
		"goVersion":  runtime.Version(),
		"hostname":   host,
	}
}

func fmtDur(msv float64) string {
	d := time.Duration(msv * float64(time.Millisecond))
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", msv)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", msv)
	default:
		return fmt.Sprintf("%.0fµs", msv*1000)
	}
}

// printTable writes the human report: a heading, the figures as a
// Markdown table (readable as is in a terminal, and pasted as is into a
// README), the scenarios' descriptions, the limit checks, and any errors.
func printTable(w io.Writer, r *report) {
	rounds := ""
	if r.Rounds > 1 {
		rounds = fmt.Sprintf(" in %d alternating rounds", r.Rounds)
	}
	load := fmt.Sprintf("%d connections in closed loops", r.Concurrency)
	if r.Rate > 0 {
		load = fmt.Sprintf("open loop at %.0f requests/s over %d connections (latency from each request's due time)", r.Rate, r.Concurrency)
	}
	fmt.Fprintf(w, "\nkitbench: %s, %v per scenario and server%s (after %v warm-up), GOMAXPROCS=%s of %s CPUs, %s\n",
		load, time.Duration(r.DurationSec*float64(time.Second)), rounds, time.Duration(r.WarmupSec*float64(time.Second)),
		r.Machine["gomaxprocs"], r.Machine["numCPU"], r.Machine["goVersion"])
	where := "fasthttp handler in its own process"
	if r.Trivial == trivialInProcess {
		where = "fasthttp handler inside kitbench"
	}
	fmt.Fprintf(w, "kitd: %s (limits off, except where a scenario says on); trivial: %s; all share the same CPUs\n\n", r.Kitd, where)
	writeMarkdown(w, r)
	fmt.Fprintln(w)
	if writeIOTable(w, r) {
		fmt.Fprintln(w)
	}
	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "  %-24s %s\n", s.Name, s.Description)
	}
	fmt.Fprintln(w)
	for _, s := range r.Scenarios {
		if s.Limits != nil {
			s.Limits.print(w, s.Name)
		}
		if s.Events != nil {
			s.Events.print(w, s)
		}
		if s.ClusterRatio != nil {
			printCluster(w, s)
		}
	}
	if r.TotalErrors > 0 {
		printErrors(w, r)
	}
}

// writeMarkdown writes the figures as a Markdown table: one row per
// scenario and server, then the kitd÷trivial ratios.
func writeMarkdown(w io.Writer, r *report) {
	fmt.Fprintln(w, "| scenario | server | req/s | p50 | p99 | p99.9 | errors by code | CPU/req |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|---|--:|")
	for _, s := range r.Scenarios {
		name := "`" + s.Name + "`"
		for _, st := range s.runs() {
			cpu := "-"
			if st.CPUMicrosPerRequest > 0 {
				cpu = fmt.Sprintf("%.1f µs", st.CPUMicrosPerRequest)
			}
			fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %s |\n", name, st.Server, st.RPS,
				fmtDur(st.P50Ms), fmtDur(st.P99Ms), fmtDur(st.P999Ms), errorCell(st), cpu)
			name = ""
		}
		if s.Trivial != nil && s.Kitd != nil {
			ratioRow(w, "kitd÷trivial", s.Ratio, "%.3f")
		}
		if c := s.ClusterRatio; c != nil {
			ratioRow(w, "cluster÷trivial", c.OfTrivial, "%.3f")
			ratioRow(w, "cluster÷kitd", c.OfAlone, "%.2fx")
		}
	}
}

// ratioRow writes a row of ratios, the CPU ratio in cpuFormat.
func ratioRow(w io.Writer, name string, r ratios, cpuFormat string) {
	cpu := "-"
	if r.CPU > 0 {
		cpu = fmt.Sprintf(cpuFormat, r.CPU)
	}
	fmt.Fprintf(w, "| | %s | %.3f | %.2fx | %.2fx | %.2fx | | %s |\n", name, r.RPS, r.P50, r.P99, r.P999, cpu)
}

// printCluster says in words what the cluster rows of s mean.
func printCluster(w io.Writer, s *scenarioReport) {
	c, cl, alone := s.ClusterRatio, s.Cluster, s.Kitd
	fmt.Fprintf(w, "%s on the %s: CPU per acknowledged post %.1f µs, every node's process together = %.2fx a node alone's %.1f µs (goal ≤ 2.5x);\n",
		s.Name, cl.Server, cl.CPUMicrosPerRequest, c.OfAlone.CPU, alone.CPUMicrosPerRequest)
	fmt.Fprintf(w, "  %.0f posts/s = %.3f of a node alone's %.0f (goal ≥ 0.40), %.3f of trivial's; p50 %s, p99 %s (goal ≤ 15ms)\n",
		cl.RPS, c.OfAlone.RPS, alone.RPS, c.OfTrivial.RPS, fmtDur(cl.P50Ms), fmtDur(cl.P99Ms))
	if cl.IO != nil || alone.IO != nil {
		fmt.Fprintf(w, "  per post, every node together: %s;\n  a node alone: %s\n", ioPhrase(cl.IO), ioPhrase(alone.IO))
	}
	writeNodeTable(w, s)
}

// writeNodeTable writes, per acknowledged post, each node's share of the
// cluster's figures as a Markdown table, under a line naming the nodes
// the connections entered: with every post entering one node, its row is
// the receiving node's cost and the others' a replica's (docs/cluster.md
// "Speed, and a model of N machines").
func writeNodeTable(w io.Writer, s *scenarioReport) {
	procs := s.Cluster.Processes
	if len(procs) == 0 {
		return
	}
	fmt.Fprintf(w, "\neach node's share of a post (the connections entered %s):\n\n", strings.Join(s.ClusterEntry, ", "))
	fmt.Fprintln(w, "| node | CPU/post | read calls/post | write calls/post | bytes written/post | of them compacted | fdatasyncs/post | raft messages/post |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, p := range procs {
		cells := []string{optional("%.1f µs", p.CPUMicrosPerRequest), "-", "-", "-", "-", "-", "-"}
		if f := p.PerRequest; f != nil {
			cells[1], cells[2], cells[3], cells[5] = fmt.Sprintf("%.2f", f.ReadCalls), fmt.Sprintf("%.2f", f.WriteCalls),
				fmt.Sprintf("%.0f", f.BytesWritten), optional("%.4f", f.Syncs)
		}
		perPost := func(counter string) (float64, bool) {
			n, ok := p.Counters[counter]
			if !ok || s.Cluster.Requests == 0 {
				return 0, false
			}
			return float64(n) / float64(s.Cluster.Requests), true
		}
		// A compaction inside the window or not is most of the spread of
		// the bytes written from one run to the next.
		if c, ok := perPost(compactedCounter); ok {
			cells[4] = fmt.Sprintf("%.0f", c)
		}
		if m, ok := perPost(raftMessagesCounter); ok {
			cells[6] = fmt.Sprintf("%.2f", m)
		}
		fmt.Fprintf(w, "| %s | %s |\n", p.Name, strings.Join(cells, " | "))
	}
}

// writeIOTable writes, when any run has them, the system calls, bytes
// written and fdatasyncs per request of each scenario and server (every
// process of a server together) as a Markdown table, and says whether
// it wrote one.
func writeIOTable(w io.Writer, r *report) bool {
	some := false
	for _, s := range r.Scenarios {
		for _, st := range s.runs() {
			some = some || st.IO != nil
		}
	}
	if !some {
		return false
	}
	fmt.Fprintln(w, "| scenario | server | read calls/req | write calls/req | bytes written/req | fdatasyncs/req | req/fdatasync |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|")
	for _, s := range r.Scenarios {
		name := "`" + s.Name + "`"
		for _, st := range s.runs() {
			f := st.IO
			if f == nil {
				fmt.Fprintf(w, "| %s | %s | - | - | - | - | - |\n", name, st.Server)
			} else {
				fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %.0f | %s | %s |\n", name, st.Server, f.ReadCalls, f.WriteCalls,
					f.BytesWritten, optional("%.4f", f.Syncs), optional("%.1f", f.PerSync))
			}
			name = ""
		}
	}
	return true
}

// optional formats *v, or "-" when there is none.
func optional(format string, v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// ioPhrase says f in words: "-" when there is none.
func ioPhrase(f *ioFigures) string {
	if f == nil {
		return "-"
	}
	phrase := fmt.Sprintf("%.2f read + %.2f write calls, %.0f B written, %s fdatasyncs (%s posts a sync)",
		f.ReadCalls, f.WriteCalls, f.BytesWritten, optional("%.4f", f.Syncs), optional("%.1f", f.PerSync))
	if f.RaftMessages != nil {
		phrase += fmt.Sprintf(", %.2f raft messages", *f.RaftMessages)
	}
	return phrase
}

// errorCell lists the non-2xx answers by code, most frequent first, with
// "!!" in front when any of them counts as an error.
func errorCell(st *runStats) string {
	if len(st.ErrorsByCode) == 0 {
		return "0"
	}
	codes := make([]string, 0, len(st.ErrorsByCode))
	for k := range st.ErrorsByCode {
		codes = append(codes, k)
	}
	sort.Slice(codes, func(i, j int) bool {
		a, b := st.ErrorsByCode[codes[i]], st.ErrorsByCode[codes[j]]
		return a > b || a == b && codes[i] < codes[j]
	})
	parts := make([]string, len(codes))
	for i, k := range codes {
		parts[i] = fmt.Sprintf("%s×%d", k, st.ErrorsByCode[k])
	}
	cell := strings.Join(parts, " ")
	if st.Errors > 0 {
		cell = "!! " + cell
	}
	return cell
}

// printErrors shouts about failed requests and shows a few of them.
func printErrors(w io.Writer, r *report) {
	bar := strings.Repeat("!", 72)
	fmt.Fprintf(w, "%s\n!! %d REQUESTS FAILED: the figures above are NOT valid\n%s\n", bar, r.TotalErrors, bar)
	for _, s := range r.Scenarios {
		for _, st := range s.runs() {
			if st.Errors == 0 {
				continue
			}
			codes := make([]string, 0, len(st.Status))
			for k, v := range st.Status {
				codes = append(codes, fmt.Sprintf("%s×%d", k, v))
			}
			sort.Strings(codes)
			fmt.Fprintf(w, "%s on %s: %d errors (status %s)\n", s.Name, st.Server, st.Errors, strings.Join(codes, ", "))
			shown := map[string]bool{}
			for _, e := range st.FirstErrors {
				key := fmt.Sprint(e.Status, e.Err, correlationRE.ReplaceAllString(e.Answer, ""))
				if shown[key] {
					continue
				}
				shown[key] = true
				fmt.Fprintf(w, "  %s %s %s\n", e.Method, e.URI, e.Body)
				if e.Err != "" {
					fmt.Fprintf(w, "    -> %s\n", e.Err)
				} else {
					fmt.Fprintf(w, "    -> %d %s\n", e.Status, e.Answer)
				}
			}
		}
	}
	fmt.Fprintln(w)
}

// correlationRE strips the per-request part of an error body so that
// identical failures are shown once.
var correlationRE = regexp.MustCompile(`"correlationId"\s*:\s*"[^"]*"`)

func writeJSON(path string, r *report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
