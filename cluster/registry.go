package cluster

import (
	"strconv"

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
// buckets (512 shards) take about 150 KB, allocated at start, and still
// spread the registry's locks over many more shards than a node has cores.
const registryBuckets = 16

// shrinkRegistry moves the processes of a new actor system's registry into
// registryBuckets buckets. It must run before the system is used by any
// other goroutine.
func shrinkRegistry(system *actor.ActorSystem) {
	buckets := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range buckets.LocalPIDs {
		buckets.LocalPIDs[i] = cmap.New()
	}
	fillShards(buckets)
	for _, old := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id, p := range old.Items() {
			buckets.GetBucket(id).Set(id, p)
		}
	}
	system.ProcessRegistry.LocalPIDs = buckets
}

// fillShards registers and removes a process in every shard, so that each
// allocates its first slots now: the heap of an idle node is then flat from
// its start, instead of creeping up to the bound as futures find shards.
func fillShards(buckets *actor.SliceMap) {
	shards := registryBuckets * cmap.SHARD_COUNT
	seen := make(map[*cmap.ConcurrentMapShared]bool, shards)
	for i := 0; len(seen) < shards && i < 1<<20; i++ { // about 3,500 ids do
		id := "fill$" + strconv.Itoa(i)
		bucket := buckets.GetBucket(id)
		if shard := bucket.GetShard(id); !seen[shard] {
			seen[shard] = true
			bucket.Set(id, nil)
			bucket.Remove(id)
		}
	}
}
