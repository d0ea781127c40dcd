package cluster

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryBuckets is how many buckets the node's process registry has, each
// a concurrent map of 32 shards. protoactor makes 1,024 (32,768 shards), and
// a shard allocates its first slots when a process first lands in it, slots
// that Go maps never give back: the churn of short-lived processes (a
// future per identity lookup and per gossip round, an activation per
// request for an absent entity) keeps filling shards in until 9.4 MB stay
// allocated, reached after a few hundred thousand registrations. An idle
// node's gossip loop alone grew the heap about 41 KB a minute that way. 16
// buckets (512 shards) bound that at about 150 KB and still spread the
// registry's locks over many more shards than a node has cores.
const registryBuckets = 16

// shrinkRegistry moves the processes of a new actor system's registry into
// registryBuckets buckets. It must run before the system is used by any
// other goroutine.
func shrinkRegistry(system *actor.ActorSystem) {
	buckets := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range buckets.LocalPIDs {
		buckets.LocalPIDs[i] = cmap.New()
	}
	for _, old := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id, p := range old.Items() {
			buckets.GetBucket(id).Set(id, p)
		}
	}
	system.ProcessRegistry.LocalPIDs = buckets
}
