// Package replication runs many raft groups on one node: the consensus
// engine of kitd's cluster, one group per partition (docs/cluster.md,
// "Replication: one raft group per partition"). It is built on
// go.etcd.io/raft/v3's RawNode and owns the keys under r/ in the node's
// Pebble store: each group's log, hard state, conf state, compaction mark
// and applied index. It knows nothing of actors or of what an entry means:
// a StateMachine turns entries into records, and a Transport carries
// messages between nodes. It never talks HTTP and never reads the keys of
// the state it replicates.
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
//  2. writes, in ONE persistence batch, every group's snapshot (restored
//     through StateMachine.Restore), new log entries and hard state, and
//     then applies every group's committed entries into the same batch
//     (StateMachine.Apply, with each group's applied index and conf
//     state);
//  3. commits it with ONE WAL sync: awaited when raft needs it before the
//     messages leave (new entries, term or vote), only queued when the
//     cycle holds just commit indexes and applied records;
//  4. sends every other message in one Transport.Send (snapshots stream
//     on goroutines of their own from StateMachine.Snapshot);
//  5. answers the proposals whose entries it applied, tells the consumer of
//     leader changes (LeaderChanges), and calls Advance.
//
// Applying in the cycle's batch is what keeps one fsync per cycle: the
// persistence package has no unsynced commit, and a second batch for the
// applied records would ask for a second sync. The applied records are
// thus as durable as the log of the same cycle; a later cycle's sync makes
// a queued one durable.
//
// # What a crash does
//
// A Propose that returned is durable: its entry was synced to a quorum's
// logs and its records were written on this node after a sync that
// covered them. After a crash, a node reopens every group from r/ (Open),
// and raft applies again the entries between the durable applied index and
// the commit index: the one on disk at once, the rest once a leader tells
// it. Neither is written every cycle (a hard state only with a new term or
// vote, the applied index every CompactAfter/4 entries and with a
// configuration or a compaction), so StateMachine.Apply must be
// idempotent: applying again what lies past the applied index on disk
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
// Proposals carry their proposer's node id and a proposal id, so a reply
// is matched to the entry that was applied, not to an index another
// leader may have reused. When the proposer stops leading first, the
// proposal fails with ErrLeadershipLost: its outcome is unknown, and a
// retry must be made harmless by a request id in the data.
//
// Package replicationtest holds an in-memory Transport (that can cut, drop
// and hold messages), a key-value StateMachine and a filesystem that counts
// WAL syncs, for the tests of this package and of its consumers.
package replication
