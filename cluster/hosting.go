package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/internal/partition"
)

// ErrNotHosted reports a request for an identity whose partition this node
// does not host: in a cluster, another node leads it (docs/cluster.md).
var ErrNotHosted = errors.New("cluster: partition not hosted on this node")

// errNoLease refuses a request for a partition this node hosts while its
// lead has no lease: another node may lead it by now.
var errNoLease = fmt.Errorf("%w: the lead has no lease", ErrNotHosted)

// hosting is the set of partitions whose activations a node may host: the
// partitions it leads. A request looks at it only to activate an identity;
// one that finds its activation in the node's map costs no partition
// computation, since Release empties the map of the partitions it stops.
type hosting struct {
	bits [(partition.Count + 63) / 64]atomic.Uint64
}

func (h *hosting) hosts(p partition.ID) bool {
	return h.bits[p/64].Load()&(1<<(p%64)) != 0
}

func (h *hosting) set(p partition.ID, on bool) {
	w, bit := &h.bits[p/64], uint64(1)<<(p%64)
	for {
		old := w.Load()
		next := old &^ bit
		if on {
			next = old | bit
		}
		if w.CompareAndSwap(old, next) {
			return
		}
	}
}

func (h *hosting) hostAll() {
	for p := range partition.ID(partition.Count) {
		h.set(p, true)
	}
}

// hosted returns the partition of identity, or ErrNotHosted. It is a
// hint: remember checks again under the lock that Release takes.
func (h *hosting) hosted(identity string) (partition.ID, error) {
	p := partition.Of(identity)
	if !h.hosts(p) {
		return p, ErrNotHosted
	}
	return p, nil
}

// SetLease makes every request for a hosted partition check that this
// node's lead of it is under a lease (valid): a node paused past its lease
// may have been replaced as leader, and its activations' memory may be
// stale, so it answers ErrNotHosted until its group says otherwise. It
// must be called before the node serves.
func (h *Host) SetLease(valid func(partition.ID) bool) { h.lease = valid }

// Host lets this node activate the identities of partition p, as it does
// once it leads p.
func (h *Host) Host(p partition.ID) {
	h.pidsMu.Lock()
	if !h.stopped.Load() { // a group may still elect this node as it stops
		h.set(p, true)
	}
	h.pidsMu.Unlock()
}

// Release stops every activation of partition p and refuses new ones with
// ErrNotHosted, as a node must once it no longer leads p: from its return,
// no activation of p runs here, so none answers from memory that another
// leader may have made stale. Requests in flight to the stopped
// activations come back as dead letters and are asked again (Request),
// which then finds p not hosted.
func (h *Host) Release(p partition.ID) {
	h.pidsMu.Lock()
	h.set(p, false)
	var stopping []*actor.PID
	for k, a := range h.pids {
		if a.p == p {
			stopping = append(stopping, a.pid)
			delete(h.pids, k)
		}
	}
	h.pidsMu.Unlock()
	h.stopAll(stopping)
}

// Activations counts the activations this node hosts in partition p.
func (h *Host) Activations(p partition.ID) int {
	h.pidsMu.RLock()
	defer h.pidsMu.RUnlock()
	c := 0
	for _, a := range h.pids {
		if a.p == p {
			c++
		}
	}
	return c
}

// Hosts reports whether this node hosts partition p now.
func (h *Host) Hosts(p partition.ID) bool { return h.hosts(p) }

// HostedPartitions lists the partitions this node hosts, in order.
func (h *Host) HostedPartitions() []partition.ID {
	var out []partition.ID
	for p := range partition.ID(partition.Count) {
		if h.hosts(p) {
			out = append(out, p)
		}
	}
	return out
}

// ActivationCount counts the node's activations.
func (h *Host) ActivationCount() int {
	h.pidsMu.RLock()
	defer h.pidsMu.RUnlock()
	return len(h.pids)
}
