package multiraft_test

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/multiraft"
)

// The raft log's old segments go once the groups compacted their entries,
// a quiet group's too (its live entries are written again), and what
// remains reopens whole.
func TestRaftLogSegmentsGo(t *testing.T) {
	c := newCluster(t, []uint64{1}, func(cfg *multiraft.Config) {
		cfg.CompactAfter = 10
		cfg.LogSegmentSize = 4 << 10
	})
	c.bootstrap(2, []uint64{1})
	c.elect(2)
	c.propose(1, "quiet") // group 1 writes once, in the first segment
	data := strings.Repeat("x", 100)
	var last uint64
	for range 400 { // about 13 segments of group 0's entries
		last = c.propose(0, data)
	}
	m := c.nodes[1]
	if err := m.node.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d segments", segmentFiles(t, m))
	if n := segmentFiles(t, m); n > 5 {
		t.Fatalf("%d segments after 400 entries compacted every 10", n)
	}
	c.stop(1)
	m = c.start(1, m.fs)
	c.elect(2)
	if idx := c.propose(0, "after"); idx <= last {
		t.Fatalf("proposal at %d after a restart, the log had reached %d", idx, last)
	}
	recs, _ := m.kv.Records(1)
	if len(recs) != 1 {
		t.Fatalf("group 1 has %d records after the restart, want its 1", len(recs))
	}
}

func segmentFiles(t *testing.T, m *member) int {
	t.Helper()
	names, err := m.fs.List(m.fs.PathJoin(testDir, "raft"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			n++
		}
	}
	return n
}
