package replica

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"time"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
)

// grow is each leader's part of placement, with no coordinator: every
// GrowInterval, for each group it leads, a leader
//
//   - removes a voter that gossip has not called alive for DownTimeout;
//   - promotes a learner that has caught up (its log reaches the commit
//     index);
//   - adds a learner when the group has fewer replicas than nodes alive
//     (or Config.Replicas, when set and fewer): the alive node that ranks highest for
//     the group by rendezvous hashing, so that the groups spread evenly and
//     every leader makes the same choice;
//   - with Config.Replicas set, moves a replica towards the nodes that
//     rank highest for the group (rebalance), so a node that joins takes
//     its share;
//   - hands one leadership to a voter that leads fewer groups when it
//     leads more than its share (ceil(groups / nodes)).
//
// One change per group per round: raft takes one configuration change at
// a time.
func (r *Replica) grow() {
	members := r.cfg.LiveNodes()
	// How many groups each node leads: gossip's word for the others,
	// this node's own count for itself, both kept up to date with the
	// round's transfers, so that one round does not overshoot.
	led := make(map[uint64]int, len(members))
	for _, m := range members {
		led[m.RaftID] = m.Led
	}
	var leading []partition.ID
	r.mu.Lock()
	for p, term := range r.leading {
		if term != 0 {
			leading = append(leading, partition.ID(p))
		}
	}
	r.mu.Unlock()
	led[r.id] = len(leading)
	down := r.downFor(members)
	for _, p := range leading {
		r.growGroup(multiraft.GroupID(p), members, led, down)
	}
}

// everyGrowInterval runs round every GrowInterval until the replica
// closes, except while it drains.
func (r *Replica) everyGrowInterval(round func()) {
	t := clock.AlignedTicker(r.cfg.GrowInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if !r.draining.Load() {
			round()
		}
	}
}

// downFor returns the nodes gossip has not called alive for DownTimeout,
// from what this node saw of them while it ran grow: the voters a leader
// removes from its groups. A node that is back in time is forgotten.
func (r *Replica) downFor(members []LiveNode) map[uint64]bool {
	alive := raftIDs(members)
	now := time.Now()
	down := map[uint64]bool{}
	for _, g := range r.node.Groups() {
		st, err := r.node.Status(g)
		if err != nil || st.Leader != r.id {
			continue
		}
		for _, v := range st.Voters {
			if alive[v] || v == r.id {
				delete(r.missing, v)
				continue
			}
			since, seen := r.missing[v]
			if !seen {
				r.missing[v] = now
			} else if now.Sub(since) >= r.cfg.DownTimeout {
				down[v] = true
			}
		}
	}
	return down
}

// growGroup makes at most one change to group g.
func (r *Replica) growGroup(g multiraft.GroupID, members []LiveNode, led map[uint64]int, down map[uint64]bool) {
	st, err := r.node.Status(g)
	if err != nil || st.Leader != r.id {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.GrowInterval*4)
	defer cancel()
	for _, l := range st.Learners {
		if st.Match[l]+caughtUp >= st.Commit {
			if err := r.node.Promote(ctx, g, l); err != nil {
				r.logger.Debug("promote", "group", g, "replica", l, "err", err)
			}
			return
		}
	}
	if len(st.Learners) > 0 {
		return // one catching up at a time
	}
	// A voter down longer than DownTimeout leaves the group: the others
	// then make its quorum alone, and a live node may take its place.
	for _, v := range st.Voters {
		if down[v] && len(st.Voters) > 1 {
			if err := r.node.RemoveReplica(ctx, g, v); err != nil {
				r.logger.Debug("remove a replica that is down", "group", g, "replica", v, "err", err)
			} else {
				r.logger.Info("removed a replica that was down", "group", g, "replica", v)
			}
			return
		}
	}
	want := len(members)
	if r.cfg.Replicas > 0 {
		want = min(r.cfg.Replicas, want)
	}
	if len(st.Voters) < want {
		if id := pick(g, members, st.Voters); id != 0 {
			if err := r.node.AddLearner(ctx, g, id); err != nil {
				r.logger.Debug("add learner", "group", g, "replica", id, "err", err)
			}
		}
		return
	}
	if r.cfg.Replicas > 0 && r.rebalance(ctx, g, st, members, want) {
		return
	}
	if len(members) < 2 {
		return
	}
	share := (partition.Count + len(members) - 1) / len(members)
	if led[r.id] <= share {
		return
	}
	// The voter that leads fewest, if it leads fewer than its share.
	var to uint64
	fewest := share
	for _, v := range st.Voters {
		if n, alive := led[v]; alive && v != r.id && n < fewest && mayTakeLead(st, v) {
			to, fewest = v, n
		}
	}
	if to == 0 {
		return
	}
	if err := r.handOver(g, to); err != nil {
		r.logger.Debug("transfer leadership", "group", g, "to", to, "err", err)
		return
	}
	led[r.id]--
	led[to]++
}

// mayTakeLead reports whether voter v may be handed group g's lead: its
// log holds everything committed, and it answers this leader. Gossip alone
// is not enough: a node cut off from the others by a network partition
// still gossips, and an idle group's commit index does not move past it,
// so its Match stays equal to it. A hand-over to it releases the
// partition (no answers) until the transfer fails, every round, for as
// long as the cut lasts.
func mayTakeLead(st multiraft.Status, v uint64) bool {
	return st.Match[v] >= st.Commit && st.Active[v]
}

// rebalance moves group g's replicas towards the want nodes alive that
// rank highest for it, one step a round, and reports whether it made
// one: a node that joins takes its share of replicas, not only of
// leaderships. It adds the highest-ranked node missing as a learner
// (promoted once caught up, like any other); with a voter too many, it
// removes the lowest-ranked, or hands the lead first when that is this
// node. Only while every voter is alive: one that is gone is the down
// timeout's to remove, and its absence must not move replicas at once.
func (r *Replica) rebalance(ctx context.Context, g multiraft.GroupID, st multiraft.Status, members []LiveNode, want int) bool {
	alive := raftIDs(members)
	for _, v := range st.Voters {
		if !alive[v] {
			return false
		}
	}
	ranked := rank(g, members)
	top := ranked[:min(want, len(ranked))]
	if len(st.Voters) > want {
		for i := len(ranked) - 1; i >= 0; i-- {
			v := ranked[i]
			if !slices.Contains(st.Voters, v) || slices.Contains(top, v) {
				continue
			}
			if v != r.id {
				if err := r.node.RemoveReplica(ctx, g, v); err != nil {
					r.logger.Debug("remove a replica placed elsewhere", "group", g, "replica", v, "err", err)
				}
				return true
			}
			for _, to := range top {
				if slices.Contains(st.Voters, to) && mayTakeLead(st, to) {
					if err := r.handOver(g, to); err != nil {
						r.logger.Debug("transfer leadership", "group", g, "to", to, "err", err)
					}
					return true
				}
			}
			return false
		}
		return false
	}
	for _, id := range top {
		if !slices.Contains(st.Voters, id) {
			if err := r.node.AddLearner(ctx, g, id); err != nil {
				r.logger.Debug("add learner", "group", g, "replica", id, "err", err)
			}
			return true
		}
	}
	return false
}

// caughtUp is how close to the commit index a learner's log must be for
// it to be promoted: under a steady load the commit index moves on while
// the learner catches up, and a voter a few entries behind does not slow
// its group's commits (the other voters make the quorum).
const caughtUp = 100

// pick is the alive node outside have that ranks highest for group g.
func pick(g multiraft.GroupID, members []LiveNode, have []uint64) uint64 {
	for _, id := range rank(g, members) {
		if !slices.Contains(have, id) {
			return id
		}
	}
	return 0
}

// rank orders the members by rendezvous hashing for group g, highest
// first: every leader computes the same order.
func rank(g multiraft.GroupID, members []LiveNode) []uint64 {
	score := func(id uint64) uint64 {
		h := fnv.New64a()
		var b [10]byte
		binary.BigEndian.PutUint16(b[:2], uint16(g))
		binary.BigEndian.PutUint64(b[2:], id)
		h.Write(b[:])
		return h.Sum64()
	}
	ids := make([]uint64, len(members))
	for i, m := range members {
		ids[i] = m.RaftID
	}
	slices.SortFunc(ids, func(a, b uint64) int { return cmp.Compare(score(b), score(a)) })
	return ids
}

// HandOver hands the lead of every group this node leads to a caught-up
// voter (a drain), and returns once it leads none, or at ctx's end. Only a
// voter gossip counts alive (not draining, not down) takes a lead: when no
// group it leads has one (a member alone, or a whole cluster stopping at
// once), there is nobody to wait for, and it returns at once, leaving the
// groups to elect when their nodes are back.
func (r *Replica) HandOver(ctx context.Context) error {
	r.draining.Store(true) // grow must not add replicas or leads here any more
	r.node.Leaving()
	for {
		led, _ := r.Partitions()
		if led == 0 {
			return nil
		}
		var alive map[uint64]bool // nil: no gossip, so any voter may take a lead
		if r.cfg.LiveNodes != nil {
			alive = raftIDs(r.cfg.LiveNodes())
		}
		waiting := 0 // groups with a voter that may take their lead
		for p := range partition.ID(partition.Count) {
			if led&(1<<uint(p)) == 0 {
				continue
			}
			g := multiraft.GroupID(p)
			st, err := r.node.Status(g)
			if err != nil || st.Leader != r.id {
				continue
			}
			taker := false
			for _, v := range st.Voters {
				if v == r.id || alive != nil && !alive[v] {
					continue
				}
				taker = true
				if st.Match[v]+caughtUp >= st.Commit {
					if err := r.handOver(g, v); err != nil {
						r.logger.Debug("hand over", "group", g, "to", v, "err", err)
					}
					break
				}
			}
			if taker {
				waiting++
			}
		}
		if waiting == 0 {
			r.logger.Info("no live voter to hand over to; the groups led here elect when their nodes are back", "groups", bits.OnesCount64(led))
			return nil
		}
		select {
		case <-ctx.Done():
			led, _ := r.Partitions()
			return fmt.Errorf("replica: %d groups still led here: %w", bits.OnesCount64(led), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// raftIDs is the set of the members' raft ids.
func raftIDs(members []LiveNode) map[uint64]bool {
	ids := make(map[uint64]bool, len(members))
	for _, m := range members {
		ids[m.RaftID] = true
	}
	return ids
}

// CatchUp returns once this node's replica of p holds every write
// committed in p before the call: at once when this node leads p under a
// lease, else after asking p's leader for its commit index
// (Config.ReadIndex) and waiting until this replica applied that far. A
// node reads records of partitions it does not lead (index entries,
// credentials) from its own replica, which may lag its leader by a few
// milliseconds; a reader that must find what another node just wrote
// catches up first.
func (r *Replica) CatchUp(ctx context.Context, p partition.ID) error {
	g := multiraft.GroupID(p)
	if r.cfg.Transport == nil {
		return nil
	}
	var index uint64 // 0: this node leads p under a lease
	// A catch-up had failed its request at the first refusal: the touch
	// of a token's last use failed a post with 503 while its partition's
	// lead moved.
	err := askAgain(ctx, refused, func() error {
		if r.readsHere(p) {
			index = 0
			return nil
		}
		to, term := r.Leader(p)
		if to == 0 || to == r.id {
			return &multiraft.NotLeaderError{Group: g, Leader: to, Term: term}
		}
		var err error
		index, err = r.cfg.ReadIndex(ctx, to, g)
		return err
	})
	if err != nil || index == 0 {
		return err
	}
	for {
		st, err := r.node.Status(g)
		if err != nil {
			return err
		}
		if st.Applied >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica: partition %d applied %d of %d: %w", p, st.Applied, index, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// refused reports whether err is a refusal to answer for a group's
// leader: this node's own, or another node's, which crosses the
// transport as unavailable (ReadIndex).
func refused(err error) bool {
	var nl *multiraft.NotLeaderError
	return errors.As(err, &nl) || kiterr.CodeOf(err) == kiterr.Unavailable
}

// CommitIndex is the commit index of g, which this node must lead under a
// lease: the other end of Config.ReadIndex.
func (r *Replica) CommitIndex(g multiraft.GroupID) (uint64, error) {
	st, err := r.leaderStatus(g)
	if err != nil {
		return 0, err
	}
	return st.Commit, nil
}

// leaderStatus is g's status on this node, which must lead g and hold its
// lease: what it says of the group is then the group's latest. Another
// node answers *multiraft.NotLeaderError.
func (r *Replica) leaderStatus(g multiraft.GroupID) (multiraft.Status, error) {
	if int(g) >= partition.Count {
		return multiraft.Status{}, fmt.Errorf("replica: no group %d", g)
	}
	st, err := r.node.Status(g)
	if err != nil {
		return multiraft.Status{}, err
	}
	if st.Leader != r.id || !st.LeaseValid {
		return multiraft.Status{}, &multiraft.NotLeaderError{Group: g, Leader: st.Leader, Term: st.Term}
	}
	return st, nil
}
