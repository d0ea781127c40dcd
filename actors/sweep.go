package actors

import "github.com/kitd/kitd/persistence"

// Records that expire are deleted by their owner in the batch of one of
// its own writes, a bounded number at a time, so that a node that runs for
// years does not keep every record it ever wrote: a post sweeps its
// conversation's Idempotency records (conversation_idempotency.go), a
// token request its installation's dead grant credentials
// (installation_grants_sweep.go), a bot token's issue its installation's
// dead bot tokens (installation_bottokens_sweep.go), a sign-in its
// workspace's expired sessions (workspace_sessions_sweep.go) and sign-in
// choices (workspace_signin_sweep.go), a run queued its installation's
// finished runs past their retention (installation_runs_sweep.go). The
// deletions commit (or replicate) with the write; the deliveries' retention has a pace of its
// own (delivery_retention.go), and so has the purge of an uninstalled
// installation, which writes nothing else (installation_purge.go).

// writeSweepEvery bounds how often an owner starts a sweep pass: at most
// once per 10 minutes of the service clock, and once after each
// activation. Every other write reads nothing for it.
const writeSweepEvery = int64(10 * 60 * 1e9)

// writeSweepMax bounds the entries one sweep reads, so that the write that
// sweeps stays that write: at most a few hundred point reads and
// deletions ride with it, tens of KB in its batch (a raft entry on a
// cluster). A sweep that reached it is followed by the next on the next
// write, so an owner behind on its sweeps catches up.
const writeSweepMax = 100

func (e *Env) writeSweepMax() int {
	if e.testHookWriteSweepMax > 0 {
		return e.testHookWriteSweepMax
	}
	return writeSweepMax
}

// sweepCursor is where the next sweep of a range starts, and when.
type sweepCursor struct {
	at   int64  // unix nanoseconds; 0: at the next write
	from []byte // the first key to read; nil: the range's first
}

// due reports whether a sweep starts at now (unix nanoseconds).
func (c sweepCursor) due(now int64) bool { return now >= c.at }

// lower is the first key a sweep of the range under prefix reads.
func (c sweepCursor) lower(prefix []byte) []byte {
	if c.from != nil {
		return c.from
	}
	return prefix
}

// after is the cursor once a sweep at now read up to last: the next write
// goes on past it when the sweep left some (more), else a new pass starts
// writeSweepEvery later.
func (c sweepCursor) after(now int64, last []byte, more bool) sweepCursor {
	if more {
		return sweepCursor{at: now, from: keyAfter(last)}
	}
	return sweepCursor{at: now + writeSweepEvery}
}

// sweepScan calls fn with each of at most bound entries of [lower, upper)
// in key order, stopping at fn's first error, and answers the last key it
// read (a copy; nil: none) and whether entries remain past the bound: what
// sweepCursor.after takes. fn's key and value are valid during the call
// only.
func sweepScan(store *persistence.Store, lower, upper []byte, bound int, fn func(k, v []byte) error) (last []byte, more bool, err error) {
	read := 0
	scanErr := store.Scan(lower, upper, false, func(k, v []byte) bool {
		if read == bound {
			more = true
			return false
		}
		read++
		last = append(last[:0], k...)
		err = fn(k, v)
		return err == nil
	})
	if err == nil {
		err = scanErr
	}
	return last, more, err
}
