// Package server assembles one kitd node from a Config of values already
// read: it opens the store, upgrades it, builds the actors' environment
// and the sealing keys, starts the actors' node, the delivery sender, the
// raft groups a node alone or a cluster member commits through
// (server/clusternode for a member), the metrics registry and the HTTP front
// end, and serves. The returned Server drains and stops them in the one
// order that loses nothing (Drain, Close).
//
// It owns that wiring and its order, the files of the data directory
// beside the store (secret-key, sealing-key, operator-token) and the
// demo workspace. It never reads flags or the environment, never catches
// a signal, never sets up the log's output or the Go runtime and never
// exits the process: cmd/kitd does those and hands it the results
// (Config.Logger, Config.Fatal).
package server
