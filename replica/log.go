package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/deadline"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// proposer is what Log needs of the node's groups.
type proposer interface {
	Propose(ctx context.Context, g multiraft.GroupID, data []byte) (uint64, error)
	ProposeAll(ctx context.Context, props []multiraft.Proposal) error
}

// Log commits the actors' batches through the groups of the partitions
// they write (actors.Committer).
type Log struct {
	groups    proposer
	store     *persistence.Store // builds the parts of a batch that spans partitions
	deadlines *deadline.Shared   // of its commits, CommitTimeout after they begin
	// leads says whether this node leads a group; remote proposes an entry
	// through the group's leader elsewhere. Both nil: every group is here.
	leads  func(multiraft.GroupID) bool
	remote func(ctx context.Context, g multiraft.GroupID, data []byte) error

	stats logStats
}

var _ actors.Committer = (*Log)(nil)

// newLog is a Log that proposes every entry to groups, here.
func newLog(groups proposer, store *persistence.Store, timeout time.Duration) *Log {
	return &Log{groups: groups, store: store, deadlines: deadline.NewShared(timeout), stats: newLogStats()}
}

// errNoPartition reports a write to a key of no partition: actors write
// only partitioned keys, so this is a bug.
var errNoPartition = errors.New("replica: write to a key of no partition")

// errNotCommitted is what a client hears of a write its partition's group
// did not commit (a leader change, no quorum, a timeout): 503, and the
// write may or may not have happened, so it retries with its
// Idempotency-Key. It comes first in the chain of a commit's error, so
// that the answer says this rather than raft's own words (a leader's
// refusal crosses the transport as a kiterr.Error of its own).
var errNotCommitted = kiterr.New(kiterr.Unavailable, "the write could not be confirmed; retry it (with its Idempotency-Key)")

// Commit proposes b's writes and returns once they are applied. Almost
// every batch writes one partition: it is proposed as it is, with no copy
// but the entry's. A batch that spans partitions becomes one entry per
// partition, proposed together (multiraft.ProposeAll).
func (l *Log) Commit(repr []byte) error {
	first, single, writes, err := partitions(repr)
	if err != nil || !writes {
		return err // a batch of no writes commits nothing
	}
	start := time.Now()
	err = l.commit(l.deadlines.After(start), repr, first, single)
	l.stats.observe(start, err)
	return err
}

func (l *Log) commit(ctx context.Context, repr []byte, first partition.ID, single bool) (err error) {
	if single {
		g := multiraft.GroupID(first)
		if l.remote == nil {
			_, err = l.groups.Propose(settled(ctx), g, repr)
		} else {
			err = l.proposeToLeader(ctx, g, repr)
		}
		if err != nil {
			return fmt.Errorf("replica: commit to partition %d: %w: %w", first, errNotCommitted, err)
		}
		return nil
	}
	parts, err := l.split(repr)
	if err != nil {
		return err
	}
	defer func() {
		for _, part := range parts {
			part.Close()
		}
	}()
	// The parts of groups other nodes lead go first, all at once; the
	// parts led here, together, last. The actor that commits leads its own
	// partition, so its record comes after the index entries that point to
	// it (docs/cluster.md, "Global indexes"): a commit that fails between
	// leaves pointers to an absent record, never a record its indexes miss.
	var here, elsewhere []multiraft.Proposal
	for p, part := range parts {
		g := multiraft.GroupID(p)
		if l.remote == nil || l.leads(g) {
			here = append(here, multiraft.Proposal{Group: g, Data: part.Repr()})
		} else {
			elsewhere = append(elsewhere, multiraft.Proposal{Group: g, Data: part.Repr()})
		}
	}
	if err := l.proposeElsewhere(ctx, elsewhere); err != nil {
		return err
	}
	if len(here) == 0 {
		return nil
	}
	if err := l.groups.ProposeAll(settled(ctx), here); err != nil {
		if err = l.sendRefusedAgain(ctx, here, err); err != nil {
			return fmt.Errorf("replica: commit to %d partitions: %w: %w", len(here), errNotCommitted, err)
		}
	}
	return nil
}

// proposeElsewhere proposes each of parts through its group's leader,
// all at once, and returns once each is applied or has failed. One
// at a time, a batch that writes many partitions (a delivery actor
// pruning what it delivered deletes outbox entries of up to every
// partition) had waited for a round trip and a raft cycle of each in turn;
// together, the leaders' cycles take them in a few entries and syncs.
func (l *Log) proposeElsewhere(ctx context.Context, parts []multiraft.Proposal) error {
	errs := make([]error, len(parts))
	if len(parts) == 1 { // the usual case needs no goroutine
		errs[0] = l.proposeToLeader(ctx, parts[0].Group, parts[0].Data)
	} else {
		var wg sync.WaitGroup
		for i, p := range parts {
			wg.Go(func() { errs[i] = l.proposeToLeader(ctx, p.Group, p.Data) })
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("replica: commit to partition %d through its leader: %w: %w", parts[i].Group, errNotCommitted, err)
		}
	}
	return nil
}

// sendRefusedAgain sends again, as proposeToLeader does, the parts led
// here that entered no log (raft dropped them while their partition's
// lead is handed over, or this node just stopped leading), once the others
// are applied; err is ProposeAll's. When any part's outcome is unknown,
// none goes again.
func (l *Log) sendRefusedAgain(ctx context.Context, here []multiraft.Proposal, err error) error {
	var pe *multiraft.ProposalsError
	if l.remote == nil || !errors.As(err, &pe) || len(pe.Errs) != len(here) {
		return err
	}
	for _, perr := range pe.Errs {
		if perr != nil && !appendedNothing(perr) {
			return err
		}
	}
	for i, perr := range pe.Errs {
		if perr == nil {
			continue
		}
		if err := l.proposeToLeader(ctx, here[i].Group, here[i].Data); err != nil {
			return err
		}
	}
	return nil
}

// Waits between the sends of an entry the leader elsewhere refused.
const (
	firstRefusalWait = 10 * time.Millisecond
	lastRefusalWait  = 200 * time.Millisecond
)

// proposeToLeader proposes data to g through whichever node leads it,
// this one included. A refusal that appended nothing (no leader known, the
// one asked no longer leads, a transfer under way: the balancer moves
// leaderships at any time) is sent again, to whichever node leads by then,
// until ctx ends: a client hears 503 only when no leader took the entry in
// a request's time. The remote end refuses for good an entry of a
// partition whose activations may still run here (Replica.propose).
func (l *Log) proposeToLeader(ctx context.Context, g multiraft.GroupID, data []byte) error {
	refused := func(err error) bool {
		if !appendedNothing(err) {
			return false
		}
		l.stats.refused.Inc()
		return true
	}
	return askAgain(ctx, refused, func() error {
		if l.leads(g) {
			_, err := l.groups.Propose(settled(ctx), g, data)
			return err
		}
		l.stats.remote.Inc()
		return l.remote(ctx, g, data)
	})
}

// askAgain runs ask until it succeeds, fails with an error again does not
// call a refusal, or ctx ends (then it answers the last refusal). A
// refusal says the group's leader is elsewhere or not yet known (an
// election, a transfer of the lead), so it is asked again after a wait
// that doubles from firstRefusalWait to lastRefusalWait: whoever leads by
// then answers.
func askAgain(ctx context.Context, again func(error) bool, ask func() error) error {
	wait := firstRefusalWait
	var t *time.Timer
	for {
		err := ask()
		if err == nil || !again(err) {
			return err
		}
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
		wait = min(2*wait, lastRefusalWait)
	}
}

// settled is ctx for a proposal to a group led here: the wait for it
// outlives ctx's deadline, until raft has its outcome (applied, dropped,
// or this node's lead lost, which CheckQuorum bounds). An entry the
// deadline gave up on may still commit, and an actor told that its write
// failed acts as if it had not happened: a conversation gave the next
// post the position the late entry took, and the late entry's message was
// overwritten. Its client heard 503 at the deadline of its own request all
// the same (cluster.Host's request timeout). A part led elsewhere is
// written so that either outcome is safe (docs/cluster.md, "Global
// indexes"), and an actor's own partition is always led here.
func settled(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// appendedNothing reports whether err says a proposal never entered a
// log, so that sending it again cannot apply it twice.
func appendedNothing(err error) bool {
	var nl *multiraft.NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, multiraft.ErrProposalDropped)
}

// partitions reports the partition of repr's first write, whether every
// write is in it, and whether there is any write.
func partitions(repr []byte) (first partition.ID, single, seen bool, err error) {
	single = true
	err = persistence.Ops(repr, func(op persistence.Op) error {
		p, ok := partition.OfKey(op.Key)
		if !ok {
			return errNoPartition
		}
		if !seen {
			first, seen = p, true
		} else if p != first {
			single = false
		}
		return nil
	})
	return first, single, seen, err
}

// split sorts repr's writes into one batch per partition, in their order.
func (l *Log) split(repr []byte) (map[partition.ID]*persistence.Batch, error) {
	parts := make(map[partition.ID]*persistence.Batch, 2)
	err := persistence.Ops(repr, func(op persistence.Op) error {
		p, _ := partition.OfKey(op.Key) // checked by partitions
		part := parts[p]
		if part == nil {
			part = l.store.NewBatch()
			parts[p] = part
		}
		part.Add(op)
		return nil
	})
	if err != nil {
		for _, part := range parts {
			part.Close()
		}
		return nil, err
	}
	return parts, nil
}
