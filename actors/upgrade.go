package actors

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Upgrades of data directories that older builds wrote. A step writes what
// a newer layout expects and an older build did not write; each runs once,
// at start, before any actor, so no actor's single-writer rule is crossed.
// The directory records the layout it reached (layoutKey); one with no
// record, an older one or a fresh one, runs every step (on a fresh one they
// find nothing to do).
//
// Changes that an actor can make itself when it activates need no step
// here (a conversation writes its messageTagKey entry so): a step is for
// indexes read without asking their owner.

// layoutSteps[i] brings a directory from layout i to layout i+1.
var layoutSteps = [...]func(*persistence.Store) error{
	indexSignInEmails,  // 0 → 1: the email index of sign-in (2026-11-23)
	moveIntoPartitions, // 1 → 2: every key under its partition (2026-11-23)
}

// Upgrade brings store to the newest layout. It must run before any actor
// of the node does.
func Upgrade(store *persistence.Store) error {
	at, err := layoutOf(store)
	if err != nil {
		return err
	}
	if at > uint64(len(layoutSteps)) {
		return fmt.Errorf("data directory is at layout %d, newer than this build's %d", at, len(layoutSteps))
	}
	for ; at < uint64(len(layoutSteps)); at++ {
		if err := layoutSteps[at](store); err != nil {
			return fmt.Errorf("upgrade data layout %d to %d: %w", at, at+1, err)
		}
		b := store.NewBatch()
		b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, at+1))
		if err := b.Commit(); err != nil {
			return fmt.Errorf("record data layout %d: %w", at+1, err)
		}
	}
	return nil
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
func indexSignInEmails(store *persistence.Store) error {
	const perBatch = 10_000 // bounds the batch an upgrade holds in memory
	b, n := store.NewBatch(), 0
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
			b, n = store.NewBatch(), 0
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return err
	}
	return b.Commit()
}

// moveIntoPartitions moves every key of an older layout under its
// partition (keys.go, partitionedKey). Each batch moves its keys whole (the
// new key set and the old one deleted together), so an upgrade cut short
// by a crash resumes where it stopped.
func moveIntoPartitions(store *persistence.Store) error {
	const perBatch = 32 << 20 // bytes: bounds the batch an upgrade holds in memory
	b, size := store.NewBatch(), 0
	var moveErr error
	err := store.Scan(nil, nil, false, func(k, v []byte) bool {
		moved, ok, err := partitionedKey(k)
		if err != nil {
			moveErr = err
			return false
		}
		if !ok {
			return true
		}
		b.Set(moved, v)
		b.Delete(k)
		if size += 2*len(k) + len(v); size >= perBatch {
			if moveErr = b.Commit(); moveErr != nil {
				return false
			}
			b, size = store.NewBatch(), 0
		}
		return true
	})
	if err == nil {
		err = moveErr
	}
	if err != nil {
		return err
	}
	return b.Commit()
}
