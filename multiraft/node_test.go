package multiraft

import (
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// A cycle's batch may be written before its sync only if every entry it
// applies was synced in an earlier cycle.
func TestAppliesSynced(t *testing.T) {
	ents := func(from, to uint64) []pb.Entry {
		var es []pb.Entry
		for i := from; i <= to; i++ {
			es = append(es, pb.Entry{Index: i})
		}
		return es
	}
	for _, tc := range []struct {
		name              string
		applied, appended []pb.Entry
		want              bool
	}{
		{"nothing to apply", nil, ents(4, 5), true},
		{"nothing appended", ents(1, 3), nil, true},
		{"applies entries before those it appends", ents(1, 3), ents(4, 5), true},
		{"applies an entry it appends", ents(1, 4), ents(4, 5), false},
		{"applies every entry it appends", ents(4, 5), ents(4, 5), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := groupReady{rd: raft.Ready{CommittedEntries: tc.applied, Entries: tc.appended}}
			if got := r.appliesSynced(); got != tc.want {
				t.Fatalf("appliesSynced() = %v, want %v", got, tc.want)
			}
		})
	}
}
