//go:build !race

package eventually

import "time"

// Within is the deadline of True and NoError: generous, for a 2-core
// machine shared by several test runs, and reached only by a failing test.
const Within = 30 * time.Second
