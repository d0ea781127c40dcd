// Package partition maps every identity of kitd to one of a fixed number
// of partitions: the unit of placement and replication of the cluster
// (docs/cluster.md). A partition's records are one key range of the store
// (KeyRange: every key under p/<ID>/, whose rest actors/keys.go shapes),
// so handing it to another node is a range scan, and
// routing a request needs nothing but the identity it names.
//
// The mapping is part of the storage layout: changing Count or the hash
// moves every key, which is a data upgrade, not a refactor.
package partition

import (
	"encoding/binary"

	"github.com/kitd/kitd/internal/ids"
)

// Count is the number of partitions. It bounds how many nodes can share
// the work (each partition has one leader) and costs one Raft group each;
// 64 spreads evenly over the few to twenty nodes kitd is built for.
const Count = 64

// ID is a partition, 0 to Count-1.
type ID uint16

// Of is the partition of an identity (a conversation, workspace, user,
// installation, webhook, Kit, slug id). It is the tag that message ids of
// a conversation carry (ids.MessageTag) reduced to Count, so a message id
// names its partition without any lookup.
func Of(identity string) ID { return OfTag(ids.MessageTag(identity)) }

// OfTag is the partition of the identity whose tag is tag.
func OfTag(tag uint32) ID { return ID(tag % Count) }

// OfHash is the partition of a record named by a SHA-256 hash (a
// credential, an install link, an email): the hash is uniform already, so
// its first four bytes are the tag. A shorter h is a programming error.
func OfHash(h []byte) ID { return OfTag(binary.BigEndian.Uint32(h[:4])) }

// KeyPrefixLen is the length of the prefix every record of a partition
// starts with: p/<ID, 2 bytes big-endian>/.
const KeyPrefixLen = 5

// AppendKeyPrefix appends the prefix of partition p's key range to b.
func AppendKeyPrefix(b []byte, p ID) []byte {
	return append(b, 'p', '/', byte(p>>8), byte(p), '/')
}

// KeyRange is the key range [lower, upper) that holds every record of
// partition p: what a replica of p holds, and what moves with it.
func KeyRange(p ID) (lower, upper []byte) {
	lower = AppendKeyPrefix(nil, p)
	upper = AppendKeyPrefix(nil, p)
	upper[KeyPrefixLen-1]++ // past every key that starts with lower
	return lower, upper
}

// OfKey is the partition whose range holds k; false for a key in no
// partition (the node's own keys, raft's).
func OfKey(k []byte) (ID, bool) {
	if len(k) < KeyPrefixLen || k[0] != 'p' || k[1] != '/' || k[4] != '/' {
		return 0, false
	}
	p := ID(k[2])<<8 | ID(k[3])
	return p, p < Count
}
