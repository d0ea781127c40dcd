package actors

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Taken records (docs/deliveries.md, "Outbox and sequencer"): each commit
// of the sequencer writes one record (takenEventsKey, under its first
// sequence) naming the outbox entries it took, in sequence order, instead
// of a queue record per event. It binds each sequence to its event durably,
// which is all a fresh event's queue record did: the entry holds the event.
// The record is deleted with the outcome that leaves the last of its
// events no longer queued as a reference (delivered, dead, or failed: the
// queue record then holds the event itself). A record and its deletion
// are thus written once a commit rather than a record and a deletion an
// event, which every flush and compaction carried.

// maxTakenPerRecord bounds a taken record: an activation that takes a
// backlog writes a record per this many events.
const maxTakenPerRecord = 256

// takenRecords is the sequencer's bookkeeping of its taken records.
type takenRecords struct {
	first uint64      // the first sequence of cur
	cur   []outboxRef // taken since the last commit, from first on
	// live is, by record (its first sequence), how many of its events are
	// still queued as references (delivery.takenBy).
	live map[uint64]int
}

// add notes that seq refers to ref; a full record is put in b.
func (t *takenRecords) add(b batch, inst string, seq uint64, ref outboxRef) (record uint64) {
	if len(t.cur) == 0 {
		t.first = seq
	}
	t.cur = append(t.cur, ref)
	if t.live == nil {
		t.live = make(map[uint64]int)
	}
	record = t.first
	t.live[record]++
	if len(t.cur) == maxTakenPerRecord {
		t.put(b, inst)
	}
	return record
}

// put writes what was taken since the last put in b.
func (t *takenRecords) put(b batch, inst string) {
	if len(t.cur) == 0 {
		return
	}
	b.Set(takenEventsKey(inst, t.first), encodeTaken(t.cur))
	t.cur = t.cur[:0]
}

// unref notes in b that d is no longer queued as a reference: the last of
// its record's deletes the record.
func (a *deliveryActor) unref(b batch, d *delivery) {
	if d.takenBy == 0 {
		return
	}
	if n := a.tk.live[d.takenBy] - 1; n > 0 {
		a.tk.live[d.takenBy] = n
	} else {
		delete(a.tk.live, d.takenBy)
		b.Delete(takenEventsKey(a.id, d.takenBy))
	}
	d.takenBy = 0
}

// Taken record encoding: for each entry in sequence order, its source
// (field 1, bytes) then its position (field 2, varint).
const (
	takenSourceField = 1
	takenPosField    = 2
)

func encodeTaken(refs []outboxRef) []byte {
	n := 0
	for _, r := range refs {
		n += 2 + len(r.source) + protowire.SizeVarint(r.pos) + 2
	}
	v := make([]byte, 0, n)
	for _, r := range refs {
		v = protowire.AppendTag(v, takenSourceField, protowire.BytesType)
		v = protowire.AppendString(v, r.source)
		v = protowire.AppendTag(v, takenPosField, protowire.VarintType)
		v = protowire.AppendVarint(v, r.pos)
	}
	return v
}

func decodeTaken(v []byte) ([]outboxRef, error) {
	var refs []outboxRef
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		v = v[n:]
		switch {
		case num == takenSourceField && typ == protowire.BytesType:
			s, n := protowire.ConsumeString(v)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			refs = append(refs, outboxRef{source: s})
			v = v[n:]
		case num == takenPosField && typ == protowire.VarintType && len(refs) > 0:
			p, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			refs[len(refs)-1].pos = p
			v = v[n:]
		default:
			return nil, fmt.Errorf("field %d of type %d", num, typ)
		}
	}
	return refs, nil
}

// takenRef is an event of a taken record found at activation.
type takenRef struct {
	seq, record uint64
	ref         outboxRef
}

// loadTaken reads the taken records of the installation: the events they
// name that are still queued as references, in sequence order. An event
// is not when the queue holds a record of its own (its state after a
// failure, put by the same write that left the reference), when it has a
// delivered record (loadDelivered ran), or when its outbox entry is gone
// (dead, or delivered and pruned since). A record none of whose events is
// left is deleted (in the pending batch): the outcome that should have
// deleted it was written, the record's deletion being in the same batch,
// so this happens only to a record whose events all left otherwise.
func (a *deliveryActor) loadTaken(stored map[uint64]bool) ([]takenRef, error) {
	prefix := takenEventsPrefix(a.id)
	var out []takenRef
	var records []uint64
	var decodeErr error
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		first := decodeSeq(k[len(prefix):])
		records = append(records, first)
		var refs []outboxRef
		if refs, decodeErr = decodeTaken(v); decodeErr != nil {
			decodeErr = fmt.Errorf("delivery %s: taken record %d: %w", a.id, first, decodeErr)
			return false
		}
		for i, r := range refs {
			out = append(out, takenRef{seq: first + uint64(i), record: first, ref: r})
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, err
	}
	live := out[:0]
	for _, t := range out {
		if stored[t.seq] {
			continue
		}
		if _, delivered := slices.BinarySearch(a.delivered, t.seq); delivered {
			continue
		}
		ok, err := a.env.Partition(partition.Of(t.ref.source)).Has(outboxKey(a.id, t.ref.source, t.ref.pos))
		if err != nil {
			return nil, err
		}
		if ok {
			live = append(live, t)
		}
	}
	a.tk.live = make(map[uint64]int)
	for _, t := range live {
		a.tk.live[t.record]++
	}
	for _, r := range records {
		if a.tk.live[r] == 0 {
			a.pending().Delete(takenEventsKey(a.id, r))
		}
	}
	return live, nil
}

// referenceRecord is the queue record a reference stands for: with the
// outbox entry merged in (resolve), the event with its sequence.
func referenceRecord(seq uint64, d *delivery) []byte {
	return marshal(&kitpb.Event{Sequence: seq, OutboxSource: d.source, OutboxPos: d.outboxPos})
}

// queuedRecordOf is the record of the queued event seq (d), the outbox
// entry it refers to merged in: from the store when the queue holds a
// record of its own, else from its reference.
func (a *deliveryActor) queuedRecordOf(seq uint64, d *delivery) ([]byte, error) {
	if d.stored {
		return a.queuedRecord(seq)
	}
	return a.resolve(referenceRecord(seq, d))
}

// queuedSeqs are the sequences queued in [lower, upper) (upper 0: no
// bound), in order: all of them (n 0), or the n lowest, or with highest
// the n highest (q.seqs).
func (a *deliveryActor) queuedSeqs(lower, upper uint64, n int, highest bool) []uint64 {
	return a.q.seqs(lower, upper, n, highest)
}

// seqs is queuedSeqs. A page of a listing keeps n sequences while it
// walks the queue instead of sorting all of it: a listing had sorted an
// endpoint's whole backlog on every call.
func (q *deliveryQueue) seqs(lower, upper uint64, n int, highest bool) []uint64 {
	var out []uint64
	// With n, out is a heap whose root is the sequence to drop first for
	// a better one: the lowest kept of the highest, or the highest of the
	// lowest.
	before := func(x, y uint64) bool { return (x < y) == highest }
	for s := range q.state {
		switch {
		case s < lower || upper != 0 && s >= upper:
		case n <= 0 || len(out) < n:
			out = append(out, s)
			if n > 0 {
				for i := len(out) - 1; i > 0 && before(out[i], out[(i-1)/2]); i = (i - 1) / 2 {
					out[i], out[(i-1)/2] = out[(i-1)/2], out[i]
				}
			}
		case before(out[0], s):
			out[0] = s
			for i := 0; ; {
				m := i
				for _, c := range [2]int{2*i + 1, 2*i + 2} {
					if c < len(out) && before(out[c], out[m]) {
						m = c
					}
				}
				if m == i {
					break
				}
				out[i], out[m] = out[m], out[i]
				i = m
			}
		}
	}
	slices.Sort(out)
	return out
}

// TakenEvents reads a taken record (KeyKind "takenEventsKey") of a data
// directory, for tools and tests: the sequence of its first event, and
// the outbox entry of each of its events in sequence order, as source and
// position.
func TakenEvents(k, v []byte) (first uint64, sources []string, positions []uint64, err error) {
	if len(k) < positionLen {
		return 0, nil, nil, fmt.Errorf("taken record key %q: too short", k)
	}
	refs, err := decodeTaken(v)
	if err != nil {
		return 0, nil, nil, err
	}
	for _, r := range refs {
		sources, positions = append(sources, r.source), append(positions, r.pos)
	}
	return decodeSeq(k[len(k)-positionLen:]), sources, positions, nil
}
