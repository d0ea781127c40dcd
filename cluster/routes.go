package cluster

import (
	"sync/atomic"

	"github.com/kitd/kitd/internal/partition"
)

// Leader is the node that leads a partition, as far as this node knows:
// its peer address and the term (raft's) in which it was elected. An empty
// Addr is a partition without a known leader, during an election.
type Leader struct {
	Addr string
	Term uint64
}

// Router tells a node where to forward a request for a partition it does
// not host. The raft side keeps it current from the groups' leader
// changes; the node also tells it what answers taught it (Learn), so a
// stale entry costs one extra hop once, not on every request.
type Router interface {
	// Leader is p's leader; ok is false while none is known.
	Leader(p partition.ID) (l Leader, ok bool)
	// Learn records that l leads p, unless the router knows a newer term.
	// It reports whether the entry changed.
	Learn(p partition.ID, l Leader) bool
}

// RoutingTable is the in-memory Router: one entry per partition, read
// without a lock on every forwarded request and replaced whole by a
// compare-and-swap, so that of two concurrent updates the newer term wins.
type RoutingTable struct {
	entries [partition.Count]atomic.Pointer[Leader]
}

// NewRoutingTable returns a table that knows no leader.
func NewRoutingTable() *RoutingTable { return &RoutingTable{} }

// Leader implements Router.
func (t *RoutingTable) Leader(p partition.ID) (Leader, bool) {
	l := t.entries[p].Load()
	if l == nil || l.Addr == "" {
		return Leader{}, false
	}
	return *l, true
}

// Set records that addr leads p in term. An older term than the one the
// table holds is refused (a late message of an earlier election); the same
// term is accepted, since a term has at most one leader. It reports
// whether the entry changed.
func (t *RoutingTable) Set(p partition.ID, addr string, term uint64) bool {
	return t.swap(p, Leader{Addr: addr, Term: term}, false)
}

// Learn implements Router: what an answer taught is newer only with a
// newer term, so it never replaces an entry of the same term.
func (t *RoutingTable) Learn(p partition.ID, l Leader) bool {
	return t.swap(p, l, true)
}

// Forget marks p's leader unknown (an election began), keeping its term,
// so that an answer of that term or an older one cannot bring the old
// leader back.
func (t *RoutingTable) Forget(p partition.ID) {
	for {
		old := t.entries[p].Load()
		if old == nil || old.Addr == "" {
			return
		}
		if t.entries[p].CompareAndSwap(old, &Leader{Term: old.Term}) {
			return
		}
	}
}

// swap installs l as p's entry unless the table holds a newer term (or,
// with strict, the same one).
func (t *RoutingTable) swap(p partition.ID, l Leader, strict bool) bool {
	next := &l
	for {
		old := t.entries[p].Load()
		if old != nil && (l.Term < old.Term || strict && l.Term == old.Term) {
			return false
		}
		if old != nil && *old == l {
			return false
		}
		if t.entries[p].CompareAndSwap(old, next) {
			return true
		}
	}
}
