package clusternode

import (
	"sync/atomic"

	"github.com/kitd/kitd/cluster/raftnet"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/replica"
)

// raftNet is the raft transport of this member (cluster/raftnet), and the
// rule that a message of a group this node lacks makes it join the group:
// only a leader that added this node sends it one (replica/grow.go).
type raftNet struct {
	*raftnet.Transport
	rep     atomic.Pointer[replica.Replica]
	joining [partition.Count]atomic.Bool
}

func newRaftNet(m *Node) (*raftNet, error) {
	rn := &raftNet{}
	t, err := raftnet.New(raftnet.Config{
		NodeID: m.id, Directory: directory{m}, OnUnknownGroup: rn.join, Logger: m.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	rn.Transport = t
	return rn, nil
}

// join runs on a connection's read loop, so it must not wait for the
// driver: the join runs on a goroutine of its own, one per group at a
// time, and raft sends again once the group exists.
func (rn *raftNet) join(g multiraft.GroupID, _ uint64) {
	r := rn.rep.Load()
	if r == nil || int(g) >= partition.Count || !rn.joining[g].CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer rn.joining[g].Store(false)
		r.JoinGroup(g)
	}()
}

// deliverTo starts delivering to the replicas once they run.
func (rn *raftNet) deliverTo(r *replica.Replica) {
	rn.rep.Store(r)
	rn.Attach(r.Node())
}

// directory finds a member's node-to-node address by its raft id.
type directory struct{ m *Node }

func (d directory) Addr(id uint64) (string, bool) { return d.m.addr(id) }
