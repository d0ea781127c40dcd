package actors

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Expired web sessions are deleted, not kept for ever: every sign-in
// writes a session, the credential of its cookie, the hash of its secret
// and its locator, and nothing reads a session as live once its 7 days
// are over, signed out or not.
//
// A session's creation reads, in its batch, up to writeSweepMax sessions
// of the workspace from where the last sweep stopped, and deletes the
// four records of each whose ExpiresAt has passed; as the grants' sweep
// (installation_grants_sweep.go), it goes on with the next sign-in when
// it reached its bound, else it starts over from the first session once
// writeSweepEvery has passed. A session ended early stays until its
// 7 days are over, so that ending it again is still answered 200 and
// tells the caches again; an expired one deleted is then unknown (404).
//
// On a cluster the cookie's credential and the locator lie in partitions
// of their own, and a kill can part a batch's partitions (docs/cluster.md
// "Global indexes"): they are deleted in a step before the session's own
// records, which the sweep finds them by, so that a sweep a kill cut
// short is done again whole by a later one.

// sweepSessions adds to the batches of a sign-in at now (unix
// nanoseconds) the deletion of the next expired sessions, when a sweep is
// due (a.sessionSweep): their credentials and locators to pointers, a
// step committed before b, their records to b. It returns the sweep state
// to keep once both are committed.
func (a *workspaceActor) sweepSessions(pointers, b batch, now int64) (sweepCursor, error) {
	c := a.sessionSweep
	if !c.due(now) {
		return c, nil
	}
	prefix := sessionsPrefix(a.id)
	var expired []string
	s := &kitpb.Session{}
	last, more, err := sweepScan(a.env.Store, c.lower(prefix), persistence.PrefixEnd(prefix), a.env.writeSweepMax(), func(_, v []byte) error {
		if err := proto.Unmarshal(v, s); err != nil {
			return err
		}
		if now >= s.ExpiresAt {
			expired = append(expired, s.Id)
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("sweep sessions of %s: %w", a.id, err)
	}
	for _, id := range expired {
		hash, err := a.env.Store.Get(sessionSecretKey(a.id, id))
		switch {
		case err == nil:
			pointers.Delete(credentialKey(hash))
		case !errors.Is(err, persistence.ErrNotFound):
			return c, fmt.Errorf("load session secret %s: %w", id, err)
		}
		pointers.Delete(locatorKey(id))
		b.Delete(sessionSecretKey(a.id, id))
		b.Delete(sessionKey(a.id, id))
	}
	return c.after(now, last, more), nil
}
