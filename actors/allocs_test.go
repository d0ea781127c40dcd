package actors

import "testing"

// leastAllocs is the fewest allocations f made per run over a few rounds
// of testing.AllocsPerRun. AllocsPerRun counts every allocation of the
// process, and this package's tests leave goroutines behind (actors that
// wake themselves later, timers, a stopping node's last writes) that may
// allocate during a round; an allocation of f's own shows in every round.
func leastAllocs(runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for round := 1; round < 5 && least > 0; round++ {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
