package multiraft

import (
	"encoding/binary"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/persistence"
)

// AppliedKey lets the tests roll a group's applied index back, as a crash
// that lost the last unsynced apply batch does.
var AppliedKey = appliedKey

// SnapshotKey lets the tests read what a cycle wrote.
var SnapshotKey = snapshotKey

// WrittenHardState is the hard state of group g the raft log last wrote.
func (n *Node) WrittenHardState(g GroupID) (hs *pb.HardState, err error) {
	err = n.do(func() { hs = n.rlog.HardState(uint16(g)) })
	return hs, err
}

// Queued returns how many events wait for the driver to take them.
func (n *Node) Queued() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.inbox)
}

// WriteLegacyGroup writes group g as a store written before the raft log
// had files of its own held it: compaction mark (1, 1), applied index 1,
// voters, and the log and hard state under r/.
func WriteLegacyGroup(b *persistence.Batch, g GroupID, voters []uint64, hs *pb.HardState, ents []pb.Entry) {
	b.Set(snapshotKey(g), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), 1))
	b.Set(appliedKey(g), binary.BigEndian.AppendUint64(nil, 1))
	cs, _ := (&pb.ConfState{Voters: voters}).Marshal()
	b.Set(confStateKey(g), cs)
	b.Set(hardStateKey(g), appendHardState(nil, hs))
	for _, e := range ents {
		b.Set(appendLogKey(nil, g, e.Index), appendEntryValue(nil, &e))
	}
}

// LegacyKeys counts the keys of group g's log and hard state in the store.
func LegacyKeys(store *persistence.Store, g GroupID) int {
	n := 0
	lower, upper := groupKeys(g)
	_ = store.Scan(lower, upper, false, func(k, _ []byte) bool {
		if _, kind, _ := decodeKey(k); kind == kindLog || kind == kindHardState {
			n++
		}
		return true
	})
	return n
}
