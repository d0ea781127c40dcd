// Package membership owns kitd's gossip membership: which nodes are in
// the cluster, where each one listens (gossip, node-to-node and HTTP
// addresses), what it says of itself (joining, alive or draining; the
// partitions it leads and replicates) and what the failure detector
// thinks of it (suspect, dead, left). It is built on hashicorp/memberlist
// (SWIM); it never routes a request and never decides who owns data.
//
// What the failure detector says is a hint. A node paused for half a
// second under LocalTiming, or a few seconds under LANTiming, is reported
// suspect or dead and then alive again; a partitioned node is "dead" on
// one side and alive on the other. Routing may use the hint (skip a dead
// node, try the next replica); ownership of a partition is decided by its
// raft group, never by this package.
//
// Events go through a queue. memberlist calls its delegates with its node
// lock held: a delegate that calls back into memberlist deadlocks, and one
// that blocks on a full channel stops gossip, probes and failure
// detection for the whole node. So the delegates here only copy what they
// are given onto an unbounded queue, and a goroutine of this package
// applies it to the member table (Members) and offers the changes on
// Events; while the consumer lags, a node's changes coalesce into its
// latest, so a stalled consumer costs memory bounded by the number of
// nodes and never delays anyone's view of the cluster.
//
// Two things memberlist does not tell a delegate are recovered here. A
// graceful leave and a death both arrive as NotifyLeave, alike (memberlist
// keeps "left" in a state of its own and never sets the State of the Node
// it hands over), so a leaving node first sends each member a goodbye
// naming its SystemID over TCP, which makes them record "left", and
// broadcasts its leave once each answered that it recorded it, or after a
// bounded wait (a goodbye that arrives after the death still turns it
// into a leave). A suspicion has no callback at all: the log line of a failed
// probe marks the member suspect (in this node's view only) until the
// next ack, or until it is declared dead.
//
// Every start gets a fresh SystemID, so a restarted node is told apart
// from its previous life even under the same name and address.
// docs/cluster.md, "Membership and placement", has the rest.
package membership
