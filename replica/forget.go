package replica

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
)

// A replica its group removed (placement moved it, or a leader replaced it
// while this node was down) stays on the node with its records until
// forgotten. For a replica this node has not held (Holds: a member that
// hears a leader) for ForgetAfter, it asks the group's leader, at most
// once every ForgetAfter, who the group's members are, and forgets the
// replica when the answer leaves this node out (multiraft.Node.Forget,
// which refuses if the group spoke to this node since the question).
// docs/cluster.md, "A removed replica is forgotten".

// defaultForgetAfter is long enough for an election and a restart, so
// that a replica is asked about only when it has truly been left behind.
const defaultForgetAfter = 30 * time.Second

// askTimeout bounds one question to a leader.
const askTimeout = 2 * time.Second

// forgetter is forgetRemoved's state: when each replica not held is next
// asked about.
type forgetter struct {
	r    *Replica
	next map[multiraft.GroupID]time.Time
}

// forgetRemoved is one round, every GrowInterval beside grow's, on every
// node.
func (f *forgetter) forgetRemoved() {
	r, now := f.r, time.Now()
	groups := r.node.Groups()
	for g := range f.next {
		if !slices.Contains(groups, g) {
			delete(f.next, g)
		}
	}
	for _, g := range groups {
		if int(g) >= partition.Count || r.Holds(partition.ID(g)) {
			delete(f.next, g)
			continue
		}
		at, seen := f.next[g]
		if !seen {
			f.next[g] = now.Add(r.cfg.ForgetAfter)
			continue
		}
		if now.Before(at) {
			continue
		}
		f.next[g] = now.Add(r.cfg.ForgetAfter)
		r.forgetIfRemoved(g)
	}
}

// forgetIfRemoved forgets g's replica here if g's leader says the group
// does not have this node.
func (r *Replica) forgetIfRemoved(g multiraft.GroupID) {
	heard, err := r.node.Heard(g)
	if err != nil {
		return
	}
	to := r.cfg.LeaderOf(partition.ID(g))
	if to == 0 {
		to, _ = r.Leader(partition.ID(g))
	}
	if to == 0 || to == r.id {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	members, err := r.cfg.AskMembers(ctx, to, g)
	cancel()
	if err != nil || len(members) == 0 || slices.Contains(members, r.id) {
		return
	}
	switch err := r.node.Forget(g, heard); {
	case err == nil:
		r.forgotten.Add(1)
		r.logger.Info("forgot a replica its group removed", "group", g, "leader", to)
	case !errors.Is(err, multiraft.ErrGroupSpoke) && !errors.Is(err, multiraft.ErrUnknownGroup):
		r.logger.Warn("forget a replica its group removed", "group", g, "err", err)
	}
}

// GroupMembers is the raft ids of group g's voters and learners, as this
// node, its leader with a lease, applied its configuration: the other end
// of Config.AskMembers. Any other node answers *multiraft.NotLeaderError.
func (r *Replica) GroupMembers(g multiraft.GroupID) ([]uint64, error) {
	st, err := r.leaderStatus(g)
	if err != nil {
		return nil, err
	}
	return slices.Concat(st.Voters, st.Learners), nil
}
