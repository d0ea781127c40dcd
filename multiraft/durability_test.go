package multiraft_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/multiraft/multirafttest"
	"github.com/kitd/kitd/persistence"
)

type acked struct {
	g     multiraft.GroupID
	index uint64
	data  string
}

// A crash loses what was not synced (vfs.CrashableMem keeps only synced
// data, or a random part of the rest); every proposal that returned is
// present after the node is opened again, applied entries whose records
// were lost are applied again.
func TestCrashKeepsEveryReturnedProposal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unsynced int // percent of unsynced writes the crash keeps
	}{
		{"crash keeps only synced writes", 0},
		{"crash keeps a random half of unsynced writes", 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const groups = 8
			mem := vfs.NewCrashableMem()
			fs := &multirafttest.SyncCountingFS{FS: mem, SyncDelay: time.Millisecond}
			c := newCluster(t, nil, nil)
			m := c.start(1, fs)
			c.bootstrap(groups, []uint64{1})
			c.elect(groups)

			var mu sync.Mutex
			var done []acked
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					g := multiraft.GroupID(w % groups)
					for i := 0; ctx.Err() == nil; i++ {
						data := string(rune('a'+w)) + "-" + string(rune('0'+i%10))
						idx, err := m.node.Propose(ctx, g, []byte(data))
						if err != nil {
							return
						}
						mu.Lock()
						done = append(done, acked{g, idx, data})
						mu.Unlock()
					}
				})
			}
			eventually.True(t, "400 proposals returned", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(done) >= 400
			})
			mu.Lock()
			returned := append([]acked(nil), done...)
			mu.Unlock()
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: tc.unsynced, RNG: rand.New(rand.NewPCG(1, 2))})
			stop()
			wg.Wait()
			c.stop(1)

			r := c.start(1, crashed)
			c.elect(groups)
			for g := range groups {
				c.propose(multiraft.GroupID(g), "after") // applies everything before it
			}
			recs := map[multiraft.GroupID]map[uint64]string{}
			for g := range groups {
				recs[multiraft.GroupID(g)], _ = r.kv.Records(multiraft.GroupID(g))
			}
			for _, a := range returned {
				if got := recs[a.g][a.index]; got != a.data {
					t.Fatalf("group %d entry %d: %q after the crash, want %q", a.g, a.index, got, a.data)
				}
			}
			t.Logf("%d returned proposals all present", len(returned))
		})
	}
}

// One sync per cycle, whatever the number of groups that wrote in it: the
// syncs of the raft log's segments and of Pebble's WAL (counted on the
// *.log files) are at most the driver's cycles, while the cycles carry
// many groups each (a sync takes a disk's time, during which proposals
// gather).
func TestOneSyncPerCycle(t *testing.T) {
	const groups, perGroup = 64, 20
	fs := &multirafttest.SyncCountingFS{FS: vfs.NewMem(), SyncDelay: time.Millisecond}
	n := singleNode(t, testDir, persistence.Options{FS: fs}, groups)

	syncs0, st0 := fs.WALSyncs(), n.Stats()
	var wg sync.WaitGroup
	for g := range groups {
		wg.Go(func() {
			for range perGroup {
				if _, err := n.Propose(context.Background(), multiraft.GroupID(g), []byte("x")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	syncs, st := fs.WALSyncs()-syncs0, n.Stats()
	cycles, groupsWritten := st.Cycles-st0.Cycles, st.GroupsWritten-st0.GroupsWritten
	t.Logf("%d proposals: %d cycles, %d WAL syncs, %.1f groups written per cycle", groups*perGroup, cycles, syncs, float64(groupsWritten)/float64(cycles))
	// Slack of two: the sync of a write queued before the count began, and
	// the full sync of a WAL that Pebble rotates.
	if syncs > cycles+2 {
		t.Fatalf("%d WAL syncs for %d cycles: want at most one per cycle", syncs, cycles)
	}
	if groupsWritten < 2*cycles {
		t.Fatalf("%d group writes in %d cycles: the load did not put several groups in a cycle", groupsWritten, cycles)
	}
}

// Entries committed in the log but not applied by the durable state (an
// unsynced apply batch lost in a crash, or entries past the applied index
// on disk, which is written every few entries) are applied again once the
// group's commit index is known again: the hard state on disk holds it
// only as of the last term or vote, and the next leader tells the rest.
func TestOpenAppliesCommittedEntriesAgain(t *testing.T) {
	c := newCluster(t, []uint64{1}, nil)
	c.bootstrap(1, []uint64{1})
	c.elect(1)
	for range 5 {
		c.propose(0, "e")
	}
	m := c.nodes[1]
	fs := m.fs
	c.stop(1)

	// The crash: the records and applied index of the last apply batches are gone.
	store, err := persistence.Open(testDir, persistence.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	b.DeleteRange([]byte("kv/"), []byte("kv0"))
	b.Set(multiraft.AppliedKey(0), persistence.AppendUint64(nil, 1))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	r := c.start(1, fs)
	c.elect(1)
	c.awaitLeads(1, 0)
	if err := r.node.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, _ := r.kv.Records(0)
	if len(recs) != 5 {
		t.Fatalf("%d records after reopening, want the 5 committed entries applied again", len(recs))
	}
}
