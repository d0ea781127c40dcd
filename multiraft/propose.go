package multiraft

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// An entry proposed by a node starts with a header naming its proposer and
// the proposer's proposal id: 16 bytes. Replies are matched to applied
// entries by it, never by index alone, since a later leader may put another
// entry at the index a proposal first had.
const headerLen = 16

type header struct{ node, seq uint64 }

func splitHeader(data []byte) (header, []byte, bool) {
	if len(data) < headerLen {
		return header{}, nil, false
	}
	return header{
		node: binary.BigEndian.Uint64(data),
		seq:  binary.BigEndian.Uint64(data[8:]),
	}, data[headerLen:], true
}

func (h header) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, h.node)
	return binary.BigEndian.AppendUint64(dst, h.seq)
}

// randomSeq starts a node's proposal ids at a random point, so that an entry
// proposed before a restart never matches a waiter after it.
func randomSeq() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// proposal is one caller waiting in Propose or a membership change.
type proposal struct {
	g     GroupID
	seq   uint64
	data  []byte            // header + payload, for a normal entry
	cc    *pb.ConfChangeV2  // or a configuration change
	term  uint64            // the group's term when it entered the log
	index uint64            // its log index, once placed
	done  chan proposalDone // capacity 1
}

type proposalDone struct {
	index uint64
	err   error
}

var proposalPool = sync.Pool{New: func() any { return &proposal{done: make(chan proposalDone, 1)} }}

func (p *proposal) finish(index uint64, err error) { p.done <- proposalDone{index, err} }

// Propose replicates data through group g and returns its log index once a
// quorum has committed it and this node has applied it. It must be called
// on the group's leader: elsewhere it returns a *NotLeaderError. When
// ErrLeadershipLost, ErrStopped or ctx's error is returned, the outcome is
// unknown (the entry may still commit): a retry must be made harmless by
// the data itself (a request id the state machine remembers).
func (n *Node) Propose(ctx context.Context, g GroupID, data []byte) (uint64, error) {
	p := proposalPool.Get().(*proposal)
	p.g, p.seq = g, n.seq.Add(1)
	p.data = append(header{node: n.id, seq: p.seq}.appendTo(make([]byte, 0, headerLen+len(data))), data...)
	return n.wait(ctx, p)
}

// Proposal is one entry of ProposeAll: data for group Group.
type Proposal struct {
	Group GroupID
	Data  []byte
}

// ProposeAll proposes every entry at once and returns when each is applied
// or failed; when any failed, its error is a *ProposalsError. The
// entries reach the driver together, so they enter their groups' logs in
// the same cycle: on a node whose groups have one voter, one WAL sync
// commits them all and one batch applies them, so after a crash either
// every entry or none is applied. Across nodes the groups commit
// independently, and a caller must order its writes so that any prefix of
// them is a valid state (docs/cluster.md, "Global indexes").
func (n *Node) ProposeAll(ctx context.Context, props []Proposal) error {
	if len(props) == 1 {
		if _, err := n.Propose(ctx, props[0].Group, props[0].Data); err != nil {
			return &ProposalsError{Errs: []error{err}}
		}
		return nil
	}
	ps := make([]*proposal, len(props))
	events := make([]event, len(props))
	for i, pr := range props {
		p := proposalPool.Get().(*proposal)
		p.g, p.seq = pr.Group, n.seq.Add(1)
		p.data = append(header{node: n.id, seq: p.seq}.appendTo(make([]byte, 0, headerLen+len(pr.Data))), pr.Data...)
		ps[i], events[i] = p, event{prop: p}
	}
	if err := n.enqueue(events...); err != nil {
		return &ProposalsError{Errs: slices.Repeat([]error{err}, len(props))}
	}
	var errs []error
	for i, p := range ps {
		if _, err := n.await(ctx, p); err != nil {
			if errs == nil {
				errs = make([]error, len(ps))
			}
			errs[i] = err
		}
	}
	if errs != nil {
		return &ProposalsError{Errs: errs}
	}
	return nil
}

// Campaign makes this node stand for leader of group g now instead of
// after an election timeout: a node that holds the only voter of its groups
// leads them at once.
func (n *Node) Campaign(g GroupID) error {
	var err error
	if derr := n.do(func() {
		grp := n.lookup(g)
		if grp == nil {
			err = ErrUnknownGroup
			return
		}
		if grp.state != raft.StateLeader {
			err = grp.rn.Campaign()
		}
	}); derr != nil {
		return derr
	}
	return err
}

func (n *Node) wait(ctx context.Context, p *proposal) (uint64, error) {
	if err := n.enqueue(event{prop: p}); err != nil {
		return 0, err
	}
	return n.await(ctx, p)
}

// await waits for an enqueued proposal's outcome.
func (n *Node) await(ctx context.Context, p *proposal) (uint64, error) {
	select {
	case d := <-p.done:
		*p = proposal{done: p.done}
		proposalPool.Put(p)
		return d.index, d.err
	case <-ctx.Done():
		return 0, ctx.Err() // p stays with the driver, which finishes it later
	}
}

// propose runs on the driver.
func (n *Node) propose(p *proposal) {
	g := n.lookup(p.g)
	if g == nil {
		p.finish(0, ErrUnknownGroup)
		return
	}
	if g.state != raft.StateLeader {
		p.finish(0, &NotLeaderError{Group: g.id, Leader: g.lead, Term: g.term})
		return
	}
	var err error
	if p.cc != nil {
		p.cc.Context = header{node: n.id, seq: p.seq}.appendTo(nil)
		err = g.rn.ProposeConfChange(p.cc)
	} else {
		err = g.rn.Propose(p.data)
	}
	if err != nil {
		p.finish(0, ErrProposalDropped)
		return
	}
	p.term = g.term
	g.waiters[p.seq] = p
	g.unplaced = append(g.unplaced, p)
}

// place finds this node's proposals among the entries a group appends. A
// proposal raft accepted but did not append (a configuration change while
// another is pending becomes an empty entry) is dropped here, so its caller
// does not wait for an entry that will never come.
func (n *Node) place(g *group, ents []pb.Entry) {
	if len(g.unplaced) == 0 {
		return
	}
	for _, e := range ents {
		var h header
		var ok bool
		switch e.Type {
		case pb.EntryNormal:
			h, _, ok = splitHeader(e.Data)
		default:
			if cc, err := decodeConfChange(&e); err == nil {
				h, _, ok = splitHeader(cc.AsV2().Context)
			}
		}
		if ok && h.node == n.id {
			if p := g.waiters[h.seq]; p != nil {
				p.index = e.Index
			}
		}
	}
	for i, p := range g.unplaced {
		if p.index == 0 && g.waiters[p.seq] == p {
			delete(g.waiters, p.seq)
			p.finish(0, ErrProposalDropped)
		}
		g.unplaced[i] = nil
	}
	g.unplaced = g.unplaced[:0]
}

// settle marks this node's proposal h as applied at index; it is answered
// once the cycle's batch is written.
func (n *Node) settle(g *group, h header, index uint64) {
	if h.node != n.id {
		return
	}
	if p := g.waiters[h.seq]; p != nil {
		delete(g.waiters, h.seq)
		p.index = index
		n.settled = append(n.settled, p)
	}
}

// AddLearner adds node id to group g as a learner: it receives the log (or
// a snapshot) but does not vote. The node must hold the group (Join) to
// receive it. It returns once the change is applied here.
func (n *Node) AddLearner(ctx context.Context, g GroupID, id uint64) error {
	return n.changeConf(ctx, g, pb.ConfChangeAddLearnerNode, id)
}

// Promote makes learner id of group g a voter.
func (n *Node) Promote(ctx context.Context, g GroupID, id uint64) error {
	return n.changeConf(ctx, g, pb.ConfChangeAddNode, id)
}

// RemoveReplica removes node id (voter or learner) from group g. A leader
// that removes itself steps down once the change is applied.
func (n *Node) RemoveReplica(ctx context.Context, g GroupID, id uint64) error {
	return n.changeConf(ctx, g, pb.ConfChangeRemoveNode, id)
}

func (n *Node) changeConf(ctx context.Context, g GroupID, typ pb.ConfChangeType, id uint64) error {
	p := proposalPool.Get().(*proposal)
	p.g, p.seq = g, n.seq.Add(1)
	p.cc = &pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: typ, NodeID: id}}}
	_, err := n.wait(ctx, p)
	return err
}

// TransferLeadership asks the leader of g to hand leadership to voter to.
// It returns once the transfer has started; LeaderChanges tells when it is
// done. The lease ends at once: the new leader may be elected before the
// old lease would have run out.
func (n *Node) TransferLeadership(g GroupID, to uint64) error {
	var err error
	if derr := n.do(func() {
		grp := n.lookup(g)
		switch {
		case grp == nil:
			err = ErrUnknownGroup
		case grp.state != raft.StateLeader:
			err = &NotLeaderError{Group: g, Leader: grp.lead, Term: grp.term}
		default:
			grp.leaseUntil.Store(0)
			grp.leaseUntilNanos.Store(0)
			if grp.transferee != to || grp.rn.BasicStatus().LeadTransferee != to {
				// Asked again (a hand-over asks until it is done), raft
				// goes on with the transfer under way and sends no other
				// TimeoutNow: the one held must stay.
				grp.startTransfer(to, n.ticks.Load())
			}
			grp.rn.TransferLeader(to)
		}
	}); derr != nil {
		return derr
	}
	return err
}

// Status reports group g as this node sees it.
func (n *Node) Status(g GroupID) (Status, error) {
	var st Status
	err := ErrUnknownGroup
	if derr := n.do(func() {
		grp := n.lookup(g)
		if grp == nil {
			return
		}
		s := grp.rn.BasicStatus()
		cs := grp.log.cs
		st = Status{
			Group:    g,
			ID:       n.id,
			Leader:   s.Lead,
			Term:     s.HardState.Term,
			Commit:   s.HardState.Commit,
			Applied:  grp.log.applied,
			Voters:   slices.Concat(cs.Voters, cs.VotersOutgoing),
			Learners: slices.Concat(cs.Learners, cs.LearnersNext),
		}
		if grp.state == raft.StateLeader {
			st.Match = make(map[uint64]uint64)
			st.Active = make(map[uint64]bool)
			grp.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
				st.Match[id] = pr.Match
				st.Active[id] = pr.RecentActive
			})
		}
		err = nil
	}); derr != nil {
		return Status{}, derr
	}
	st.LeaseValid = err == nil && n.LeaseValid(g)
	return st, err
}

// Holds reports whether this node has a replica of g that its applied
// configuration counts as a member (a voter or a learner), without
// waiting for the driver: not one that was removed, nor one joined and
// waiting for its first snapshot.
func (n *Node) Holds(g GroupID) bool {
	grp := n.lookup(g)
	return grp != nil && grp.member.Load()
}

// Groups lists the groups this node has a replica of, in order.
func (n *Node) Groups() []GroupID {
	t := *n.groups.Load()
	out := make([]GroupID, 0, len(t))
	for g := range t {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Flush returns once the driver has handled every event queued before it
// and the cycle that followed them. Tests use it to let a node catch up.
func (n *Node) Flush() error {
	if err := n.do(func() {}); err != nil {
		return err
	}
	return n.do(func() {}) // queued after that cycle, so it runs after it
}
