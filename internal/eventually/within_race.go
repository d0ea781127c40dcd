//go:build race

package eventually

import "time"

// Within, under the race detector, is four times the deadline of a
// build without it: the detector slows a test several times over, and CI
// runs that tier at a low priority beside the end-to-end and fault tiers
// (.ci/run), where a few hundred writes took over 30 s. A deadline is
// reached only by a failing test, so a longer one costs nothing else.
const Within = 120 * time.Second
