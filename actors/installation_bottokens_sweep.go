package actors

import (
	"bytes"
	"fmt"
	"time"

	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The records of bot tokens that no longer work are deleted, not kept for
// ever: every rotation leaves the old token's credential and its entry in
// the token index (botTokenKey), and a revocation leaves the revoked one,
// though nothing reads either as working again.
//
// A write that issues a bot token (one made on the API access page, a bot
// code exchanged, a rotation) reads, in its batch, up to writeSweepMax
// entries of the installation's token index from where the last sweep
// stopped, and deletes each entry whose token is dead, with its
// credential and, for a token of a bot code, its grant index entry; as the
// grants' sweep (installation_grants_sweep.go), it goes on with the next
// issue when it reached its bound, else it starts over from the first
// token once writeSweepEvery has passed.
//
// Dead is judged only where a deletion changes no answer: an unknown bot
// token is refused as an expired or revoked one (401 invalid_token). A
// rotated token goes once its overlap is over; a revoked one stays
// RevokedBotTokenKept, so that revoking it again (a retry of a
// revocation whose answer a kill lost) still tells the caches again; a
// swept one given to POST /ops/v1/tokens/revoke is 404, as an unknown one.
//
// As the grants' sweep, the credentials, in partitions of their own, are
// deleted in a step before the index entries the sweep finds them by
// (docs/cluster.md "Global indexes").

// RevokedBotTokenKept is how long a revoked bot token's record stays.
const RevokedBotTokenKept = 24 * time.Hour

// botTokenDead reports whether c, a bot token, can no longer work at now
// (unix nanoseconds) and no answer needs its record.
func botTokenDead(c *kitpb.Credential, now int64) bool {
	if c.ExpiresAt != 0 && now >= c.ExpiresAt {
		return true
	}
	return c.RevokedAt != 0 && now >= c.RevokedAt+int64(RevokedBotTokenKept)
}

// sweepBotTokens adds to the batches of a write at now (unix nanoseconds)
// that issues a bot token the deletion of the dead tokens among the next
// entries of the token index, when a sweep is due (a.botTokenSweep): the
// credentials to creds, a step committed before b, their entries to b.
// It returns the sweep state to keep once both are committed.
func (a *installationActor) sweepBotTokens(creds, b batch, now int64) (sweepCursor, error) {
	s := a.botTokenSweep
	if !s.due(now) {
		return s, nil
	}
	prefix := botTokensPrefix(a.id)
	type entry struct{ key, hash []byte }
	var entries []entry
	last, more, err := sweepScan(a.env.Store, s.lower(prefix), persistence.PrefixEnd(prefix), a.env.writeSweepMax(), func(k, v []byte) error {
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("sweep bot tokens of %s: %w", a.id, err)
	}
	for _, e := range entries {
		// A revocation or a rotation a lagging replica has not heard of
		// only keeps a token longer.
		c := &kitpb.Credential{}
		found, err := a.env.loadSwept(credentialKey(e.hash), c)
		if err != nil {
			return s, err
		}
		if found && !botTokenDead(c, now) {
			continue
		}
		b.Delete(e.key)
		if !found {
			continue // an entry left by a kill between the steps
		}
		creds.Delete(credentialKey(e.hash))
		if c.GrantId != "" {
			b.Delete(grantCredentialKey(a.id, c.GrantId, e.hash))
		}
	}
	return s.after(now, last, more), nil
}
