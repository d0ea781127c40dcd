package clock

import "time"

// AlignedTicker is a real-time ticker of period d whose ticks fall on the
// multiples of d on the wall clock. It is for background work, not for
// what the service clock decides: the members of a cluster, whose clocks
// agree to well within a tick, then do their periodic work together (raft
// ticks and heartbeats, gossip of their state), and a node's messages to
// the others arrive while those are awake for their own, rather than each
// waking an idle process again. It waits for the next multiple first, at
// most d.
func AlignedTicker(d time.Duration) *time.Ticker {
	time.Sleep(UntilNextTick(time.Now(), d))
	return time.NewTicker(d)
}

// UntilNextTick is the time from now to the next multiple of d on the
// wall clock, in (0, d]: what to wait before starting timers of period d
// that are to tick with the other members' (memberlist's, which kitd does
// not create).
func UntilNextTick(now time.Time, d time.Duration) time.Duration {
	return d - time.Duration(now.UnixNano()%int64(d))
}
