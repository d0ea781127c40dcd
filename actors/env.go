package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// The node's side of every actor: storage, clock, limits and the callbacks
// of the node, configured once by package server.

// Invalidator is told when something a node may have cached about
// credentials changes; the change is committed before it is called.
type Invalidator interface {
	InstallationChanged(installationID string)
	CredentialRevoked(hash []byte)
	// UserChanged: the member was deactivated; their credentials end.
	UserChanged(userID string)
	// SessionEnded: the web session ended; user tokens it authorized end.
	SessionEnded(sessionID string)
	// SigningSecretsChanged: the Kit's signing secret was rotated (or
	// made); what is signed from now on is signed with the new set.
	SigningSecretsChanged(kitID string)
	// KitVersionsChanged: the Kit has a new latest version, whose scopes
	// limit every token of its installations.
	KitVersionsChanged(kitID string)
	// KitStateChanged: the Kit was suspended or resumed; its tokens,
	// webhooks, member actions and deliveries follow at once.
	KitStateChanged(kitID string)
}

// TargetCache is what a node's deliveries keep of where and how an
// installation's events go (deliveries.Sender).
type TargetCache interface {
	InstallationChanged(installationID string)
	SigningSecretsChanged(kitID string)
	// KitVersionsChanged: the Kit has a new latest version, whose scopes
	// limit what its bots' events carry (a user's email).
	KitVersionsChanged(kitID string)
	// KitStateChanged: the Kit was suspended or resumed; the sender wakes
	// the installations whose deliveries it held.
	KitStateChanged(kitID string)
}

// Caches is a node's own Invalidator: it tells each cache the change
// concerns. In a cluster every member's is told (clusternode).
type Caches struct {
	Auth    *Authenticator
	Targets TargetCache // nil until the node's sender runs
}

func (c *Caches) InstallationChanged(id string) {
	c.Auth.InstallationChanged(id)
	if c.Targets != nil {
		c.Targets.InstallationChanged(id)
	}
}

func (c *Caches) SigningSecretsChanged(kitID string) {
	if c.Targets != nil {
		c.Targets.SigningSecretsChanged(kitID)
	}
}

func (c *Caches) KitVersionsChanged(kitID string) {
	c.Auth.KitVersionsChanged(kitID)
	if c.Targets != nil {
		c.Targets.KitVersionsChanged(kitID)
	}
}

// KitStateChanged drops the Kit's state and its tokens' principals before
// the sender is told: the pumps it wakes read the new state.
func (c *Caches) KitStateChanged(kitID string) {
	c.Auth.KitStateChanged(kitID)
	if c.Targets != nil {
		c.Targets.KitStateChanged(kitID)
	}
}
func (c *Caches) CredentialRevoked(hash []byte) { c.Auth.CredentialRevoked(hash) }
func (c *Caches) UserChanged(id string)         { c.Auth.UserChanged(id) }
func (c *Caches) SessionEnded(id string)        { c.Auth.SessionEnded(id) }

// ReadBarrier catches a partition's replica on this node up with
// everything committed in it before the call.
type ReadBarrier interface {
	CatchUp(p partition.ID) error
}

// DeliveryNotifier is told, after a commit, that an installation's
// delivery actor queued events. It must not block.
type DeliveryNotifier interface {
	EventsQueued(installationID string)
}

// Env is what every actor needs from its node.
type Env struct {
	Store  *persistence.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Limits is nil when rate limits are off.
	Limits limits.Table
	// Host is set once the node has joined; actors use it to ask each other.
	Host        *cluster.Host
	Invalidator Invalidator
	// Fatal is called when storage can no longer promise durability; it
	// must stop the node.
	Fatal func(error)
	// IdleTimeout passivates actors nobody asked anything for about this
	// long; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// DeliveryFlushAfter bounds how long a delivery actor's takes and
	// outcomes wait for a write when no take of the sender writes them
	// first; 0 means flushAfter (tests only).
	DeliveryFlushAfter time.Duration
	// DeliveryQueueMax bounds the events a delivery actor keeps queued in
	// memory (delivery_behind.go); 0 means MaxQueuedInMemory.
	DeliveryQueueMax int
	// DeliveryMemory bounds the bytes of the node's delivery queues, all
	// installations together (delivery_behind.go); 0 means
	// DefaultDeliveryMemory.
	DeliveryMemory int64
	// SealKey (32 bytes) seals the signing secrets that deliveries are
	// signed with; nil: they are not kept, and nothing can be signed. In a
	// cluster it is ClusterSealKey, the same on every member, since the
	// sealed secret is replicated to them all (server sealingKeys).
	SealKey []byte
	// OpenKeys open a sealed signing secret, tried in turn: SealKey first,
	// then older keys (the node's own <data>/secret-key, which sealed them
	// before the cluster's shared key did).
	OpenKeys [][]byte
	// Deliveries is told when an installation has events to send; nil:
	// nobody sends them.
	Deliveries DeliveryNotifier
	// Reads, when set, catches this node's replica of a partition up
	// with its leader (server/clusternode): a read of another partition's
	// record that finds nothing asks it first. nil: every partition is
	// this node's alone.
	Reads ReadBarrier
	// Remote, when set, reads the partitions this node holds no replica
	// of (Env.Partition); nil: this node holds every partition.
	Remote RemoteReader
	// History keeps the newest messages of the active conversations in
	// memory, encoded, within its byte budget (--cache-bytes); nil: every
	// page of history is read from the store.
	History *history.Budget
	// Commits, when set, commits every actor batch (replicated through
	// the raft group of each partition it writes); nil: batches commit
	// straight to Store.
	Commits Committer

	logPrunes      devLogPrunes     // state of the node, not configuration
	activity       activity         // likewise
	deliveryStats  deliveryStats    // likewise
	deliveryMemory deliveryMemory   // likewise
	readers        partitionReaders // likewise
	kitStates      kitStates        // likewise (kit_state.go)

	// testHookDropNotices, set by tests, loses every outbox notice: a
	// crash between a write and its notice.
	testHookDropNotices atomic.Bool
	// testHookSweepMax, set by tests, is the bound of a sweep of the
	// deliveries' retention in place of sweepMax.
	testHookSweepMax int
	// testHookWriteSweepMax, set by tests, is the bound of a write-borne
	// sweep (sweep.go) in place of writeSweepMax.
	testHookWriteSweepMax int
	// testHookCallLeaseMargin, set by tests, is how long past its deadline
	// a call's slot stays held in place of callLeaseMargin.
	testHookCallLeaseMargin time.Duration
}

func (e *Env) deliveryFlushAfter() time.Duration {
	if e.DeliveryFlushAfter > 0 {
		return e.DeliveryFlushAfter
	}
	return flushAfter
}

func (e *Env) idleTimeout() time.Duration {
	if e.IdleTimeout > 0 {
		return e.IdleTimeout
	}
	return DefaultIdleTimeout
}
