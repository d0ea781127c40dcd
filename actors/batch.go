package actors

import "github.com/kitd/kitd/persistence"

// Committer makes an actor's batches durable some other way than a commit
// to the node's store: through the raft group of each partition the batch
// writes (replica.Log). Commit returns once the writes are committed and
// applied, so that the actor reads its own writes afterwards; it takes
// the batch over (committed or discarded).
type Committer interface {
	Commit(b *persistence.Batch) error
}

// batch is the actors' atomic group of writes. It commits through the
// node's Committer when there is one, and straight to the store otherwise;
// actors never commit a persistence.Batch themselves
// (TestActorsCommitThroughTheirEnv). It is passed by value: two words,
// and no allocation on the write path.
type batch struct {
	*persistence.Batch
	env *Env
}

func (e *Env) newBatch() batch {
	return batch{Batch: e.Store.NewBatch(), env: e}
}

// newBatchSize starts a batch with room for about size bytes.
func (e *Env) newBatchSize(size int) batch {
	return batch{Batch: e.Store.NewBatchSize(size), env: e}
}

// Commit makes every write of the batch durable before it returns.
func (b batch) Commit() error {
	if c := b.env.Commits; c != nil {
		return c.Commit(b.Batch)
	}
	return b.Batch.Commit()
}

// Apply makes the writes visible and returns what to wait on before a
// reply that depends on them is acted on (see durability). Replicated,
// it is Commit: an entry is visible only once it is applied, and an actor
// must read its own writes.
func (b batch) Apply() (persistence.Durable, error) {
	if c := b.env.Commits; c != nil {
		return persistence.Durable{}, c.Commit(b.Batch)
	}
	return b.Batch.Apply()
}

// Write is for derived writes that a crash may undo (persistence.Batch.Write).
// Replicated, it is Commit: the derived state must follow its partition to
// whichever node leads it.
func (b batch) Write() error {
	if c := b.env.Commits; c != nil {
		return c.Commit(b.Batch)
	}
	return b.Batch.Write()
}
