package multiraft

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Appends that carry only a commit index. As soon as a leader's commit
// index rises, raft sends every follower an append with no entries to say
// so, and each follower answers it: under load that is half of a leader's
// appends and half of their answers, each a step, an encoding and a
// decoding on both sides. A follower gets the same number with the
// group's next append or heartbeat (every tick), and needs it only to
// apply, which nothing waits on for long: the leader answers writes and
// reads, a new leader applies an entry of its own term before it hosts,
// and a catch-up asks the leader and waits. So such an append is not
// sent, raft being built for lost messages, except where it does more
// than tell the commit index:
//   - to a follower not known to hold every entry sent to it, when the
//     append tells no higher commit index: raft sends it so after a
//     heartbeat's answer, to have the follower answer and so recover
//     entries lost on the way;
//   - to a follower being probed, or whose window of appends in flight is
//     full;
//   - the first to tell a follower that a configuration change is
//     committed: a replica the change removes hears of the group no more
//     once its leader applies it, and must apply it itself to know.

// onlyCommit reports whether m, a message of a group this node leads, is
// an append that only tells a follower the commit index, and can stay
// unsent. It is called on every append the driver sends, in raft's order.
func (g *group) onlyCommit(m *pb.Message) bool {
	if m.Type != pb.MsgApp {
		return false
	}
	carried := g.carried[m.To]
	g.carried[m.To] = max(carried, m.Commit)
	// A follower commits no further than the last entry an append names.
	if min(m.Commit, m.Index+uint64(len(m.Entries))) >= g.confIndex && !g.confTold[m.To] {
		g.confTold[m.To] = true
		return false
	}
	if len(m.Entries) > 0 {
		return false
	}
	only := false
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == m.To && pr.State == tracker.StateReplicate && !pr.MsgAppFlowPaused {
			// The follower holds all it was sent, or raft is telling it a
			// higher commit index (an append that asks again, as after a
			// heartbeat's answer, carries the same one).
			only = pr.Match == m.Index || m.Commit > carried
		}
	})
	return only
}

// noteConfEntries follows the newest configuration entry in the log once
// ents, a Ready's, are appended to it.
func (g *group) noteConfEntries(ents []pb.Entry) {
	if len(ents) == 0 {
		return
	}
	if ents[0].Index <= g.confIndex {
		// They replaced the tail that held it: the newest is another.
		g.confIndex = g.log.lastConfIndex()
		clear(g.confTold)
		return
	}
	for i := range ents {
		if ents[i].Type != pb.EntryNormal {
			g.confIndex = ents[i].Index
			clear(g.confTold)
		}
	}
}

// coalesce merges, in place, what a group's messages of one cycle say
// twice to one node, and returns them. Raft makes an append to each
// follower for every proposal and an answer for every append; within a
// cycle, appends that follow each other in the log become one (up to
// maxBytes of entries), and of the answers that accept appends in one
// term only the one naming the highest index stays, which says all the
// others did. What is merged leaves where the first of its messages was.
// Under load it spares a sixth of the appends and a fifth of the answers
// (bench/README.md "Appends that only tell the commit index").
func coalesce(ms []pb.Message, maxBytes uint64) []pb.Message {
	if len(ms) < 2 {
		return ms
	}
	out := ms[:0]
next:
	for _, m := range ms {
		for i := range out {
			if o := &out[i]; o.To == m.To && o.Term == m.Term && o.Type == m.Type {
				switch {
				case m.Type == pb.MsgApp && len(m.Entries) > 0 && len(o.Entries) > 0 &&
					o.Index+uint64(len(o.Entries)) == m.Index && entryBytes(o.Entries)+entryBytes(m.Entries) <= maxBytes:
					// A new slice: raft's log may share the entries' array.
					o.Entries = append(append(make([]pb.Entry, 0, len(o.Entries)+len(m.Entries)), o.Entries...), m.Entries...)
					o.Commit = max(o.Commit, m.Commit)
					continue next
				case m.Type == pb.MsgAppResp && !m.Reject && !o.Reject:
					o.Index = max(o.Index, m.Index)
					continue next
				}
			}
		}
		out = append(out, m)
	}
	clear(ms[len(out):])
	return out
}

func entryBytes(ents []pb.Entry) uint64 {
	var n uint64
	for i := range ents {
		n += uint64(len(ents[i].Data))
	}
	return n
}
