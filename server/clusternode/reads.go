package clusternode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster/membership"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Reads of partitions this node holds no replica of (actors.RemoteReader,
// docs/cluster.md "Reads of other partitions"): asked of a node that
// holds the partition, its leader first (which answers under its lease
// without a round trip more), as gossip publishes who leads and holds
// what.

var _ actors.RemoteReader = (*Node)(nil)

// readTimeout bounds one remote read, as a request is bounded.
const readTimeout = 5 * time.Second

// readAttempts is how many holders a read tries before it fails: a
// stale leader, then another replica.
const readAttempts = 3

// Holds reports whether this node has a replica of p that follows a
// leader gossip counts a member: one whose leader left or died reads
// nothing here until it follows the next (a replica its group removed
// may name a departed leader for as long as it stays).
func (m *Node) Holds(p partition.ID) bool {
	r := m.started.Load()
	if r == nil || !r.Holds(p) {
		return false
	}
	to, _ := r.Leader(p)
	return to == m.id || m.isMember(to)
}

// ReadRecords asks a node that holds q's partition.
func (m *Node) ReadRecords(q *kitpb.ReadRecords) (*kitpb.Records, error) {
	p := partition.ID(q.Partition)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var last error
	for i, addr := range m.holders(p, readAttempts) {
		res, err := m.pt.Call(ctx, addr, q, m.reqs.next())
		if err == nil {
			recs, ok := res.(*kitpb.Records)
			if !ok {
				return nil, fmt.Errorf("member: ReadRecords answered %T", res)
			}
			return recs, nil
		}
		if errors.Is(err, peer.ErrRefused) {
			return nil, err // a malformed request: asking another will not help
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, kiterr.New(kiterr.Unavailable, fmt.Sprintf("no node holding partition %d answered in time", p)))
		}
		last = fmt.Errorf("read partition %d from holder %d: %w", p, i+1, err)
	}
	return nil, errors.Join(last, kiterr.New(kiterr.Unavailable, fmt.Sprintf("no node holding partition %d answered", p)))
}

// holders lists the node-to-node addresses of at most n other nodes that
// hold p: its leaders first, as gossip last said.
func (m *Node) holders(p partition.ID, n int) []string {
	var leaders, others []string
	bit := membership.Partitions(1) << uint(p)
	for _, mb := range m.ms.Nodes() {
		if mb.Meta.RaftID == m.id || mb.Meta.PeerAddr == "" ||
			mb.State != membership.StateAlive && mb.State != membership.StateDraining {
			continue
		}
		switch {
		case mb.Meta.Led&bit != 0:
			leaders = append(leaders, mb.Meta.PeerAddr)
		case mb.Meta.Replicated&bit != 0:
			others = append(others, mb.Meta.PeerAddr)
		}
	}
	out := append(leaders, others...)
	return out[:min(n, len(out))]
}

// leaderOf is the raft id of p's leader as gossip last said; 0: none
// (replica.Config.LeaderOf).
func (m *Node) leaderOf(p partition.ID) uint64 {
	bit := membership.Partitions(1) << uint(p)
	for _, mb := range m.ms.Nodes() {
		if mb.Meta.RaftID != m.id && mb.Meta.Led&bit != 0 &&
			(mb.State == membership.StateAlive || mb.State == membership.StateDraining) {
			return mb.Meta.RaftID
		}
	}
	return 0
}

// serveRead answers another member's ReadRecords from this node's replica,
// caught up with the leader first: what was answered 2xx through any node
// before the call is in the answer. A request that breaks
// actors.CheckReadRecords is refused, never read.
func (m *Node) serveRead(ctx context.Context, from string, q *kitpb.ReadRecords) (*kitpb.Records, error) {
	if err := actors.CheckReadRecords(q); err != nil {
		return nil, &peer.RefusedError{Reason: fmt.Sprintf("ReadRecords from %s: %v", from, err)}
	}
	p := partition.ID(q.Partition)
	r := m.started.Load()
	if r == nil || !r.Holds(p) {
		return nil, kiterr.New(kiterr.Unavailable, fmt.Sprintf("partition %d has no replica here", p))
	}
	if err := r.CatchUp(ctx, p); err != nil {
		return nil, fmt.Errorf("%w: %w", err, kiterr.New(kiterr.Unavailable, "this node's replica could not catch up"))
	}
	return actors.ServeReadRecords(m.cfg.Store, q)
}
