package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Upgrades of data directories that older builds wrote. A step writes what
// a newer layout expects and an older build did not write; each runs once,
// at start, before any actor, so no actor's single-writer rule is crossed.
// The directory records the layout it reached (layoutKey); an older one
// with no record runs every step, and a fresh (empty) one records the
// newest layout at once.
//
// Changes that an actor can make itself when it activates need no step
// here (a conversation writes its messageTagKey entry so): a step is for
// indexes read without asking their owner.

// layoutSteps[i] brings a directory from layout i to layout i+1.
var layoutSteps = [...]layoutStep{
	{"index the sign-in emails", indexSignInEmails},               // 0 → 1 (2026-11-23)
	{"move every key under its partition", moveIntoPartitions},    // 1 → 2 (2026-11-23)
	{"queue fresh events by taken records", takenRecordsLayout},   // 2 → 3 (2026-11-27)
	{"key outbox entries by their ids' bytes", outboxKeysOfBytes}, // 3 → 4 (2026-11-28)
}

// layoutStep is one step of an upgrade: what it does, for the log, and
// the step, which calls progress with the keys written so far at each
// batch it commits and returns how many it wrote.
type layoutStep struct {
	what string
	run  func(store *persistence.Store, progress func(keys int)) (int, error)
}

// Upgrade brings store to the newest layout. It must run before any actor
// of the node does. It logs each step, its progress and its end: on a
// large directory it may take minutes, before the node listens.
func Upgrade(store *persistence.Store, log *slog.Logger) error {
	at, err := layoutOf(store)
	if err != nil {
		return err
	}
	newest := uint64(len(layoutSteps))
	if at > newest {
		return fmt.Errorf("data directory is at layout %d, newer than this build's %d", at, newest)
	}
	if at == newest {
		return nil
	}
	if at == 0 && empty(store) {
		// A fresh directory: nothing to upgrade, nothing to say.
		return recordLayout(store, newest)
	}
	start := time.Now()
	log.Info("upgrading the data layout", "from", at, "to", newest)
	for ; at < newest; at++ {
		step, to, stepStart := layoutSteps[at], at+1, time.Now()
		log.Info("data layout step", "to", to, "what", step.what)
		keys, err := step.run(store, func(keys int) {
			log.Info("data layout step progress", "to", to, "keys", keys)
		})
		if err != nil {
			return fmt.Errorf("upgrade data layout %d to %d: %w", at, to, err)
		}
		if err := recordLayout(store, to); err != nil {
			return err
		}
		log.Info("data layout step done", "to", to, "keys", keys, "took", time.Since(stepStart).Round(time.Millisecond).String())
	}
	log.Info("upgraded the data layout", "layout", newest, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

func recordLayout(store *persistence.Store, layout uint64) error {
	b := store.NewBatch()
	b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, layout))
	if err := b.Commit(); err != nil {
		return fmt.Errorf("record data layout %d: %w", layout, err)
	}
	return nil
}

// empty reports whether store holds no key; a read error counts as not
// empty, so that the steps run and meet it.
func empty(store *persistence.Store) bool {
	found := false
	err := store.Scan(nil, nil, false, func(_, _ []byte) bool { found = true; return false })
	return err == nil && !found
}

func layoutOf(store *persistence.Store) (uint64, error) {
	v, err := store.Get(layoutKey())
	if errors.Is(err, persistence.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("data layout record of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// indexSignInEmails writes the email index entry of every user who can sign
// in (signsIn): builds before the index wrote users without it. It runs on
// layout 0, so it reads and writes keys without a partition.
func indexSignInEmails(store *persistence.Store, progress func(keys int)) (int, error) {
	const perBatch = 10_000 // bounds the batch an upgrade holds in memory
	b, n, written := store.NewBatch(), 0, 0
	var decodeErr error
	prefix := unpartitionedWorkspacesPrefix()
	err := store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		if kind, _ := unpartitionedKind(k); kind != "userKey" {
			return true
		}
		u := &kitpb.User{}
		if decodeErr = proto.Unmarshal(v, u); decodeErr != nil {
			decodeErr = fmt.Errorf("decode %q: %w", k, decodeErr)
			return false
		}
		if !signsIn(u) {
			return true
		}
		b.Set(unpartitioned(emailUserKey(normalEmail(u.Email), u.Id)), []byte(u.WorkspaceId))
		if n++; n == perBatch {
			if decodeErr = b.Commit(); decodeErr != nil {
				return false
			}
			written += n
			progress(written)
			b, n = store.NewBatch(), 0
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return written, err
	}
	return written + n, b.Commit()
}

// moveIntoPartitions moves every key of an older layout under its
// partition (keys.go, partitionedKey).
func moveIntoPartitions(store *persistence.Store, progress func(keys int)) (int, error) {
	m := newKeyMover(store, progress)
	var moveErr error
	err := store.Scan(nil, nil, false, func(k, v []byte) bool {
		to, ok, err := partitionedKey(k)
		if err != nil {
			moveErr = err
			return false
		}
		if ok {
			moveErr = m.move(k, to, v)
		}
		return moveErr == nil
	})
	return m.end(errors.Join(err, moveErr))
}

// keyMover moves keys in batches of at most keyMoverBatch bytes, each
// whole (the new keys set and the old ones deleted together), so that an
// upgrade cut short by a crash resumes where it stopped.
type keyMover struct {
	store    *persistence.Store
	progress func(keys int)
	b        *persistence.Batch
	size, n  int // the batch's bytes and keys
	moved    int // keys in the batches committed
}

// keyMoverBatch bounds the batch an upgrade holds in memory.
const keyMoverBatch = 32 << 20

func newKeyMover(store *persistence.Store, progress func(keys int)) *keyMover {
	return &keyMover{store: store, progress: progress, b: store.NewBatch()}
}

// move moves from's value v to the key to.
func (m *keyMover) move(from, to, v []byte) error {
	m.b.Set(to, v)
	m.b.Delete(from)
	m.n++
	if m.size += len(from) + len(to) + len(v); m.size < keyMoverBatch {
		return nil
	}
	if err := m.b.Commit(); err != nil {
		return err
	}
	m.moved += m.n
	m.progress(m.moved)
	m.b, m.size, m.n = m.store.NewBatch(), 0, 0
	return nil
}

// end commits what is left, unless the scan that moved keys failed with
// err, and returns the keys moved.
func (m *keyMover) end(err error) (int, error) {
	if err != nil {
		m.b.Close()
		return m.moved, err
	}
	return m.moved + m.n, m.b.Commit()
}

// takenRecordsLayout marks a directory whose delivery actors may write
// taken records (delivery_taken.go). It writes nothing: the queue records
// of earlier layouts that refer to an outbox entry still load. The layout
// is for older builds, which do not read taken records and would take
// their events again under new sequences: they refuse the directory.
func takenRecordsLayout(*persistence.Store, func(keys int)) (int, error) { return 0, nil }

// outboxKeysOfBytes rewrites every outbox entry under its key of layout 4,
// which holds the ids' 16 bytes instead of their text (keys.go,
// outboxKey), batch by batch as keyMover does. Queue and taken records
// refer to an entry by source and position, not by key, so they stay as
// they are. An entry whose key cannot be rewritten stops the upgrade: its
// event would otherwise be lost to its delivery actor.
func outboxKeysOfBytes(store *persistence.Store, progress func(keys int)) (int, error) {
	m := newKeyMover(store, progress)
	for p := range partition.ID(partition.Count) {
		prefix := textOutboxesPrefix(p)
		var moveErr error
		err := store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
			to, ok := textOutboxKeyNow(k)
			if !ok {
				moveErr = fmt.Errorf("an outbox key %q that layout 4 has no key for", k)
				return false
			}
			moveErr = m.move(k, to, v)
			return moveErr == nil
		})
		if err = errors.Join(err, moveErr); err != nil {
			return m.end(err)
		}
	}
	return m.end(nil)
}
