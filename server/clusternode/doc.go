// Package clusternode runs this process as a node of a kitd cluster. It
// assembles the parts of package cluster's subpackages and of replica:
// gossip membership (who is alive, and where), the node-to-node transport
// (mutual TLS from the cluster key), the raft groups over it, and the
// routing table that forwarded requests read. It owns the rules that tie
// them together: what a node publishes about itself, how a raft id becomes
// an address, when a node founds a cluster or joins one, and the order of
// a drain. It never speaks HTTP: http/api reads its view (Nodes, State).
package clusternode
