package actors

import (
	"bytes"
	"fmt"
)

// Expired sign-in choices are deleted, not kept for ever: every sign-in
// whose password matched in several workspaces writes a choice's
// credential, and nothing takes it once its 5 minutes are over.
//
// The holding workspace finds its choices by an index in its partition
// (signInChoiceKey), in order of expiry, written with the choice and
// deleted when it is taken. A sign-in of the workspace (a choice or a
// session made) deletes, in its batches, up to writeSweepMax of the
// choices whose expiry has passed, from where the last sweep stopped; as
// the sessions' sweep (workspace_sessions_sweep.go), it goes on with the
// next sign-in when it reached its bound, else it starts over once
// writeSweepEvery has passed. The index is in order of expiry, so a sweep
// reads expired entries only. An expired choice deleted is unknown, which
// is answered as an expired one (401 on the sign-in page).
//
// On a cluster a choice's credential lies in a partition of its own, and
// a kill can part a batch's partitions (docs/cluster.md "Global
// indexes"): the index entry is written in a step before the credential,
// and deleted in a step after it, so that a kill between the steps leaves
// an entry a later sweep deletes, never a credential nothing finds.

// sweepSignInChoices adds to the batches of a sign-in at now (unix
// nanoseconds) the deletion of the next expired choices the workspace
// holds, when a sweep is due (a.choiceSweep): their credentials to first,
// a step committed before b, their index entries to b. It returns the
// sweep state to keep once both are committed.
func (a *workspaceActor) sweepSignInChoices(first, b batch, now int64) (sweepCursor, error) {
	c := a.choiceSweep
	if !c.due(now) {
		return c, nil
	}
	lower, upper := c.lower(signInChoicesPrefix(a.id)), signInChoicesBefore(a.id, now+1)
	if bytes.Compare(lower, upper) >= 0 {
		return c.after(now, nil, false), nil
	}
	last, more, err := sweepScan(a.env.Store, lower, upper, a.env.writeSweepMax(), func(k, _ []byte) error {
		first.Delete(credentialKey(k[len(k)-32:]))
		b.Delete(k)
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("sweep sign-in choices of %s: %w", a.id, err)
	}
	return c.after(now, last, more), nil
}
