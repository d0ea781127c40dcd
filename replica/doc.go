// Package replica runs kitd's partitions as raft groups: group g holds
// partition g's key range (partition.KeyRange). It owns the two sides
// that tie the actors to package multiraft:
//
//   - Records, the multiraft.StateMachine of kitd's records: an entry is
//     a batch of writes of one partition in Pebble's batch encoding, and
//     applying it writes them; a snapshot is the partition's range.
//   - Log, the actors' Committer: it splits an actor's batch by partition
//     and proposes each part to its group, and returns once every part is
//     committed and applied, so that the actor then reads its own writes.
//
// It also decides where activations run: Start hosts a partition's
// activations on this node only while this node leads its group, and only
// after everything committed before this node led it is applied
// (docs/cluster.md, "Where an identity lives").
package replica
