package multiraft

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Idle groups. Most partitions of a cluster are quiet most of the time,
// and each still cost every tick: the leader's tick and heartbeats, each
// follower's step and answer, and the leader's step of the answers. A group
// this node leads that has nothing to do ticks only every IdleTicks node
// ticks, so it heartbeats every IdleTicks × HeartbeatTicks ticks: still
// often enough to keep its lease without a gap (the interval is below
// LeaseTicks), and for its followers, which tick as ever, to hear it well
// within ElectionTicks and refuse every vote as before.
//
// Safety is raft's and the lease's as they were: raft does not depend on
// how fast a node's clock runs, and the lease is counted in node ticks from
// the stamps of heartbeats a quorum answered, whatever the group's own
// clock did. What a slower leader clock changes is how soon the leader
// gives up: it steps down (CheckQuorum) and abandons a transfer later. So a
// group stops being idle as soon as anything happens in it, and as soon as
// a voter fails to answer its heartbeats, and the leader then ticks every
// tick again.

// busyStep reports whether a stepped message is something happening in
// the group: anything but a heartbeat and its answer.
func busyStep(t pb.MessageType) bool {
	return t != pb.MsgHeartbeat && t != pb.MsgHeartbeatResp
}

// busyReady reports whether a Ready is something happening in the group:
// entries, commits, a snapshot, a change of leader or role, or reads.
func busyReady(rd *raft.Ready) bool {
	return len(rd.Entries) > 0 || len(rd.CommittedEntries) > 0 || rd.SoftState != nil ||
		!raft.IsEmptySnap(rd.Snapshot) || len(rd.ReadStates) > 0
}

// idle reports whether group g, which this node leads, may tick only every
// IdleTicks: nothing but heartbeats has happened in it for ElectionTicks,
// no proposal waits, its configuration is not changing, every voter
// answered one of its last two idle heartbeats, and every replica holds the
// whole log, committed and applied here.
func (n *Node) idle(g *group, now int64) bool {
	if now-g.active < int64(n.cfg.ElectionTicks) || len(g.waiters) > 0 || len(g.unplaced) > 0 ||
		len(g.log.cs.VotersOutgoing) > 0 || len(g.log.cs.LearnersNext) > 0 {
		return false
	}
	answered := now - 2*int64(n.cfg.IdleTicks*n.cfg.HeartbeatTicks)
	for _, v := range g.log.cs.Voters {
		if a, ok := g.acks[v]; v != n.id && (!ok || a.tick < answered) {
			return false
		}
	}
	last := g.log.lastIndex()
	if st := g.rn.BasicStatus(); st.LeadTransferee != 0 || st.Commit != last || g.log.applied != last {
		return false
	}
	caughtUp := true
	g.rn.WithProgress(func(_ uint64, _ raft.ProgressType, pr tracker.Progress) {
		caughtUp = caughtUp && pr.Match == last
	})
	return caughtUp
}
