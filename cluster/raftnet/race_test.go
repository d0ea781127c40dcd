//go:build race

package raftnet_test

// raceEnabled: the race detector allocates on its own, so allocation counts
// mean nothing under it.
const raceEnabled = true
