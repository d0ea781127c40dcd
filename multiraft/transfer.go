package multiraft

import (
	"bytes"
	"encoding/binary"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Transfers and the lease. The lease (lease.go) rests on followers that
// refuse every vote for ElectionTicks after they heard their leader. Raft
// makes one exception: the campaign of a transfer's target (started by the
// leader's MsgTimeoutNow) asks for forced votes, which skip that refusal.
// A transfer raft gave up on, because its target was slow (paused, or its
// link), can still be acted on: the target reads the TimeoutNow late and
// campaigns with force, after the old leader renewed its lease from the
// other voters' answers, and wins with their votes: two leaders, the old
// one serving reads from memory under a lease it believes valid.
//
// So a forced vote gets the lease's refusal too, unless the leader said
// the transfer is under way: a leader's heartbeats name the target of its
// transfer (the stamp's context grows by the target's id), and a follower
// that heard its leader within ElectionTicks grants a forced vote only to
// the candidate its leader's latest heartbeat named (refusesForcedVote).
// Once raft gives a transfer up, the heartbeats name nobody, and a quorum
// that answered one refuses the late campaign for as long as any lease
// those answers gave can last. The old leader itself grants such a vote, as
// raft has it, but steps down as it does, so its lease ends first.
//
// The leader holds its TimeoutNow until the voters were told
// (transferTold): its own vote and those of the voters besides the target
// that answered a heartbeat naming it make a quorum, or every such voter
// answered, one heartbeat round after the transfer was asked. The
// target's campaign then wins without the old leader's vote, and a
// refused forced vote (kitd_raft_forced_votes_refused_total) means a
// campaign no leader announced. Voters that do not answer (dead) hold it
// at most transferTellTicks: it then goes once the target's own vote
// makes the quorum with the others', the old leader's as raft has it.

// campaignTransfer is the context of raft's forced votes (raft.go).
var campaignTransfer = []byte("CampaignTransfer")

// stampLen is a heartbeat stamp's length (stampNow); a context of
// stampLen+8 bytes also names the target of a transfer.
const stampLen = 16

// heartbeatContext is the context of g's heartbeats: the cycle's stamp hb,
// and the target of a transfer this node asked, if one is under way.
func (g *group) heartbeatContext(hb []byte) []byte {
	if g.transferee == 0 {
		return hb
	}
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, stampLen+8), hb...), g.transferee)
}

// namedIn returns the transfer target a heartbeat's context names, or 0.
func namedIn(ctx []byte) uint64 {
	if len(ctx) != stampLen+8 {
		return 0
	}
	return binary.BigEndian.Uint64(ctx[stampLen:])
}

// transferTellTicks bounds how long a TimeoutNow waits for voters that
// do not answer the heartbeats naming its target.
const transferTellTicks = 2

// startTransfer notes a transfer to target this node asked as g's leader
// at tick now.
func (g *group) startTransfer(target uint64, now int64) {
	g.transferee, g.transferAt, g.heldTimeoutNow = target, now, nil
	clear(g.told)
	clear(g.acks) // a lease after it counts only answers to later heartbeats (acknowledged)
	if g.told == nil {
		g.told = make(map[uint64]bool)
	}
}

// endTransferIfDone forgets the transfer once raft no longer runs it: it
// gave it up, or this node no longer leads.
func (g *group) endTransferIfDone() {
	if g.transferee == 0 {
		return
	}
	if g.state == raft.StateLeader && g.rn.BasicStatus().LeadTransferee == g.transferee {
		return
	}
	g.transferee, g.heldTimeoutNow = 0, nil
	clear(g.told)
}

// holdsTimeoutNow reports whether m, raft's TimeoutNow to the target, must
// wait for the voters to be told, and keeps it if so.
func (n *Node) holdsTimeoutNow(g *group, m *pb.Message) bool {
	if m.To != g.transferee || n.transferTold(g) {
		return false
	}
	held := *m
	g.heldTimeoutNow = &held
	return true
}

// heardTransfer notes that voter from answered a heartbeat whose context
// ctx named the transfer's target, and sends the TimeoutNow held for it
// once the voters were told.
func (n *Node) heardTransfer(g *group, from uint64, ctx []byte) {
	if g.transferee == 0 || namedIn(ctx) != g.transferee {
		return
	}
	g.told[from] = true
	n.sendTimeoutNowIfTold(g)
}

// sendTimeoutNowIfTold sends the TimeoutNow held for g's transfer once
// the voters were told (transferTold).
func (n *Node) sendTimeoutNowIfTold(g *group) {
	if held := g.heldTimeoutNow; held != nil && g.rn.BasicStatus().LeadTransferee == g.transferee && n.transferTold(g) {
		g.heldTimeoutNow = nil
		n.tr.Send([]Message{{Group: g.id, Msg: *held}})
	}
}

// transferTold reports whether the target's forced campaign can go: in
// each voter set, this node and the told voters besides the target make a
// quorum; or, once all of those were told or transferTellTicks passed,
// they make one with the target.
func (n *Node) transferTold(g *group) bool {
	late := n.ticks.Load()-g.transferAt >= transferTellTicks
	told := func(voters []uint64) bool {
		k, target, untold := 0, 0, 0
		for _, v := range voters {
			switch {
			case v == n.id || v != g.transferee && g.told[v]:
				k++
			case v == g.transferee:
				target = 1
			default:
				untold++
			}
		}
		quorum := len(voters)/2 + 1
		return k >= quorum || (untold == 0 || late) && k+target >= quorum
	}
	return told(g.log.cs.Voters) && (len(g.log.cs.VotersOutgoing) == 0 || told(g.log.cs.VotersOutgoing))
}

// noteLeaderWord records, on a follower, what its leader's heartbeat m
// named and when it was heard, unless a newer heartbeat of the term came
// first: a late or duplicated copy must not name again a target its
// leader gave up on.
func (n *Node) noteLeaderWord(g *group, m *pb.Message) {
	var sent int64 // the leader's tick in the stamp
	if len(m.Context) >= 8 {
		sent = int64(binary.BigEndian.Uint64(m.Context))
	}
	if m.Term == g.heardTerm && sent < g.heardStamp {
		return
	}
	g.heardTerm, g.heardStamp, g.heardAt, g.named = m.Term, sent, n.ticks.Load(), namedIn(m.Context)
}

// refusesForcedVote reports whether a follower refuses m, a forced vote of
// a newer term: it heard its leader within ElectionTicks, and the leader's
// latest heartbeat did not name m's candidate as its transfer's target.
func (n *Node) refusesForcedVote(g *group, m *pb.Message) bool {
	if m.Type != pb.MsgVote || !bytes.Equal(m.Context, campaignTransfer) || g.state == raft.StateLeader {
		return false
	}
	return g.heardTerm != 0 && m.Term > g.heardTerm && n.ticks.Load()-g.heardAt < int64(n.cfg.ElectionTicks) && g.named != m.From
}
