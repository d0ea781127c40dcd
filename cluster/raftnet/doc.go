// Package raftnet carries the raft messages and snapshots of a node's
// groups (package multiraft) between kitd nodes, over their node-to-node
// connections (package cluster/peer). It owns the wire format of a raft
// batch and of a snapshot stream's header (wire.go), the mapping from raft
// node ids to peer addresses (Directory, fed by the cluster from gossip
// membership), and what is refused, dropped and counted; it knows nothing
// of what the groups replicate.
//
// Sending: Transport.Send, called by the replication driver once per
// cycle, groups the cycle's messages by destination, encodes one batch
// per destination and queues it with peer's one-way Send, which never
// blocks. A message to a node without an address, or one the peer
// transport cannot queue (no connection yet, its queue full), is dropped
// and counted: raft sends again. SendSnapshot streams a MsgSnap and the
// group's state through a peer stream in bounded chunks, under the
// stream's credit-based flow control, and returns once the receiver holds
// it.
//
// Receiving: HandleBatch and HandleStream are the peer transport's
// handlers. They decode and hand each message to multiraft.Node.Step,
// and each snapshot to Node.ReceiveSnapshot. A message for a group this
// node does not hold goes to Config.OnUnknownGroup (the cluster joins a
// group it is being added to from there) and is counted. Input no member
// sends (a batch that does not decode, a group id out of range, a message
// for another node, a local or proposal message, a snapshot outside a
// stream) is refused whole, counted and logged at a bounded rate. The
// batch decoder is fuzzed (FuzzDecodeBatch).
package raftnet
