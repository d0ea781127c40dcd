package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Journal is one actor's event log with snapshots. Its keys are
//
//	j/<stream>/e/<seq, 8 bytes big-endian>  -> event bytes
//	j/<stream>/s                            -> <seq, 8 bytes big-endian><state bytes>
//
// so a stream's events sort by sequence and sit in one contiguous range.
// A Journal holds no state besides its keys; it is cheap and safe to share.
type Journal struct {
	s      *Store
	events []byte // "j/<stream>/e/"
	snap   []byte // "j/<stream>/s"
}

// Journal returns the journal of stream, e.g. "conversation/<uuid>".
//
// With raw names, stream "a" would own every key starting with "j/a/e/",
// which includes stream "a/e"'s keys. So a path segment equal to "e" is
// written as "%65" and "%" as "%25"; this encoding is injective and leaves
// ordinary names (no "%", no segment "e") byte-for-byte as given.
func (s *Store) Journal(stream string) *Journal {
	base := append([]byte("j/"), encodeStream(stream)...)
	return &Journal{
		s:      s,
		events: append(append([]byte(nil), base...), "/e/"...),
		snap:   append(append([]byte(nil), base...), "/s"...),
	}
}

func encodeStream(stream string) string {
	segs := strings.Split(stream, "/")
	for i, seg := range segs {
		seg = strings.ReplaceAll(seg, "%", "%25")
		if seg == "e" {
			seg = "%65"
		}
		segs[i] = seg
	}
	return strings.Join(segs, "/")
}

func (j *Journal) eventKey(seq uint64) []byte {
	k := make([]byte, 0, len(j.events)+8)
	return AppendUint64(append(k, j.events...), seq)
}

// Append adds the event with sequence seq to b (not committed yet).
func (j *Journal) Append(b *Batch, seq uint64, event []byte) {
	b.Set(j.eventKey(seq), event)
}

// Snapshot adds to b the snapshot state taken at seq and deletes the events
// it covers (seq and below), so the journal only keeps what replay needs.
func (j *Journal) Snapshot(b *Batch, seq uint64, state []byte) {
	v := make([]byte, 0, 8+len(state))
	b.Set(j.snap, append(AppendUint64(v, seq), state...))
	end := PrefixEnd(j.events)
	if seq < math.MaxUint64 {
		end = j.eventKey(seq + 1)
	}
	b.DeleteRange(j.eventKey(0), end)
}

// Recover calls restore with the latest snapshot's state, only if there is a
// snapshot, then replay for every event after it in ascending order. It
// returns the last sequence number seen: the last event's, else the
// snapshot's, else 0. The state and event slices belong to the callee. An
// error from restore or replay stops recovery and is returned wrapped.
func (j *Journal) Recover(restore func(state []byte) error, replay func(seq uint64, event []byte) error) (last uint64, err error) {
	// One point-in-time view, so a concurrent Snapshot cannot delete events
	// between reading the snapshot and reading the events.
	view := j.s.db.NewSnapshot()
	defer view.Close()

	start := j.eventKey(0)
	snap, err := get(view, j.snap)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("persistence: recover %s: %w", j.snap, err)
	case len(snap) < 8:
		return 0, fmt.Errorf("persistence: recover %s: snapshot of %d bytes is corrupt", j.snap, len(snap))
	default:
		last = binary.BigEndian.Uint64(snap)
		if err := restore(snap[8:]); err != nil {
			return 0, fmt.Errorf("persistence: recover %s: restore: %w", j.snap, err)
		}
		if last == math.MaxUint64 {
			return last, nil
		}
		start = j.eventKey(last + 1)
	}

	it, err := view.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: PrefixEnd(j.events)})
	if err != nil {
		return 0, fmt.Errorf("persistence: recover %s: %w", j.events, err)
	}
	var ferr error
	err = scan(it, false, func(k, v []byte) bool {
		if len(k) != len(j.events)+8 {
			ferr = fmt.Errorf("persistence: recover %s: unexpected key %q", j.events, k)
			return false
		}
		seq := binary.BigEndian.Uint64(k[len(j.events):])
		if err := replay(seq, append([]byte(nil), v...)); err != nil {
			ferr = fmt.Errorf("persistence: recover %s: replay %d: %w", j.events, seq, err)
			return false
		}
		last = seq
		return true
	})
	if ferr != nil {
		return 0, ferr
	}
	if err != nil {
		return 0, err
	}
	return last, nil
}
