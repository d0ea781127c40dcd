package multiraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

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
	s.hs = &pb.HardState{Term: 1, Commit: 1}
	s.cs = &pb.ConfState{Voters: append([]uint64(nil), voters...)}
	s.snapIndex, s.snapTerm, s.applied = 1, 1, 1
	return n.create(g, s)
}

// Join creates an empty replica of group g on this node, to be added to
// the group by its leader (AddLearner): it waits for the leader's snapshot.
func (n *Node) Join(g GroupID) error {
	return n.create(g, newLogStore())
}

// create writes a new group's initial state (synced) and starts it: its
// hard state in the raft log first, then its marks in the store, which make
// it exist (loadGroups drops the log of a group the store does not know).
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
	n.rlog.Reset(uint16(id), true) // whatever a forgotten replica left
	if !isEmpty(s.hs) {
		n.rlog.SetHardState(uint16(id), s.hs)
	}
	if err := n.rlog.Write(true); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	b := n.store.NewBatch()
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

// Heard counts the messages of group g this node has stepped; Forget
// takes it back.
func (n *Node) Heard(g GroupID) (uint64, error) {
	grp := n.lookup(g)
	if grp == nil {
		return 0, ErrUnknownGroup
	}
	return grp.heard.Load(), nil
}

// Forget deletes this node's replica of group g, which the group removed
// (a replica moved elsewhere, or replaced while its node was down), with
// its raft state and its records, in one synced batch, and then its raft
// log. A removed replica often never applies its own removal (its leader
// stops sending first), so the caller must learn it from the group's
// leader: it reads Heard, then asks the leader, and calls Forget with what
// Heard said only if the answer leaves this node out. Forget refuses
// (ErrGroupSpoke) when the group stepped a message since, or this node
// leads it: a leader adding the node back would have spoken to it, and a
// replica whose entries a leader counts must never lose them. A later
// message of the group, once a leader adds the node back, joins it anew
// (Join) with a snapshot.
func (n *Node) Forget(g GroupID, heard uint64) error {
	var err error
	if derr := n.do(func() { err = n.forget(g, heard) }); derr != nil {
		return derr
	}
	return err
}

func (n *Node) forget(id GroupID, heard uint64) error {
	g := n.lookup(id)
	if g == nil {
		return ErrUnknownGroup
	}
	if g.heard.Load() != heard || g.state == raft.StateLeader {
		return ErrGroupSpoke
	}
	b := n.store.NewBatch()
	defer b.Close()
	lower, upper := groupKeys(id)
	b.DeleteRange(lower, upper)
	if err := n.sm.Restore(id, bytes.NewReader(nil), b); err != nil {
		return fmt.Errorf("replication: forget group %d: %w", id, err)
	}
	b.Set(forgottenKey(), []byte{1})
	if err := b.Commit(); err != nil {
		return fmt.Errorf("replication: forget group %d: %w", id, err)
	}
	// After the store's synced deletion: a reset durable first could
	// leave, after a crash, the store's group without its log.
	n.rlog.Reset(uint16(id), true)
	if err := n.rlog.Write(true); err != nil {
		return fmt.Errorf("replication: forget group %d: %w", id, err)
	}
	table := maps.Clone(*n.groups.Load())
	delete(table, id)
	n.groups.Store(&table)
	n.order = slices.DeleteFunc(n.order, func(o *group) bool { return o == g })
	for seq, p := range g.waiters { // none: a follower has no waiters
		delete(g.waiters, seq)
		p.finish(0, ErrLeadershipLost)
	}
	g.unplaced = nil
	g.member.Store(false)
	if g.lead != 0 {
		n.leaders.push(LeaderChange{Group: id, Leader: 0, Term: g.term})
	}
	return nil
}

// Forgotten reports whether this store's node ever forgot a group: it
// belonged to a cluster then, and must not found another for want of
// groups.
func Forgotten(store *persistence.Store) (bool, error) {
	_, err := store.Get(forgottenKey())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, persistence.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("replication: forgotten mark: %w", err)
}

// RanGroups reports whether this store's node ever ran raft groups: it
// has a raft id, or a group's state. Such a store's records are the
// groups' applied state, behind what their logs hold, so only the groups
// may write to it: a write straight to it would be undone when the groups
// apply their logs again, and would never reach the other replicas.
func RanGroups(store *persistence.Store) (bool, error) {
	ok, err := store.Has(nodeIDKey())
	if err != nil {
		return false, fmt.Errorf("replication: node id: %w", err)
	}
	if ok {
		return true, nil
	}
	found := false
	lower, upper := rootKeys()
	err = store.Scan(lower, upper, false, func(_, _ []byte) bool {
		found = true
		return false
	})
	if err != nil {
		return false, fmt.Errorf("replication: group state: %w", err)
	}
	return found, nil
}

func isEmpty(hs *pb.HardState) bool {
	return hs.Term == 0 && hs.Vote == 0 && hs.Commit == 0
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
