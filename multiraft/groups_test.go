package multiraft_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// RanGroups tells a store whose records are raft groups' applied state
// from one written straight: server refuses to write straight to the
// first kind.
func TestRanGroups(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		write func(t *testing.T, fs vfs.FS)
		want  bool
	}{
		{"a new store ran no groups", func(*testing.T, vfs.FS) {}, false},
		{"a store of records alone ran no groups", func(t *testing.T, fs vfs.FS) {
			withStore(t, fs, func(s *persistence.Store) {
				b := s.NewBatch()
				b.Set([]byte("m/a record"), []byte("v"))
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
			})
		}, false},
		{"a store with a raft id ran groups", func(t *testing.T, fs vfs.FS) {
			withStore(t, fs, func(s *persistence.Store) {
				if _, err := multiraft.NodeID(s); err != nil {
					t.Fatal(err)
				}
			})
		}, true},
		{"a store with a group's state ran groups", func(t *testing.T, fs vfs.FS) {
			// singleNode elects the group; its node and store close when
			// this subtest ends.
			t.Run("one group elected", func(t *testing.T) { singleNode(t, testDir, persistence.Options{FS: fs}, 1) })
		}, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			fs := vfs.NewMem()
			tc.write(t, fs)
			withStore(t, fs, func(s *persistence.Store) {
				got, err := multiraft.RanGroups(s)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Fatalf("RanGroups = %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func withStore(t *testing.T, fs vfs.FS, fn func(*persistence.Store)) {
	t.Helper()
	s, err := persistence.Open(testDir, persistence.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	fn(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
