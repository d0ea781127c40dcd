// Package replication runs many raft groups on one node: the consensus
// engine of kitd's cluster, one group per partition (docs/cluster.md,
// "Replication: one raft group per partition"). It is built on
// go.etcd.io/raft/v3's RawNode. It keeps each group's log and hard state
// in the raft log (package raftlog, files of its own beside the store),
// and owns the keys under r/ in the node's Pebble store: each group's
// conf state, compaction mark and applied index. It knows nothing of
// actors or of what an entry means: a StateMachine turns entries into
// records, and a Transport carries messages between nodes. It never talks
// HTTP and never reads the keys of the state it replicates.
//
// # The cycle
//
// One driver goroutine serves every group of the node (the multi-raft
// shape of CockroachDB and TiKV). Each cycle it:
//
//  1. collects the Ready of every group that has one, and sends at once
//     the appends and heartbeats of the groups it leads whose term and
//     vote the cycle leaves as they are (a leader may replicate what it
//     is still writing; its own acknowledgement waits for its sync);
//  2. appends every group's new entries and hard state to the raft log,
//     and puts every group's snapshot (restored through
//     StateMachine.Restore) and committed entries (StateMachine.Apply,
//     with each group's applied index and conf state) in ONE persistence
//     batch;
//  3. writes the raft log with ONE fdatasync when raft needs it before
//     the messages leave (new entries, term or vote), then the batch
//     without a sync;
//  4. sends every other message in one Transport.Send (snapshots stream
//     on goroutines of their own from StateMachine.Snapshot), less the
//     appends that would only tell a follower the commit index, which it
//     learns from the next append or heartbeat, and with what a group's
//     messages say twice to one node said once (appends.go);
//  5. answers the proposals whose entries it applied, tells the consumer of
//     leader changes (LeaderChanges), and calls Advance.
//
// The raft log apart from Pebble is what CockroachDB and TiKV did: its
// entries in Pebble were memtable inserts, a second WAL write and their
// flushes, a third of a replica's CPU. The batch needs no sync: the raft
// log keeps every entry past the compaction mark that is durable in the
// store (it deletes a segment only after a store sync), so a crash that
// loses the batch loses only what applying the log again rebuilds. A
// cycle that restored a snapshot is the exception: it commits the
// restored state in a batch of its own, synced, and only then rewrites the
// group's raft log, which must never drop entries the store may still
// need.
//
// # What a crash does
//
// A Propose that returned is durable: its entry was synced to a quorum's
// raft logs before this node applied it. After a crash, a node reopens
// every group from r/ and the raft log (Open), and raft applies again the
// entries between the durable applied index and the commit index: the one
// on disk at once, the rest once a leader tells it. Neither is written
// every cycle (a hard state only with a new term or vote, the applied
// index every CompactAfter/4 entries and with a configuration or a
// compaction, both in writes a crash may lose), so StateMachine.Apply must
// be idempotent: applying again what lies past the applied index on disk
// gives the same records.
//
// # Leadership and the lease
//
// Groups run with CheckQuorum and PreVote, so a leader cut off from a
// quorum steps down after an election timeout, and a follower that heard
// from its leader refuses every vote for ElectionTicks. The leader stamps
// its heartbeats with its tick count; once a quorum has answered a
// heartbeat stamped t, LeaseValid holds until t+LeaseTicks
// (LeaseTicks < ElectionTicks), so it ends before another leader can be
// elected. A leadership transfer ends it at once.
//
// A group this node leads that has had nothing to do for ElectionTicks
// (every replica holds the whole log, every voter answers) ticks only
// every IdleTicks (idle.go): its heartbeats still renew the lease without
// a gap and keep its followers, which tick as ever, from standing for
// election, at a quarter of the messages an idle partition cost.
//
// Proposals carry their proposer's node id and a proposal id, so a reply
// is matched to the entry that was applied, not to an index another
// leader may have reused. When the proposer stops leading first, the
// proposal fails with ErrLeadershipLost: its outcome is unknown, and a
// retry must be made harmless by a request id in the data.
//
// Package multirafttest holds an in-memory Transport (that can cut, drop
// and hold messages), a key-value StateMachine and a filesystem that counts
// the syncs of Pebble's WAL and of the raft log, for the tests of this
// package and of its consumers.
package multiraft
