package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// What a write costs the kernel (issue 27, bench/README.md "Three nodes"):
// on a loaded machine the read and write system calls (each may wake
// another process) and the fdatasyncs say more than req/s, so the CPU
// window samples them too: each process's /proc/<pid>/io, and each kitd
// node's sync counters on /metrics.

// ioCounters are a process's read and write system calls and the bytes
// they moved (/proc/<pid>/io: syscr, syscw, rchar, wchar; sockets and
// pipes included, the page cache not told apart from the disk).
type ioCounters struct {
	ReadCalls, WriteCalls, BytesRead, BytesWritten uint64
}

func (a ioCounters) sub(b ioCounters) ioCounters {
	return ioCounters{a.ReadCalls - b.ReadCalls, a.WriteCalls - b.WriteCalls, a.BytesRead - b.BytesRead, a.BytesWritten - b.BytesWritten}
}

func (a ioCounters) add(b ioCounters) ioCounters {
	return ioCounters{a.ReadCalls + b.ReadCalls, a.WriteCalls + b.WriteCalls, a.BytesRead + b.BytesRead, a.BytesWritten + b.BytesWritten}
}

// procIO reads /proc/<pid>/io; ok is false when it cannot be read (no
// /proc, another user's process) or lacks one of the four counters.
func procIO(pid int) (ioCounters, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return ioCounters{}, false
	}
	return parseProcIO(data)
}

func parseProcIO(data []byte) (ioCounters, bool) {
	var c ioCounters
	fields := map[string]*uint64{"syscr": &c.ReadCalls, "syscw": &c.WriteCalls, "rchar": &c.BytesRead, "wchar": &c.BytesWritten}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		p := fields[name]
		if !ok || p == nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return ioCounters{}, false
		}
		*p = n
		found++
	}
	if found != len(fields) {
		return ioCounters{}, false
	}
	return c, true
}

// syncCounters are the counters of a kitd node's /metrics the window reads:
// the fdatasyncs (the store's WAL, and the raft log of a node with raft
// groups), what the raft driver wrote in its cycles, the raft messages it
// sent, and the bytes the store wrote (storeCounters).
var syncCounters = append([]string{
	"kitd_pebble_wal_syncs_total",
	"kitd_raft_syncs_total",
	"kitd_raft_cycles_total",
	"kitd_raft_groups_written_total",
	raftMessagesCounter,
}, storeCounters[:]...)

// storeCounters are the bytes a node's store writes: into its WAL, by its
// flushes, by its compactions. What a post costs the store beyond its
// commit is mostly the last.
var storeCounters = [...]string{
	"kitd_pebble_wal_bytes_written_total",
	"kitd_pebble_flush_bytes_written_total",
	compactedCounter,
}

// compactedCounter is the bytes a node's compactions wrote.
const compactedCounter = "kitd_pebble_compaction_bytes_written_total"

// raftMessagesCounter is a node's raft messages sent to its peers: what
// replication says between nodes, per post.
const raftMessagesCounter = "kitd_raft_messages_sent_total"

// nodeMetrics reads syncCounters from the /metrics of the kitd node at
// addr; ok is false when it could not be read. A counter the node does not
// export is absent from the map.
func nodeMetrics(ctx context.Context, addr, token string) (map[string]uint64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	m := map[string]uint64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		parseCounter(sc.Text(), m)
	}
	return m, sc.Err() == nil
}

// parseCounter adds to m the series of line when it is one of
// syncCounters, unlabelled, with a whole value.
func parseCounter(line string, m map[string]uint64) {
	name, value, ok := strings.Cut(line, " ")
	if !ok {
		return
	}
	for _, want := range syncCounters {
		if name != want {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && f >= 0 {
			m[name] = uint64(f)
		}
	}
}

// syncsOf is a node's fdatasyncs from the deltas of its counters: its
// store's WAL syncs, plus, on a node with raft groups (it exports
// kitd_raft_cycles_total), its raft log's. ok is false when a counter it
// needs is missing (a build before kitd_raft_syncs_total): no figure
// rather than one that leaves syncs out.
func syncsOf(counters map[string]uint64) (uint64, bool) {
	wal, ok := counters["kitd_pebble_wal_syncs_total"]
	if !ok {
		return 0, false
	}
	if _, raft := counters["kitd_raft_cycles_total"]; !raft {
		return wal, true
	}
	rs, ok := counters["kitd_raft_syncs_total"]
	if !ok {
		return 0, false
	}
	return wal + rs, true
}

// procSample is one process read at one instant.
type procSample struct {
	cpu      time.Duration // user and system time so far
	cpuOK    bool
	io       ioCounters
	ioOK     bool
	counters map[string]uint64 // nil: not a kitd node, or /metrics not read
}

// procUsage is what one process did over a window (or, added, over every
// window of a run).
type procUsage struct {
	name  string
	pid   int
	node  bool // a kitd node: its syncs are counted
	cpu   time.Duration
	cpuOK bool
	io    ioCounters
	ioOK  bool
	// counters are the deltas of the syncCounters read at both ends.
	counters map[string]uint64
}

// usageOf is what p did between samples from and to.
func usageOf(p watched, from, to procSample) procUsage {
	u := procUsage{name: p.name, pid: p.pid, node: p.addr != ""}
	if from.cpuOK && to.cpuOK && to.cpu >= from.cpu {
		u.cpu, u.cpuOK = to.cpu-from.cpu, true
	}
	if from.ioOK && to.ioOK {
		u.io, u.ioOK = to.io.sub(from.io), true
	}
	if from.counters != nil && to.counters != nil {
		u.counters = map[string]uint64{}
		for k, a := range from.counters {
			if b, ok := to.counters[k]; ok && b >= a {
				u.counters[k] = b - a
			}
		}
	}
	return u
}

// addUsage adds each process's usage of one more window to sum (nil: the
// first window); what either window could not read is not measured.
func addUsage(sum, more []procUsage) []procUsage {
	if sum == nil {
		return more
	}
	if len(sum) != len(more) {
		for i := range sum {
			sum[i].cpuOK, sum[i].ioOK, sum[i].counters = false, false, nil
		}
		return sum
	}
	for i, m := range more {
		s := &sum[i]
		s.cpu, s.cpuOK = s.cpu+m.cpu, s.cpuOK && m.cpuOK
		s.io, s.ioOK = s.io.add(m.io), s.ioOK && m.ioOK
		if s.counters == nil || m.counters == nil {
			s.counters = nil
			continue
		}
		for k, v := range s.counters {
			if w, ok := m.counters[k]; ok {
				s.counters[k] = v + w
			} else {
				delete(s.counters, k)
			}
		}
	}
	return sum
}

// syncs is the process's fdatasyncs; ok is false for a process that is not
// a kitd node or whose counters are missing.
func (u procUsage) syncs() (uint64, bool) {
	if !u.node || u.counters == nil {
		return 0, false
	}
	return syncsOf(u.counters)
}

// ioFigures are system calls, bytes and fdatasyncs per acknowledged
// request.
type ioFigures struct {
	ReadCalls    float64 `json:"readCallsPerRequest"`
	WriteCalls   float64 `json:"writeCallsPerRequest"`
	BytesRead    float64 `json:"bytesReadPerRequest"`
	BytesWritten float64 `json:"bytesWrittenPerRequest"`
	// Syncs is fdatasyncs per request; nil when they could not be counted
	// (a server that is not kitd, a counter missing).
	Syncs *float64 `json:"syncsPerRequest,omitempty"`
	// PerSync is its inverse, requests per fdatasync; nil also when there
	// was no sync.
	PerSync *float64 `json:"requestsPerSync,omitempty"`
	// RaftMessages is raft messages sent per request, every node's; nil
	// without raft groups, or when a node does not count them.
	RaftMessages *float64 `json:"raftMessagesPerRequest,omitempty"`
}

// figuresOf divides io and syncs (when syncsOK) by requests; nil when there
// is no request or io could not be read.
func figuresOf(io ioCounters, ioOK bool, syncs uint64, syncsOK bool, requests uint64) *ioFigures {
	if !ioOK || requests == 0 {
		return nil
	}
	n := float64(requests)
	f := &ioFigures{
		ReadCalls:    float64(io.ReadCalls) / n,
		WriteCalls:   float64(io.WriteCalls) / n,
		BytesRead:    float64(io.BytesRead) / n,
		BytesWritten: float64(io.BytesWritten) / n,
	}
	if syncsOK {
		s := float64(syncs) / n
		f.Syncs = &s
		if syncs > 0 {
			p := n / float64(syncs)
			f.PerSync = &p
		}
	}
	return f
}

// processIO is one process's counts over a run's measured windows.
type processIO struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	// CPUMicrosPerRequest is the process's CPU time (user and system) over
	// the windows per request the whole server served: a cluster node's
	// share of a post. Absent when /proc/<pid>/stat could not be read.
	CPUMicrosPerRequest *float64 `json:"cpuMicrosPerRequest,omitempty"`
	// ReadCalls, WriteCalls, BytesRead and BytesWritten are the deltas of
	// syscr, syscw, rchar and wchar; absent when /proc/<pid>/io could not
	// be read.
	ReadCalls    *uint64 `json:"readCalls,omitempty"`
	WriteCalls   *uint64 `json:"writeCalls,omitempty"`
	BytesRead    *uint64 `json:"bytesRead,omitempty"`
	BytesWritten *uint64 `json:"bytesWritten,omitempty"`
	// Syncs is the node's fdatasyncs (syncsOf); Counters, the deltas of
	// the /metrics counters they come from.
	Syncs      *uint64           `json:"syncs,omitempty"`
	Counters   map[string]uint64 `json:"counters,omitempty"`
	PerRequest *ioFigures        `json:"perRequest,omitempty"`
}

// setIO fills st's figures from each process's usage over its windows:
// every process together (only when every one could be read) and each.
func (st *runStats) setIO(usage []procUsage) {
	var total ioCounters
	ioOK, nodes, syncsOK := len(usage) > 0, 0, true
	var syncs uint64
	for _, u := range usage {
		total, ioOK = total.add(u.io), ioOK && u.ioOK
		if u.node {
			nodes++
			n, ok := u.syncs()
			syncs, syncsOK = syncs+n, syncsOK && ok
		}
		p := processIO{Name: u.name, Pid: u.pid, Counters: u.counters}
		if u.cpuOK && st.Requests > 0 {
			per := float64(u.cpu) / float64(time.Microsecond) / float64(st.Requests)
			p.CPUMicrosPerRequest = &per
		}
		if u.ioOK {
			p.ReadCalls, p.WriteCalls, p.BytesRead, p.BytesWritten = &u.io.ReadCalls, &u.io.WriteCalls, &u.io.BytesRead, &u.io.BytesWritten
		}
		n, ok := u.syncs()
		if ok {
			p.Syncs = &n
		}
		p.PerRequest = figuresOf(u.io, u.ioOK, n, ok, st.Requests)
		if u.cpuOK || u.ioOK || u.counters != nil {
			st.Processes = append(st.Processes, p)
		}
	}
	st.IO = figuresOf(total, ioOK, syncs, syncsOK && nodes > 0, st.Requests)
	if st.IO != nil {
		st.IO.RaftMessages = raftMessagesPer(usage, st.Requests)
	}
}

// raftMessagesPer is the raft messages every node sent per request; nil
// unless every node counted some.
func raftMessagesPer(usage []procUsage, requests uint64) *float64 {
	var sent uint64
	nodes := 0
	for _, u := range usage {
		if !u.node {
			continue
		}
		n, ok := u.counters[raftMessagesCounter]
		if !ok {
			return nil
		}
		sent, nodes = sent+n, nodes+1
	}
	if nodes == 0 || sent == 0 || requests == 0 {
		return nil
	}
	per := float64(sent) / float64(requests)
	return &per
}
