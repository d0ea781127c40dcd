package multiraft_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/multiraft/multirafttest"
)

// A cycle writes what a restart needs and no more: each key a cycle writes
// in every group is a memtable insert per group and cycle, and a hard
// state a record in the raft log.
func TestWhatACycleWrites(t *testing.T) {
	const compactAfter = 40 // the applied index is written every 10 entries
	tweak := func(cfg *multiraft.Config) { cfg.CompactAfter = compactAfter }
	uint64At := func(t *testing.T, m *member, key []byte, offset int) uint64 {
		t.Helper()
		v, err := m.store.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint64(v[offset:])
	}
	for _, tc := range []struct {
		name      string
		proposals int
		check     func(t *testing.T, m *member, before, applied uint64)
	}{
		{"a commit that moves alone writes no hard state", 5, func(t *testing.T, m *member, _, _ uint64) {
			hs, err := m.node.WrittenHardState(0)
			if err != nil || hs == nil {
				t.Fatalf("hard state %v, %v", hs, err)
			}
			if commit := hs.Commit; commit > 3 {
				t.Fatalf("hard state on disk has commit %d: written after the election", commit)
			}
		}},
		{"the applied index is not written every cycle", 5, func(t *testing.T, m *member, before, _ uint64) {
			if got := uint64At(t, m, multiraft.AppliedKey(0), 0); got != before {
				t.Fatalf("applied index on disk %d after 5 entries, want still %d", got, before)
			}
		}},
		{"the applied index on disk trails by less than a quarter of CompactAfter", 25, func(t *testing.T, m *member, _, applied uint64) {
			if got := uint64At(t, m, multiraft.AppliedKey(0), 0); applied-got >= compactAfter/4 {
				t.Fatalf("applied index on disk %d, applied %d", got, applied)
			}
		}},
		{"a compaction writes the applied index with it", 2*compactAfter + 3, func(t *testing.T, m *member, _, applied uint64) {
			snap := uint64At(t, m, multiraft.SnapshotKey(0), 0)
			if snap <= 1 {
				t.Fatalf("no compaction after %d entries (snapshot mark %d)", applied, snap)
			}
			if got := uint64At(t, m, multiraft.AppliedKey(0), 0); got < snap+compactAfter {
				t.Fatalf("applied index on disk %d, log compacted to %d: the log must keep %d entries past it", got, snap, compactAfter)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []uint64{1}, tweak)
			c.bootstrap(1, []uint64{1})
			c.elect(1)
			c.awaitLeads(1, 0)
			m := c.nodes[1]
			if err := m.node.Flush(); err != nil {
				t.Fatal(err)
			}
			before := uint64At(t, m, multiraft.AppliedKey(0), 0)
			var applied uint64
			for range tc.proposals {
				applied = c.propose(0, "e")
			}
			if err := m.node.Flush(); err != nil {
				t.Fatal(err)
			}
			tc.check(t, m, before, applied)
		})
	}
}

// A leader's appends leave before its own write is synced, so that its
// fsync and its followers' overlap; its acknowledgement still waits for
// the sync, so nothing commits on the followers' disks alone before it.
func TestLeaderReplicatesWhileItWrites(t *testing.T) {
	c, fss, lead := threeWithSyncCounting(t)

	var appends atomic.Int64
	c.net.Drop(func(m multiraft.Message) bool {
		if m.Msg.Type == pb.MsgApp && len(m.Msg.Entries) > 0 {
			appends.Add(1)
		}
		return false
	})
	fss[lead].Block()
	defer fss[lead].Unblock()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := proposeCtx()
		defer cancel()
		_, err := c.nodes[lead].node.Propose(ctx, 0, []byte("x"))
		done <- err
	}()
	eventually.True(t, "an append reached the followers while the leader's sync was held", func() bool {
		return appends.Load() >= 2
	})
	select {
	case err := <-done:
		t.Fatalf("the proposal returned (%v) before the leader's own sync", err)
	default:
	}
	fss[lead].Unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A proposal applied in a cycle that also appends new entries is answered
// when its records are written, not after that cycle's sync: its own entry
// was synced a cycle before, so waiting for the next one only added a sync
// to every answer under load.
func TestAnAppliedProposalDoesNotWaitForTheNextSync(t *testing.T) {
	fs := &multirafttest.SyncCountingFS{FS: vfs.NewMem()}
	c := newCluster(t, nil, nil)
	m := c.start(1, fs)
	c.bootstrap(1, []uint64{1})
	c.elect(1)
	c.awaitLeads(1, 0)

	propose := func(data string) <-chan error {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := proposeCtx()
			defer cancel()
			_, err := m.node.Propose(ctx, 0, []byte(data))
			done <- err
		}()
		return done
	}
	fs.Block()
	defer fs.Unblock()
	first := propose("first")
	eventually.True(t, "the first entry's sync waits", func() bool { return fs.Waiting() == 1 })
	second := propose("second")
	eventually.True(t, "the second proposal waits for the driver", func() bool { return m.node.Queued() == 1 })
	synced := fs.WALSyncs()
	fs.Release() // the first entry is synced; the cycle that applies it appends the second
	eventually.True(t, "the second entry's sync waits", func() bool { return fs.WALSyncs() == synced+1 && fs.Waiting() == 1 })

	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second): // before the proposal's own deadline
		t.Fatal("the first proposal waited for the second entry's sync")
	}
	select {
	case err := <-second:
		t.Fatalf("the second proposal returned (%v) before its entry was synced", err)
	default:
	}
	fs.Unblock()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// A follower that applies an entry in the cycle that appends it writes the
// entry's records only after the raft log's sync: the store must never
// hold an applied entry the log could still lose.
func TestAFollowerAppliesAnEntryItAppendsAfterItsSync(t *testing.T) {
	c, fss, lead := threeWithSyncCounting(t)
	follower := lead%3 + 1

	// The entry commits on the leader and the other follower alone.
	c.net.Drop(func(m multiraft.Message) bool { return m.Msg.To == follower })
	idx := c.propose(0, "x")

	// Then the leader sends it to the follower with a commit index that
	// covers it: one Ready appends and applies it.
	var appendCommitted atomic.Bool
	c.net.Drop(func(m multiraft.Message) bool {
		if m.Msg.To == follower && m.Msg.Type == pb.MsgApp && m.Msg.Commit >= idx {
			for _, e := range m.Msg.Entries {
				if e.Index == idx {
					appendCommitted.Store(true)
				}
			}
		}
		return false
	})
	fs := fss[follower]
	fs.Block()
	defer fs.Unblock()
	eventually.True(t, "the follower's sync of the entry, the leader ticking", func() bool {
		if fs.Waiting() > 0 {
			return true
		}
		c.nodes[lead].tick <- time.Time{}
		return false
	})
	if !appendCommitted.Load() {
		t.Fatal("the follower's sync is not the one of an append that commits its entry")
	}
	recs, err := c.nodes[follower].kv.Records(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[idx]; ok {
		t.Fatal("the follower wrote the entry's records before the entry was synced")
	}
	fs.Unblock()
	c.waitEqual(0)
}

// threeWithSyncCounting is a cluster of three nodes, each on a
// SyncCountingFS, with group 0 led by the one it returns.
func threeWithSyncCounting(t *testing.T) (*cluster, map[uint64]*multirafttest.SyncCountingFS, uint64) {
	t.Helper()
	fss := map[uint64]*multirafttest.SyncCountingFS{}
	c := newCluster(t, nil, nil)
	for _, id := range []uint64{1, 2, 3} {
		fss[id] = &multirafttest.SyncCountingFS{FS: vfs.NewMem()}
		c.start(id, fss[id])
	}
	c.bootstrap(1, []uint64{1, 2, 3})
	c.elect(1)
	lead := c.leader(0)
	c.awaitLeads(lead, 0)
	return c, fss, lead
}
