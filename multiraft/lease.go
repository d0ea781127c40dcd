package multiraft

import (
	"encoding/binary"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The lease. A follower that heard from the leader refuses every vote for
// ElectionTicks (CheckQuorum with PreVote), so once a quorum has answered a
// heartbeat sent at tick t, no other leader can exist before t+ElectionTicks.
// The leader stamps each heartbeat with its clock (raft echoes a heartbeat's
// context in the answer) and holds the lease until LeaseTicks after the
// newest stamp that a quorum has answered.

// LeaseValid reports whether this node leads g under a lease: no other node
// can have been elected leader, so its applied state is the latest and a
// read may be served from it without a round trip. It reads two atomics.
func (n *Node) LeaseValid(g GroupID) bool {
	grp := n.lookup(g)
	if grp == nil {
		return false
	}
	if n.ticks.Load() >= grp.leaseUntil.Load() {
		return false
	}
	return n.cfg.TickInterval == 0 || int64(time.Since(n.start)) < grp.leaseUntilNanos.Load()
}

func (n *Node) stampNow() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(n.ticks.Load()))
	return binary.BigEndian.AppendUint64(b, uint64(time.Since(n.start)))
}

// acknowledged records the stamp a follower echoed.
func (n *Node) acknowledged(g *group, m *pb.Message) {
	ctx := m.Context
	if len(ctx) != stampLen && len(ctx) != stampLen+8 {
		return
	}
	n.heardTransfer(g, m.From, ctx)
	if len(ctx) != stampLen {
		// The answer to a heartbeat that named a transfer's target gives
		// no lease: its follower grants the target's forced vote until an
		// unnamed heartbeat reaches it (transfer.go).
		return
	}
	s := stamp{tick: int64(binary.BigEndian.Uint64(ctx)), nanos: int64(binary.BigEndian.Uint64(ctx[8:]))}
	if s.tick <= g.transferAt {
		return // sent before the last transfer was asked, or in its tick
	}
	if old, ok := g.acks[m.From]; ok && old.tick >= s.tick {
		return
	}
	g.acks[m.From] = s
	n.renewLease(g, n.ticks.Load())
}

// renewLease recomputes the lease of a group this node leads: the newest
// stamp a quorum of each voter set (both during a joint change) answered.
func (n *Node) renewLease(g *group, now int64) {
	// No lease while a transfer runs, raft's or the driver's view of it
	// (raft may give one up between ticks, when its target leaves the
	// configuration; endTransferIfDone sees that at the next tick).
	if g.transferee != 0 || g.rn.BasicStatus().LeadTransferee != 0 {
		g.leaseUntil.Store(0)
		g.leaseUntilNanos.Store(0)
		return
	}
	self := stamp{tick: now, nanos: int64(time.Since(n.start))}
	q := n.quorumStamp(g, g.log.cs.Voters, self)
	if out := g.log.cs.VotersOutgoing; len(out) > 0 {
		if o := n.quorumStamp(g, out, self); o.tick < q.tick {
			q = o
		}
	}
	if q.tick < 0 {
		return
	}
	g.leaseUntil.Store(q.tick + int64(n.cfg.LeaseTicks))
	g.leaseUntilNanos.Store(q.nanos + int64(n.cfg.LeaseTicks)*int64(n.cfg.TickInterval))
}

// quorumStamp is the newest stamp that a majority of voters has answered
// (this node answers its own at once); tick -1 when no majority has.
func (n *Node) quorumStamp(g *group, voters []uint64, self stamp) stamp {
	if len(voters) == 0 {
		return stamp{tick: -1}
	}
	got := make([]stamp, 0, len(voters))
	for _, v := range voters {
		if v == n.id {
			got = append(got, self)
		} else if s, ok := g.acks[v]; ok {
			got = append(got, s)
		}
	}
	need := len(voters)/2 + 1
	if len(got) < need {
		return stamp{tick: -1}
	}
	slices.SortFunc(got, func(a, b stamp) int { return int(b.tick - a.tick) })
	return got[need-1]
}
