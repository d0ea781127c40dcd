package multiraft_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// A store written when the raft log lived in Pebble (r/<g>/log/, r/<g>/hs)
// opens with its log and hard state moved to the raft log, and the keys
// gone from the store; a crash before they went moves them again.
func TestOpenMovesTheLogOutOfTheStore(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted bool // the keys are back after a first move: a crash before their deletion
	}{
		{"a store with its log in Pebble opens with it", false},
		{"a move a crash interrupted runs again", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			legacy := func() {
				store, err := persistence.Open(testDir, persistence.Options{FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				b := store.NewBatch()
				// Two empty entries of the leader of term 2, committed.
				ents := []pb.Entry{
					{Index: 2, Term: 2, Type: pb.EntryNormal},
					{Index: 3, Term: 2, Type: pb.EntryNormal},
				}
				hs := &pb.HardState{Term: 2, Vote: 1, Commit: 3}
				multiraft.WriteLegacyGroup(b, 0, []uint64{1}, hs, ents)
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
			}
			legacy()
			c := newCluster(t, nil, nil)
			if tc.interrupted {
				c.start(1, fs)
				c.stop(1)
				legacy()
			}
			m := c.start(1, fs)
			st, err := m.node.Status(0)
			if err != nil {
				t.Fatal(err)
			}
			if st.Term != 2 || st.Commit != 3 {
				t.Fatalf("term %d, commit %d after the move; want the hard state's 2, 3", st.Term, st.Commit)
			}
			if n := multiraft.LegacyKeys(m.store, 0); n != 0 {
				t.Fatalf("%d log and hard state keys left in the store", n)
			}
			c.elect(1)
			// Entries 2 and 3 moved, the new leader's empty entry is 4.
			if idx := c.propose(0, "after"); idx != 5 {
				t.Fatalf("proposal at index %d, want 5 after the moved log", idx)
			}
			c.stop(1)
			c.start(1, fs)
			c.elect(1)
			if idx := c.propose(0, "again"); idx != 7 {
				t.Fatalf("proposal at index %d after a restart, want 7", idx)
			}
		})
	}
}
