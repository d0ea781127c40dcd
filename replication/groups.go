package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/persistence"
)

// Bootstrap creates group g on this node with the given voters. Every
// initial voter calls it with the same list; the group then elects a
// leader by itself. The group starts at index 1, a state every voter holds
// already (empty), so that nodes added later start from a snapshot.
func (n *Node) Bootstrap(g GroupID, voters []uint64) error {
	if len(voters) == 0 {
		return fmt.Errorf("replication: bootstrap group %d: no voters", g)
	}
	s := newLogStore()
	s.hs = &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1)}
	s.cs = &pb.ConfState{Voters: append([]uint64(nil), voters...)}
	s.snapIndex, s.snapTerm, s.applied = 1, 1, 1
	return n.create(g, s)
}

// Join creates an empty replica of group g on this node, to be added to
// the group by its leader (AddLearner): it waits for the leader's snapshot.
func (n *Node) Join(g GroupID) error {
	return n.create(g, newLogStore())
}

// create writes a new group's initial state (synced) and starts it.
func (n *Node) create(g GroupID, s *logStore) error {
	var err error
	if derr := n.do(func() { err = n.addGroup(g, s) }); derr != nil {
		return derr
	}
	return err
}

func (n *Node) addGroup(id GroupID, s *logStore) error {
	if n.lookup(id) != nil {
		return ErrGroupExists
	}
	grp, err := n.newGroup(id, s)
	if err != nil {
		return err
	}
	b := n.store.NewBatch()
	if !isEmpty(s.hs) {
		b.Set(hardStateKey(id), appendHardState(nil, s.hs))
	}
	n.writeSnapshotMark(b, grp)
	n.writeApplied(b, grp, true)
	if err := b.Commit(); err != nil {
		return err
	}
	table := maps.Clone(*n.groups.Load()) // readers hold the old table without a lock
	table[id] = grp
	n.groups.Store(&table)
	n.order = append(n.order, grp)
	for i := len(n.order) - 1; i > 0 && n.order[i].id < n.order[i-1].id; i-- {
		n.order[i], n.order[i-1] = n.order[i-1], n.order[i]
	}
	return nil
}

func isEmpty(hs *pb.HardState) bool {
	return hs.GetTerm() == 0 && hs.GetVote() == 0 && hs.GetCommit() == 0
}

// NodeID is the raft id of the node whose store this is: made at random
// on the first call and kept, so that a restarted node keeps its place in
// its groups. It is never 0.
func NodeID(store *persistence.Store) (uint64, error) {
	v, err := store.Get(nodeIDKey())
	if err == nil && len(v) == 8 {
		if id := binary.BigEndian.Uint64(v); id != 0 {
			return id, nil
		}
	}
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return 0, fmt.Errorf("replication: node id: %w", err)
	}
	if err == nil {
		return 0, fmt.Errorf("replication: node id: malformed record of %d bytes", len(v))
	}
	id := randomSeq()
	for id == 0 {
		id = randomSeq()
	}
	b := store.NewBatch()
	b.Set(nodeIDKey(), binary.BigEndian.AppendUint64(nil, id))
	if err := b.Commit(); err != nil {
		return 0, fmt.Errorf("replication: node id: %w", err)
	}
	return id, nil
}
