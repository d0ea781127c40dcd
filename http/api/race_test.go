//go:build race

package api

// raceEnabled: the race detector allocates on its own, so allocation
// counts mean nothing under it (make race).
const raceEnabled = true
