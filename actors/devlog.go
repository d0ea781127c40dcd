package actors

import (
	"sync"
	"time"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// The developer log of a Kit (docs/api.md "Developer log entry"; read by
// GET /dev/kits/{kitId}/logs). Entries are write-once records under
// devLogKey. The entry id is a UUIDv7 of the server clock (ids.NewAt), so
// a range scan of the Kit's prefix is time order. Entries are kept for
// LogRetention: reads never go below the cutoff, and writers delete the
// expired range in their batch (see putLog). No single actor owns the log:
// an entry is written by the actor that decided the outcome it reports, in the batch of that
// outcome when there is one (a webhook post's entry commits with its
// message), so the log never says something happened that did not. No
// writer ever reads an entry back, so there is no read-modify-write to
// serialize. An entry lives in its writer's partition, so that it commits
// with the writer's change and no write of the hot paths crosses
// partitions; a read merges every partition's entries of the Kit
// (ReadDevLog).

// Log sources and levels of docs/api.md "Developer log entry".
const (
	LogSourceToolCall = "tool_call"
	LogSourceAudit    = "audit"
	LogSourceDelivery = "delivery"
	LogLevelInfo      = "info"
	LogLevelError     = "error"
)

// LogRetention is how long developer log entries are kept
// (docs/decisions.md "Developer log retention").
const LogRetention = 7 * 24 * time.Hour

// logPruneEvery bounds how often a Kit's expired entries are deleted: at
// most one range deletion per Kit and hour per process.
const logPruneEvery = time.Hour

// devLogPrunes is when each Kit's log was last pruned by this node in each
// partition (unix nanoseconds of the server clock, by pruneKey). The zero
// value is ready.
type devLogPrunes struct{ last sync.Map }

type pruneKey struct {
	p   partition.ID
	kit string
}

// devLogCutoff is the first key of partition p's entries of the Kit that
// may not have expired at now: a millisecond prefix of the ids, so the
// entries of its millisecond are judged one by one (logExpired).
func devLogCutoff(p partition.ID, kitID string, now time.Time) []byte {
	return devLogKey(p, kitID, ids.PrefixAt(now.Add(-LogRetention)))
}

// logExpired reports whether e's retention has ended at now: an entry
// lives while now < At + LogRetention, as every expiry does.
func logExpired(e *kitpb.DevLogEntry, now time.Time) bool {
	return nanos(now) >= e.At+int64(LogRetention)
}

// newLogEntry starts an entry at now with a fresh time-ordered id.
func newLogEntry(env *Env, source, level, event, installationID string) *kitpb.DevLogEntry {
	now := env.Clock.Now()
	return &kitpb.DevLogEntry{
		Id: ids.NewAt(now), At: nanos(now), Source: source, Level: level,
		Event: event, InstallationId: installationID,
	}
}

// putLog adds the entry to the batch and, at most once per logPruneEvery,
// the deletion of the Kit's expired entries. Entries are write-once and
// expired ones are never read, so concurrent writers pruning the same range
// do not conflict.
func (env *Env) putLog(b batch, writer partition.ID, kitID string, e *kitpb.DevLogEntry) {
	// The key carries the id: the stored value leaves it out (ReadDevLog
	// puts it back), a tenth of what a webhook post writes.
	id := e.Id
	e.Id = ""
	put(b, devLogKey(writer, kitID, id), e)
	e.Id = id
	pk := pruneKey{writer, kitID}
	if last, ok := env.logPrunes.last.Load(pk); ok && e.At-last.(int64) < int64(logPruneEvery) {
		return
	}
	env.logPrunes.last.Store(pk, e.At)
	b.DeleteRange(devLogPrefix(writer, kitID), devLogCutoff(writer, kitID, time.Unix(0, e.At)))
}

// writeLogAsync writes entries that report no state change of their own
// (a refused delivery) without holding up the writer: they become durable
// with the next WAL sync, which this asks for but does not wait on. A crash
// before it may lose them; they are a log, not an acknowledged write.
func writeLogAsync(env *Env, writer partition.ID, kitID string, entries ...*kitpb.DevLogEntry) {
	b := env.newBatch()
	for _, e := range entries {
		env.putLog(b, writer, kitID, e)
	}
	w, err := b.Apply()
	if err != nil {
		if env.Logger != nil {
			env.Logger.Warn("developer log write failed", "kit", kitID, "err", err)
		}
		return
	}
	go func() {
		if err := w.Wait(); err != nil {
			// A failed WAL sync means storage can no longer promise
			// anything: the same rule as for every other write.
			env.Fatal(err)
		}
	}()
}
