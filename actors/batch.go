package actors

import "github.com/kitd/kitd/persistence"

// Committer makes an actor's batches durable some other way than a commit
// to the node's store: through the raft group of each partition the batch
// writes (replica.Log). Commit gets the batch's writes (Batch.Repr, valid
// during the call) and returns once they are committed and applied, so
// that the actor reads its own writes afterwards. It takes the encoding,
// not the batch: a batch handed to an interface would leave its caller's
// frame, an allocation on every write of a node alone.
type Committer interface {
	Commit(repr []byte) error
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
		return b.through(c)
	}
	return b.Batch.Commit()
}

// through commits the batch through c, and closes it.
func (b batch) through(c Committer) error {
	defer b.Close()
	if b.Empty() {
		return nil
	}
	return c.Commit(b.Repr())
}

// Apply makes the writes visible and returns what to wait on before a
// reply that depends on them is acted on (see durability). Replicated,
// it is Commit: an entry is visible only once it is applied, and an actor
// must read its own writes.
func (b batch) Apply() (persistence.Durable, error) {
	if c := b.env.Commits; c != nil {
		return persistence.Durable{}, b.through(c)
	}
	return b.Batch.Apply()
}

// Write is for derived writes that a crash may undo (persistence.Batch.Write).
// Replicated, it is Commit: the derived state must follow its partition to
// whichever node leads it.
func (b batch) Write() error {
	if c := b.env.Commits; c != nil {
		return b.through(c)
	}
	return b.Batch.Write()
}

// commitInSteps commits steps in order: on a cluster each step's writes
// are applied in every partition they touch before the next step is
// proposed. A batch that spans partitions is one raft entry a partition
// there, and a kill can part them in any way (docs/cluster.md, "Global
// indexes"), so a write whose parts must not stand without each other
// comes in steps: first what may stand alone (a new credential, a
// revocation, an index entry), last its commit point (the owner's own
// record, what a retry looks at), so that a retry after a kill finds the
// write undone and does it whole again. On a node alone the steps are
// one batch, which the store applies whole.
func (e *Env) commitInSteps(steps ...batch) error {
	if e.Commits == nil {
		whole := steps[0]
		for _, s := range steps[1:] {
			if !s.Empty() {
				if err := whole.AddRepr(s.Repr()); err != nil {
					closeAll(steps)
					return err
				}
			}
			s.Close()
		}
		return whole.Commit()
	}
	for i, s := range steps {
		if err := s.Commit(); err != nil {
			closeAll(steps[i+1:])
			return err
		}
	}
	return nil
}

// closeAll closes the batches of bs that were started.
func closeAll(bs []batch) {
	for _, b := range bs {
		if b.Batch != nil {
			b.Close()
		}
	}
}
