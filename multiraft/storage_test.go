package multiraft

import (
	"bytes"
	"errors"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

func entries(term uint64, from, to uint64) []pb.Entry {
	var out []pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Type: pb.EntryNormal, Data: []byte{byte(i)}})
	}
	return out
}

// A log of entries 6..10 (term 2) after a compaction at 5 (term 1).
func testLog() *logStore {
	s := newLogStore()
	s.snapIndex, s.snapTerm, s.applied = 5, 1, 5
	s.append(entries(2, 6, 10))
	return s
}

func TestLogStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lo, hi  uint64
		max     uint64
		want    int
		wantErr error
	}{
		{"entries below the compaction point are compacted", 5, 7, 1 << 20, 0, raft.ErrCompacted},
		{"entries past the end are unavailable", 9, 12, 1 << 20, 0, raft.ErrUnavailable},
		{"a range within the log is returned whole", 6, 11, 1 << 20, 5, nil},
		{"a size limit still returns one entry", 6, 11, 1, 1, nil},
		{"a size limit cuts after the entries that fit", 6, 11, 2 * (entryOverhead + 1), 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testLog().Entries(tc.lo, tc.hi, tc.max)
			if !errors.Is(err, tc.wantErr) || len(got) != tc.want {
				t.Fatalf("Entries(%d, %d) = %d entries, %v; want %d, %v", tc.lo, tc.hi, len(got), err, tc.want, tc.wantErr)
			}
		})
	}

	terms := []struct {
		name    string
		index   uint64
		want    uint64
		wantErr error
	}{
		{"the term of the compaction point is kept", 5, 1, nil},
		{"a term before it is compacted", 4, 0, raft.ErrCompacted},
		{"a term in the log", 8, 2, nil},
		{"a term past the end is unavailable", 11, 0, raft.ErrUnavailable},
	}
	for _, tc := range terms {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testLog().Term(tc.index)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Term(%d) = %d, %v; want %d, %v", tc.index, got, err, tc.want, tc.wantErr)
			}
		})
	}

	t.Run("appending over a conflicting tail replaces it", func(t *testing.T) {
		s := testLog()
		if old := s.append(entries(3, 8, 8)); old != 10 {
			t.Fatalf("old last %d, want 10", old)
		}
		if s.lastIndex() != 8 {
			t.Fatalf("last index %d, want 8", s.lastIndex())
		}
		if term, _ := s.Term(8); term != 3 {
			t.Fatalf("term of 8 is %d, want 3", term)
		}
	})
	t.Run("compaction moves the first index and keeps the term", func(t *testing.T) {
		s := testLog()
		s.compact(8)
		first, _ := s.FirstIndex()
		term, _ := s.Term(8)
		if first != 9 || term != 2 || s.lastIndex() != 10 {
			t.Fatalf("after compact(8): first %d, term(8) %d, last %d", first, term, s.lastIndex())
		}
	})
	t.Run("the snapshot describes the applied state", func(t *testing.T) {
		s := testLog()
		s.applied = 9
		s.cs = &pb.ConfState{Voters: []uint64{1, 2}}
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if m := snap.Metadata; m.Index != 9 || m.Term != 2 || len(m.ConfState.Voters) != 2 {
			t.Fatalf("snapshot metadata %v", m)
		}
	})
	t.Run("records round-trip", func(t *testing.T) {
		e := entries(7, 42, 42)[0]
		got, err := decodeEntry(42, appendEntryValue(nil, &e))
		if err != nil || got.Index != e.Index || got.Term != e.Term || got.Type != e.Type || !bytes.Equal(got.Data, e.Data) {
			t.Fatalf("entry %v, %v; want %v", got, err, e)
		}
		hs := &pb.HardState{Term: 3, Vote: 2, Commit: 9}
		if got, err := decodeHardState(appendHardState(nil, hs)); err != nil || *got != *hs {
			t.Fatalf("hard state %v, %v; want %v", got, err, hs)
		}
		if _, err := decodeEntry(1, []byte{1}); err == nil {
			t.Fatal("a truncated entry decoded")
		}
	})
}

// The raft log's entries of a group are taken past its compaction mark,
// and only if they continue it: a crash between a synced snapshot and the
// raft log's reset leaves a log that does not.
func TestTakeLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		ents []pb.Entry
		ok   bool
		last uint64
	}{
		{"entries that continue the mark are taken", entries(2, 6, 9), true, 9},
		{"entries the mark covers are dropped", entries(1, 3, 8), true, 8},
		{"no entries past the mark is an empty log", entries(1, 2, 5), true, 5},
		{"a log that ends before the mark leaves it empty", entries(1, 2, 4), true, 5},
		{"a log with a gap after the mark is refused", entries(2, 7, 9), false, 5},
		{"a log with a term below the mark's is refused", entries(0, 6, 9), false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLogStore()
			s.snapIndex, s.snapTerm, s.applied = 5, 1, 5
			if ok := s.takeLog(tc.ents); ok != tc.ok || s.lastIndex() != tc.last {
				t.Fatalf("takeLog = %v, last index %d; want %v, %d", ok, s.lastIndex(), tc.ok, tc.last)
			}
		})
	}
}
