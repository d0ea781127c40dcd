// Package jepsen is test infrastructure, not server code: it runs a
// Jepsen-style workload against kitd nodes given by their addresses,
// records what every client saw, reads everything back through every node
// and reports what a correct cluster could not have answered. It also
// checks slug claims and Idempotency-Key replays for linearizability with
// porcupine, and has a loopback TCP proxy to fail links. It knows kitd only
// through HTTP (docs/api.md) and never starts or signals a process: the tests
// in e2e/ do that and choose the faults.
package jepsen
