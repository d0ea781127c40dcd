package multiraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft/raftlog"
	"github.com/kitd/kitd/persistence"
)

// logStore is one group's raft.Storage: the live log (entries after the
// last compaction) and the states raft restarts from, kept in memory and
// mirrored on disk by the driver: log and hard state in the raft log,
// the rest in Pebble's batches. Only the driver goroutine
// touches it (raft calls Storage from inside RawNode), so it has no lock.
type logStore struct {
	hs        *pb.HardState // its own, never shared: the driver updates it in place
	cs        *pb.ConfState
	snapIndex uint64     // index of the last entry removed from the log
	snapTerm  uint64     // its term
	ents      []pb.Entry // ents[i].Index == snapIndex+1+i
	applied   uint64
}

var _ raft.Storage = (*logStore)(nil)

func newLogStore() *logStore {
	return &logStore{hs: &pb.HardState{}, cs: &pb.ConfState{}}
}

func (s *logStore) InitialState() (pb.HardState, pb.ConfState, error) {
	return *s.hs, cloneConfState(s.cs), nil
}

// cloneConfState copies cs, whose slices raft and the driver must not
// share.
func cloneConfState(cs *pb.ConfState) pb.ConfState {
	return pb.ConfState{
		Voters: slices.Clone(cs.Voters), Learners: slices.Clone(cs.Learners),
		VotersOutgoing: slices.Clone(cs.VotersOutgoing), LearnersNext: slices.Clone(cs.LearnersNext),
		AutoLeave: cs.AutoLeave,
	}
}

func (s *logStore) FirstIndex() (uint64, error) { return s.snapIndex + 1, nil }

func (s *logStore) LastIndex() (uint64, error) { return s.lastIndex(), nil }

func (s *logStore) lastIndex() uint64 { return s.snapIndex + uint64(len(s.ents)) }

func (s *logStore) Term(i uint64) (uint64, error) {
	switch {
	case i == s.snapIndex:
		return s.snapTerm, nil
	case i < s.snapIndex:
		return 0, raft.ErrCompacted
	case i > s.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-s.snapIndex-1].Term, nil
}

// Entries returns a fresh slice (raft may append to it) holding at least
// one entry, then as many as fit in maxSize.
func (s *logStore) Entries(lo, hi, maxSize uint64) ([]pb.Entry, error) {
	if lo <= s.snapIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 {
		return nil, raft.ErrUnavailable
	}
	src := s.ents[lo-s.snapIndex-1 : hi-s.snapIndex-1]
	n, size := 0, uint64(0)
	for n < len(src) {
		size += uint64(len(src[n].Data)) + entryOverhead
		if n > 0 && size > maxSize {
			break
		}
		n++
	}
	return append([]pb.Entry(nil), src[:n]...), nil
}

// entryOverhead approximates an entry's encoded size beyond its data (term,
// index, type and tags), for raft's message size limits.
const entryOverhead = 24

// Snapshot describes the state a lagging replica receives: the applied
// state, which the StateMachine streams when the message is sent (its state
// is then at least this new; the receiver re-applies the entries in
// between, which Apply's idempotence allows).
func (s *logStore) Snapshot() (pb.Snapshot, error) {
	term, err := s.Term(s.applied)
	if err != nil {
		return pb.Snapshot{}, fmt.Errorf("replication: snapshot at %d: %w", s.applied, err)
	}
	return pb.Snapshot{Metadata: pb.SnapshotMetadata{
		Index:     s.applied,
		Term:      term,
		ConfState: cloneConfState(s.cs),
	}}, nil
}

// append adds entries from a Ready, replacing any conflicting tail. It
// returns the index of the old last entry so the caller can delete the
// replaced range on disk.
func (s *logStore) append(ents []pb.Entry) (oldLast uint64) {
	oldLast = s.lastIndex()
	if len(ents) == 0 {
		return oldLast
	}
	first := ents[0].Index
	if first <= s.snapIndex {
		// Raft never sends entries below its own snapshot; skip any defensively.
		skip := s.snapIndex + 1 - first
		if skip >= uint64(len(ents)) {
			return oldLast
		}
		ents, first = ents[skip:], s.snapIndex+1
	}
	s.ents = append(s.ents[:first-s.snapIndex-1], ents...)
	return oldLast
}

// lastConfIndex is the index of the newest configuration entry of the
// live log, or the compaction mark when it holds none (the configuration
// then is the applied one).
func (s *logStore) lastConfIndex() uint64 {
	for i := len(s.ents) - 1; i >= 0; i-- {
		if s.ents[i].Type != pb.EntryNormal {
			return s.ents[i].Index
		}
	}
	return s.snapIndex
}

// compact forgets the entries up to and including index.
func (s *logStore) compact(index uint64) {
	if index <= s.snapIndex || index > s.lastIndex() {
		return
	}
	term, _ := s.Term(index)
	s.ents = append([]pb.Entry(nil), s.ents[index-s.snapIndex:]...)
	s.snapIndex, s.snapTerm = index, term
}

// restore replaces everything with the state of a snapshot.
func (s *logStore) restore(meta *pb.SnapshotMetadata) {
	s.ents = nil
	s.snapIndex, s.snapTerm = meta.Index, meta.Term
	s.applied = meta.Index
	s.cs = new(cloneConfState(&meta.ConfState))
}

// Encodings of the records. An entry's index is in its key; its value is
// term (8 bytes), type (1 byte), data.

func appendEntryValue(dst []byte, e *pb.Entry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.Term)
	dst = append(dst, byte(e.Type))
	return append(dst, e.Data...)
}

func decodeEntry(index uint64, v []byte) (pb.Entry, error) {
	if len(v) < 9 {
		return pb.Entry{}, errCorrupt("log entry", index)
	}
	return pb.Entry{
		Index: index,
		Term:  binary.BigEndian.Uint64(v),
		Type:  pb.EntryType(v[8]),
		Data:  append([]byte(nil), v[9:]...),
	}, nil
}

func appendHardState(dst []byte, hs *pb.HardState) []byte {
	dst = binary.BigEndian.AppendUint64(dst, hs.Term)
	dst = binary.BigEndian.AppendUint64(dst, hs.Vote)
	return binary.BigEndian.AppendUint64(dst, hs.Commit)
}

func decodeHardState(v []byte) (*pb.HardState, error) {
	if len(v) != 24 {
		return nil, errCorrupt("hard state", 0)
	}
	return &pb.HardState{
		Term:   binary.BigEndian.Uint64(v),
		Vote:   binary.BigEndian.Uint64(v[8:]),
		Commit: binary.BigEndian.Uint64(v[16:]),
	}, nil
}

func decodeUint64(what string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, errCorrupt(what, 0)
	}
	return binary.BigEndian.Uint64(v), nil
}

func errCorrupt(what string, index uint64) error {
	return fmt.Errorf("replication: corrupt %s record (index %d)", what, index)
}

// loadGroups reads every group found under r/ in the store, with its log
// and hard state from the raft log: the inverse of what the driver writes.
// A group exists if the store has its keys; what the raft log holds of
// other groups (a crash between Forget's batch and its reset, or between
// a new group's log and its batch) is dropped. A store written before the
// raft log had a file of its own has the logs and hard states under r/:
// they move to the raft log (a crash before their deletion moves them
// again).
func loadGroups(store *persistence.Store, rlog *raftlog.Log, replayed map[uint16]*raftlog.Replayed) (map[GroupID]*logStore, error) {
	groups := make(map[GroupID]*logStore)
	legacy := make(map[GroupID]bool) // groups with a log or hard state in the store
	lower, upper := rootKeys()
	var ferr error
	err := store.Scan(lower, upper, false, func(k, v []byte) bool {
		g, kind, index := decodeKey(k)
		if kind == kindUnknown {
			ferr = fmt.Errorf("replication: unknown key %q", k)
			return false
		}
		s := groups[g]
		if s == nil {
			s = newLogStore()
			groups[g] = s
		}
		if kind == kindLog || kind == kindHardState {
			legacy[g] = true
		}
		ferr = s.load(kind, index, v)
		return ferr == nil
	})
	if err := errors.Join(err, ferr); err != nil {
		return nil, err
	}
	for g, s := range groups {
		if legacy[g] {
			s.trim()
			rlog.Reset(uint16(g), true) // the store's view, whole
			rlog.Rewrite(uint16(g), s.ents)
			if !isEmpty(s.hs) {
				rlog.SetHardState(uint16(g), s.hs)
			}
			continue
		}
		r := replayed[uint16(g)]
		if r == nil {
			continue
		}
		if r.HardState != nil {
			s.hs = new(*r.HardState) // the group's own: the driver updates it in place
		}
		if !s.takeLog(r.Entries) {
			rlog.Reset(uint16(g), false)
		}
	}
	for g := range replayed {
		if groups[GroupID(g)] == nil {
			rlog.Reset(g, true)
		}
	}
	if err := rlog.Write(true); err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	if len(legacy) > 0 {
		b := store.NewBatch()
		for g := range legacy {
			b.DeleteRange(appendLogKey(nil, g, 0), persistence.PrefixEnd(append(groupPrefix(nil, g), sufLog...)))
			b.Delete(hardStateKey(g))
		}
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("replication: move the raft logs out of the store: %w", err)
		}
	}
	for g, s := range groups {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("replication: group %d: %w", g, err)
		}
		if err := rlog.Release(uint16(g), s.snapIndex); err != nil {
			return nil, fmt.Errorf("replication: %w", err)
		}
	}
	return groups, nil
}

// takeLog takes the raft log's entries of the group past its compaction
// mark. It refuses (and reports false) a log that does not continue the
// mark, or holds a term below the mark's: what a crash left between a
// synced snapshot and the raft log's reset.
func (s *logStore) takeLog(ents []pb.Entry) bool {
	for len(ents) > 0 && ents[0].Index <= s.snapIndex {
		ents = ents[1:]
	}
	if len(ents) == 0 {
		return true
	}
	if ents[0].Index != s.snapIndex+1 || ents[0].Term < s.snapTerm {
		return false
	}
	s.ents = ents
	return true
}

// load takes one record; keys come in order, so a group's log entries come
// after its applied index and conf state, and before hs and snap.
func (s *logStore) load(kind keyKind, index uint64, v []byte) error {
	var err error
	switch kind {
	case kindHardState:
		s.hs, err = decodeHardState(v)
	case kindConfState:
		cs := &pb.ConfState{}
		if err = cs.Unmarshal(v); err == nil {
			s.cs = cs
		}
	case kindApplied:
		s.applied, err = decodeUint64("applied index", v)
	case kindSnapshot:
		if len(v) != 16 {
			return errCorrupt("snapshot", 0)
		}
		s.snapIndex, s.snapTerm = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	case kindLog:
		var e pb.Entry
		if e, err = decodeEntry(index, v); err == nil {
			s.ents = append(s.ents, e)
		}
	}
	return err
}

// trim drops the entries of a log in the store that its compaction mark
// covers (keys come in order: entries are loaded before the mark).
func (s *logStore) trim() {
	for len(s.ents) > 0 && s.ents[0].Index <= s.snapIndex {
		s.ents = s.ents[1:]
	}
}

// check verifies the log is contiguous and consistent with the applied and
// commit indexes.
func (s *logStore) check() error {
	s.trim()
	for i, e := range s.ents {
		if e.Index != s.snapIndex+1+uint64(i) {
			return fmt.Errorf("log gap at index %d", s.snapIndex+1+uint64(i))
		}
	}
	if c := s.hs.Commit; c < s.applied && s.applied <= s.lastIndex() {
		// The commit index is written only with a new term or vote
		// (Node.persist); what was applied was committed.
		hs := *s.hs
		hs.Commit = s.applied
		s.hs = &hs
	}
	if s.applied < s.snapIndex || s.applied > s.lastIndex() {
		return fmt.Errorf("applied index %d outside the log [%d, %d]", s.applied, s.snapIndex, s.lastIndex())
	}
	if c := s.hs.Commit; c > s.lastIndex() {
		return fmt.Errorf("commit index %d beyond the log's end %d", c, s.lastIndex())
	}
	return nil
}
