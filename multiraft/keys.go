package multiraft

import (
	"bytes"
	"encoding/binary"

	"github.com/kitd/kitd/persistence"
)

// Every key of this package lives under r/<group, 2 bytes big-endian>/. The
// prefix r/ belongs to replication alone (actors/keys.go owns the others), so
// a group's raft state is one key range, and all groups together another.
//
//	r/<g>/cs           conf state at the applied index (protobuf)
//	r/<g>/applied      applied index, written with the applied records
//	r/<g>/snap         index and term of the last entry removed from the log
//
// A group's log and hard state are in the raft log (package raftlog). A
// store written before had them here, which Open moves there:
//
//	r/<g>/hs           hard state: term, vote, commit
//	r/<g>/log/<index>  one entry: term, type, data
const (
	rootPrefix = "r/"
	groupLen   = len(rootPrefix) + 2 + 1 // r/<g>/

	sufHardState = "hs"
	sufConfState = "cs"
	sufApplied   = "applied"
	sufSnapshot  = "snap"
	sufLog       = "log/"
)

// rootKeys bounds the key range of every group.
func rootKeys() (lower, upper []byte) {
	lower = []byte(rootPrefix)
	return lower, persistence.PrefixEnd(lower)
}

func groupPrefix(dst []byte, g GroupID) []byte {
	dst = append(dst, rootPrefix...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(g))
	return append(dst, '/')
}

func hardStateKey(g GroupID) []byte { return append(groupPrefix(nil, g), sufHardState...) }
func confStateKey(g GroupID) []byte { return append(groupPrefix(nil, g), sufConfState...) }
func appliedKey(g GroupID) []byte   { return append(groupPrefix(nil, g), sufApplied...) }
func snapshotKey(g GroupID) []byte  { return append(groupPrefix(nil, g), sufSnapshot...) }

// appendLogKey appends the key of entry index of group g to dst, so that the
// driver builds every entry's key in one reused buffer.
func appendLogKey(dst []byte, g GroupID, index uint64) []byte {
	dst = append(groupPrefix(dst, g), sufLog...)
	return persistence.AppendUint64(dst, index)
}

// groupKeys bounds the key range of group g.
func groupKeys(g GroupID) (lower, upper []byte) {
	lower = groupPrefix(nil, g)
	return lower, persistence.PrefixEnd(lower)
}

// keyKind says which record a key under r/ holds.
type keyKind int

const (
	kindUnknown keyKind = iota
	kindHardState
	kindConfState
	kindApplied
	kindSnapshot
	kindLog
)

// decodeKey is the inverse of the constructors above: the group, the kind of
// record and, for a log entry, its index.
func decodeKey(key []byte) (g GroupID, kind keyKind, index uint64) {
	if len(key) < groupLen || string(key[:len(rootPrefix)]) != rootPrefix || key[groupLen-1] != '/' {
		return 0, kindUnknown, 0
	}
	g = GroupID(binary.BigEndian.Uint16(key[len(rootPrefix):]))
	switch suf := key[groupLen:]; {
	case string(suf) == sufHardState:
		return g, kindHardState, 0
	case string(suf) == sufConfState:
		return g, kindConfState, 0
	case string(suf) == sufApplied:
		return g, kindApplied, 0
	case string(suf) == sufSnapshot:
		return g, kindSnapshot, 0
	case len(suf) == len(sufLog)+8 && string(suf[:len(sufLog)]) == sufLog:
		return g, kindLog, binary.BigEndian.Uint64(suf[len(sufLog):])
	}
	return g, kindUnknown, 0
}

// nodeIDKey holds this node's raft id: random, made on the first start.
// It is outside r/ (a node's fact, not a group's) and outside the
// partitions, so it never moves with a snapshot.
func nodeIDKey() []byte { return []byte(nodePrefix + "id") }

// nodePrefix holds the keys of the node itself.
const nodePrefix = "rnode/"

// forgottenKey marks a store whose node forgot a group (Node.Forget): the
// node belonged to a cluster, so having no groups does not make it new.
func forgottenKey() []byte { return []byte(nodePrefix + "forgotten") }

// NodeLocal reports whether k is one of this package's keys: a group's
// raft state or the node's raft identity, which belong to this node alone
// and never travel in a backup (a restored directory starts new groups
// with the records as their state, and a new raft id).
func NodeLocal(k []byte) bool {
	return bytes.HasPrefix(k, []byte(rootPrefix)) || bytes.HasPrefix(k, []byte(nodePrefix))
}
