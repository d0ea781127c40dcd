package actors

import (
	"bytes"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// Finished runs are deleted RunRetention after their end, not kept for
// ever: every tool call keeps its run, with a result of up to
// limits.ToolResultBytes, and a Kit's backend reads it when it is told of
// the call, not weeks later.
//
// A run queued reads, in its batch, up to writeSweepMax runs of the
// installation from where the last sweep stopped, and deletes each
// finished one whose RunRetention is over; as the grants' sweep
// (installation_grants_sweep.go), it goes on with the next run queued
// when it reached its bound, else it starts over from the first run once
// writeSweepEvery has passed. Run ids are of their creation's time
// (ids.NewAt), and a run ends after it begins, so the scan stops at the
// runs created less than RunRetention ago. A run queued or running is
// never deleted (its activation fails it, and it is kept from then on).
// A run deleted is unknown: GET /runs/{id} answers 404, as for a run of
// no one. Its records lie in the installation's partition: one batch.

// runExpired reports whether r is finished and its RunRetention is over
// at now (unix nanoseconds).
func runExpired(r *kitpb.Run, now int64) bool {
	if r.Status != RunSucceeded && r.Status != RunFailed {
		return false
	}
	return now >= r.FinishedAt+int64(RunRetention)
}

// sweepRuns adds to b, the batch of a run queued at now (unix
// nanoseconds), the deletion of the expired runs among the next ones,
// when a sweep is due (a.runSweep). It returns the sweep state to keep
// once b is committed.
func (a *installationActor) sweepRuns(b batch, now int64) (sweepCursor, error) {
	s := a.runSweep
	if !s.due(now) {
		return s, nil
	}
	// The first millisecond of ids no run created before now-RunRetention
	// has, one on: a run of that millisecond may have ended then too.
	cutoff := time.Unix(0, now).Add(-RunRetention + time.Millisecond)
	lower, upper := s.lower(runsPrefix(a.id)), runKey(a.id, ids.PrefixAt(cutoff))
	if bytes.Compare(lower, upper) >= 0 {
		return s.after(now, nil, false), nil
	}
	r := &kitpb.Run{}
	last, more, err := sweepScan(a.env.Store, lower, upper, a.env.writeSweepMax(), func(k, v []byte) error {
		if err := proto.Unmarshal(v, r); err != nil {
			return err
		}
		if runExpired(r, now) {
			b.Delete(k)
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("sweep runs of %s: %w", a.id, err)
	}
	return s.after(now, last, more), nil
}
