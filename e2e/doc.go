// Package e2e holds the end-to-end tests of kitd: they build the real
// `kitd` binary, start it on a loopback port and speak HTTP to it, checking
// the contract of docs/api.md, OPERATIONS.md and docs/decisions.md from the
// outside. The package has no code of its own; everything is in *_test.go
// files (harness_test.go has the process and HTTP helpers, fixtures_test.go
// the builders of workspaces, Kits and installations). The one package
// beside it, e2e/jepsen, is the Jepsen-style workload, checker and
// linearizability models that jepsen_test.go runs against the nodes it
// starts.
//
// Run with `go test ./e2e/`. Set KITD_BIN to test an already built binary
// instead of building ./cmd/kitd.
package e2e
