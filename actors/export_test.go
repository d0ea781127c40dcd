package actors

import (
	"fmt"
	"testing"
	"time"
)

// Key constructors for the tests of package actors_test that read or write
// records by hand.
var (
	DevLogKey                 = devLogKey
	DevLogPrefix              = devLogPrefix
	FileChunksPrefix          = fileChunksPrefix
	FileKey                   = fileKey
	IdempotencyKey            = idempotencyKey
	IdempotencyExpiriesPrefix = idempotencyExpiriesPrefix
	IdempotencyRecordsPrefix  = idempotencyRecordsPrefix
	FilesPrefix               = filesPrefix
	LocatorKey                = locatorKey
	MessageKey                = messageKey
	MessagesPrefix            = messagesPrefix
	MessageTagKey             = messageTagKey
	ResponseURLsPrefix        = responseURLsPrefix
	InstallationKey           = installationKey
	QueuedEventKey            = queuedEventKey
	TakenEventsPrefix         = takenEventsPrefix
	QueuedEventsPrefix        = queuedEventsPrefix
	OutboxKey                 = outboxKey
	DecodeSeq                 = decodeSeq
	DeliveredEventKey         = deliveredEventKey
	DeadEventKey              = deadEventKey
	OutboxSourcePrefix        = outboxSourcePrefix
	GrantsPrefix              = grantsPrefix
	UserGrantsPrefix          = userGrantsPrefix
	SessionsPrefix            = sessionsPrefix
)

// SetGrantSweepMax bounds the grant index entries a sweep of an
// installation's dead grant credentials reads at n in place of
// grantSweepMax.
func SetGrantSweepMax(env *Env, n int) { env.testHookGrantSweepMax = n }

// LeastAllocs is leastAllocs, for the tests outside the package.
var LeastAllocs = leastAllocs

// DropNotices makes the node lose every outbox notice, as a crash between
// a write and its notice would, until KeepNotices.
func DropNotices(env *Env) { env.testHookDropNotices.Store(true) }

// KeepNotices ends DropNotices.
func KeepNotices(env *Env) { env.testHookDropNotices.Store(false) }

// SetSweepMax bounds what a sweep of the deliveries' retention deletes
// at n in place of sweepMax.
func SetSweepMax(env *Env, n int) { env.testHookSweepMax = n }

// SetIdempotencySweepMax bounds the expiry index entries a sweep of a
// conversation's Idempotency records takes at n in place of
// idempotencySweepMax.
func SetIdempotencySweepMax(env *Env, n int) { env.testHookIdempotencySweepMax = n }

// IdempotencySweepEvery is how often a conversation sweeps its expired
// Idempotency records at most.
const IdempotencySweepEvery = idempotencySweepEvery * time.Nanosecond

// RetryWait is the wait after the n-th failed attempt with the draw jitter.
var RetryWait = retryWait

// DecodeTaken reads a taken record: the outbox entries it names, as
// source/position.
func DecodeTaken(t testing.TB, v []byte) []string {
	t.Helper()
	refs, err := decodeTaken(v)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = fmt.Sprintf("%s/%d", r.source, r.pos)
	}
	return out
}
