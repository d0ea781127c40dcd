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
	BotTokensPrefix           = botTokensPrefix
	UserGrantsPrefix          = userGrantsPrefix
	SessionsPrefix            = sessionsPrefix
	SignInChoicesPrefix       = signInChoicesPrefix
	RunKey                    = runKey
	WebhookKey                = webhookKey
	PurgeKey                  = purgeKey
	InstallationRecordsPrefix = installationRecordsPrefix
)

// SetWriteSweepMax bounds what a write-borne sweep (an owner's expired
// Idempotency records, dead grant credentials, dead bot tokens, expired
// sessions and sign-in choices, finished runs) reads at n in place of
// writeSweepMax.
func SetWriteSweepMax(env *Env, n int) { env.testHookWriteSweepMax = n }

// SetCallLeaseMargin holds a call's slot d past its deadline, when its
// give-back does not come, in place of callLeaseMargin.
func SetCallLeaseMargin(env *Env, d time.Duration) { env.testHookCallLeaseMargin = d }

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

// WriteSweepEvery is how often an owner starts a write-borne sweep at
// most (a conversation's expired Idempotency records among them).
const WriteSweepEvery = time.Duration(writeSweepEvery)

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
