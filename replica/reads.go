package replica

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
)

// Reads of partitions this node holds no replica of go to a node that
// holds them (actors.Env.Partition, docs/cluster.md "Reads of other
// partitions"). Anything that reads the store directly must read only
// partitions held here: a read of another would answer from nothing.

// Holds reports whether this node has a replica of p that follows a
// leader: a voter, or a learner being filled (a read catches up first).
// A replica whose group removed this node stays on the node, behind;
// it hears from no leader once an election timeout passed (its own
// campaigns fail), and is then not held: its reads go elsewhere.
func (r *Replica) Holds(p partition.ID) bool {
	return r.InGroup(p) && r.heard[p].Load()
}

// InGroup reports whether this node's replica of p is a member of its
// group, as the configuration it applied says, whether or not it hears a
// leader now: during an election it learns the next leader itself.
func (r *Replica) InGroup(p partition.ID) bool {
	return int(p) < partition.Count && r.node.Holds(multiraft.GroupID(p))
}

// unheldReads counts the reads CheckRead found, and bounds what it logs.
type unheldReads struct {
	count atomic.Uint64
}

// unheldReadsLogged is how many of them are logged, with their stacks:
// enough to find the site, not a flood.
const unheldReadsLogged = 20

// CheckRead is the store's read check in a cluster
// (persistence.Store.SetReadCheck): a read of a key of a partition this
// node holds no replica of, which only a read outside actors.Env.Partition
// makes, is a bug. It is counted (kitd_reads_unheld_total, which the e2e
// tests of a cluster want at zero) and logged with its stack, never with
// the key (a credential's key is its hash).
func (r *Replica) CheckRead(k []byte) {
	p, ok := partition.OfKey(k)
	if !ok || r.Holds(p) {
		return
	}
	if n := r.unheld.count.Add(1); n <= unheldReadsLogged {
		r.logger.Error("BUG: read of a partition this node holds no replica of, outside actors.Env.Partition",
			"partition", p, "count", n, "stack", string(debug.Stack()))
	}
}
