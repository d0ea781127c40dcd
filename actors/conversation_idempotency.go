package actors

import "github.com/kitd/kitd/proto/kitpb"

// Expired Idempotency records are deleted, not only overwritten by a new
// post with their key: the Go client keys every post, so without this the
// conversation's range would grow by a record a post for ever.
//
// A keyed post writes, in its batch, one entry of the conversation's
// expiry index (idempotencyExpiryKey): the records' expiry, then the
// record it names (and, in its value, the member-wide copy written with
// it). Now and then a post of the conversation (POST /messages or an
// incoming webhook's) reads the entries due from the start of the index,
// deletes in its own batch each record they name whose stored ExpiresAt
// has passed, and deletes the entries it read. The
// deletions so commit (or replicate) with the post, the way every write
// of the actor does: a kill leaves them all or none. A record's stored
// expiry decides, not its entry's: a newer post with the same key
// overwrote the record with a later expiry (and an entry of its own), and
// the record lives until then. A record of a build before the index has
// no entry and stays (docs/decisions.md "Idempotency-Key scope").

// The pace and bound are the write-borne sweeps' (sweep.go): each entry
// of the index names one record or two. The sweep always reads from the
// index's start, whose entries are in expiry order, so it keeps a time
// only (a.idemSweepAt).

// sweepIdempotency adds to b, the batch of a post at now (unix
// nanoseconds), the deletion of the records whose entries of the expiry
// index are due, when a sweep is (a.idemSweepAt). It returns when the
// next sweep is due, for the caller to keep once b is applied. Call it
// before b's own writes of records: a record the post writes again must
// follow the deletion of its expired self.
func (a *conversationActor) sweepIdempotency(b batch, now int64) (next int64, err error) {
	if now < a.idemSweepAt {
		return a.idemSweepAt, nil
	}
	prefix := idempotencyExpiriesPrefix(a.id)
	bound := a.env.writeSweepMax()
	var recs [][]byte
	var last []byte
	taken, more := 0, false
	err = a.env.Store.Scan(prefix, idempotencyExpiriesBefore(a.id, now+1), false, func(k, v []byte) bool {
		if taken == bound {
			more = true
			return false
		}
		taken++
		recs = append(recs, idempotencyExpiryRecords(a.id, k, v)...)
		last = append(last[:0], k...)
		return true
	})
	if err != nil {
		return 0, err
	}
	for _, k := range recs {
		rec := &kitpb.Idempotency{}
		found, err := load(a.env.Store, k, rec)
		if err != nil {
			return 0, err
		}
		if found && rec.ExpiresAt <= now { // as liveIdempotency reads it
			b.Delete(k)
		}
	}
	if last != nil {
		b.DeleteRange(prefix, keyAfter(last))
	}
	if more {
		return now, nil
	}
	return now + writeSweepEvery, nil
}
