package actors

import (
	"bytes"
	"fmt"

	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The credentials of dead authorizations are deleted, not kept for ever: a
// Kit that refreshes its user tokens every hour adds two credentials and
// two grant index entries an hour for each member who authorized it, and
// the member's UserGrant records pile up under the home page's scan.
//
// A token request that writes (a code issued, exchanged, a refresh) reads,
// in its batch, up to writeSweepMax entries of the installation's grant
// index (grantCredentialKey) from where the last sweep stopped, and
// deletes each entry whose credential can no longer work, with the
// credential; a dead refresh token takes its grant's UserGrant with it.
// The scan goes on from there with the next request when it reached its
// bound, else it starts over from the first grant once writeSweepEvery has
// passed. The cursor lives in the actor: an activation starts from the
// first grant.
//
// Dead is judged on the service clock, and only where a deletion changes
// no answer: an unknown code or token is refused as an expired one is
// (BadGrantReason, 401 invalid_token). A bot token is left to the bot
// tokens' sweep (installation_bottokens_sweep.go); a spent refresh token is kept while its grant may be
// live, since its replay revokes the grant.
//
// On a cluster a credential lies in a partition of its own, and a kill
// can part a batch's partitions (docs/cluster.md "Global indexes"): the
// credentials are deleted in a step before the index entries the sweep
// finds them by, so that a sweep a kill cut short is done again whole by
// a later one (an entry whose credential is gone is then deleted alone).

// grantDead reports whether c, a credential of a grant, can no longer
// work at now (unix nanoseconds): a code or user token past its expiry; a
// refresh token (no expiry of its own) once the web session it lives with
// has surely ended, SessionLifetime after the token's creation, since the
// session began before.
func grantDead(c *kitpb.Credential, now int64) bool {
	switch c.Kind {
	case credCode, CallerUser:
		return now >= c.ExpiresAt
	case credRefresh:
		return now >= c.CreatedAt+int64(SessionLifetime)
	}
	return false
}

// sweepGrants adds to the batches of a token request at now (unix
// nanoseconds) the deletion of the dead credentials of the next entries
// of the grant index, when a sweep is due (a.grantSweep): the credentials
// to creds, a step committed before b, their entries and UserGrants to b.
// It returns the sweep state to keep once both are committed.
func (a *installationActor) sweepGrants(creds, b batch, now int64) (sweepCursor, error) {
	s := a.grantSweep
	if !s.due(now) {
		return s, nil
	}
	prefix := grantsPrefix(a.id)
	type entry struct{ key, hash []byte }
	var entries []entry
	last, more, err := sweepScan(a.env.Store, s.lower(prefix), persistence.PrefixEnd(prefix), a.env.writeSweepMax(), func(k, _ []byte) error {
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(k[len(k)-32:])})
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("sweep grants of %s: %w", a.id, err)
	}
	for _, e := range entries {
		c := &kitpb.Credential{}
		found, err := a.env.loadSwept(credentialKey(e.hash), c)
		if err != nil {
			return s, err
		}
		if found && !grantDead(c, now) {
			continue
		}
		b.Delete(e.key)
		if !found {
			continue // an entry left by a kill, or written by a build before this
		}
		creds.Delete(credentialKey(e.hash))
		if c.Kind == credRefresh && c.UserId != "" {
			b.Delete(userGrantKey(a.id, c.UserId, c.GrantId))
		}
	}
	return s.after(now, last, more), nil
}
