// Package partition maps every identity of kitd to one of a fixed number
// of partitions: the unit of placement and replication of the cluster
// (docs/cluster.md). A partition's records are one key range of the store
// (actors/keys.go), so handing it to another node is a range scan, and
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
