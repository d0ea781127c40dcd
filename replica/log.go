package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/replication"
)

// proposer is what Log needs of the node's groups.
type proposer interface {
	Propose(ctx context.Context, g replication.GroupID, data []byte) (uint64, error)
	ProposeAll(ctx context.Context, props []replication.Proposal) error
}

// Log commits the actors' batches through the groups of the partitions
// they write (actors.Committer).
type Log struct {
	groups  proposer
	store   *persistence.Store // builds the parts of a batch that spans partitions
	timeout time.Duration
}

var _ actors.Committer = (*Log)(nil)

// errNoPartition reports a write to a key of no partition: actors write
// only partitioned keys, so this is a bug.
var errNoPartition = errors.New("replica: write to a key of no partition")

// Commit proposes b's writes and returns once they are applied. Almost
// every batch writes one partition: it is proposed as it is, with no copy
// but the entry's. A batch that spans partitions becomes one entry per
// partition, proposed together (replication.ProposeAll).
func (l *Log) Commit(b *persistence.Batch) error {
	defer b.Close()
	if b.Empty() {
		return nil
	}
	repr := b.Repr()
	first, single, err := partitions(repr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if single {
		if _, err := l.groups.Propose(ctx, replication.GroupID(first), repr); err != nil {
			return fmt.Errorf("replica: commit to partition %d: %w", first, err)
		}
		return nil
	}
	parts, err := l.split(repr)
	if err != nil {
		return err
	}
	props := make([]replication.Proposal, 0, len(parts))
	for p, part := range parts {
		props = append(props, replication.Proposal{Group: replication.GroupID(p), Data: part.Repr()})
	}
	err = l.groups.ProposeAll(ctx, props)
	for _, part := range parts {
		part.Close()
	}
	if err != nil {
		return fmt.Errorf("replica: commit to %d partitions: %w", len(props), err)
	}
	return nil
}

// partitions reports the partition of repr's first write and whether every
// write is in it.
func partitions(repr []byte) (first partition.ID, single bool, err error) {
	seen := false
	single = true
	err = persistence.Ops(repr, func(op persistence.Op) error {
		p, ok := actors.PartitionOfKey(op.Key)
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
	return first, single, err
}

// split sorts repr's writes into one batch per partition, in their order.
func (l *Log) split(repr []byte) (map[partition.ID]*persistence.Batch, error) {
	parts := make(map[partition.ID]*persistence.Batch, 2)
	err := persistence.Ops(repr, func(op persistence.Op) error {
		p, _ := actors.PartitionOfKey(op.Key) // checked by partitions
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
