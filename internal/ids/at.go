package ids

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// atSeq orders the NewAt ids of one millisecond: it counts up from a random
// start (so that two processes rarely share a value).
var atSeq atomic.Uint64

func init() {
	var b [8]byte
	_, _ = rand.Read(b[:])
	atSeq.Store(binary.BigEndian.Uint64(b[:]) >> 24) // below 2^40: 2^42 is far
}

// NewAt returns a fresh UUIDv7 whose timestamp is t (milliseconds) rather
// than the wall clock: records that are scanned and expired by time (the
// developer log) take their ids from the server's clock, so that a test
// clock orders and expires them too. Within a process, ids of the same
// millisecond sort in creation order: the 74 bits after the timestamp are a
// 42-bit counter, then 32 random bits.
func NewAt(t time.Time) string {
	var u uuid.UUID
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	c := atSeq.Add(1) & (1<<42 - 1)
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70 | byte(c>>38)&0x0f // version 7, counter bits 41-38
	u[7] = byte(c >> 30)
	u[8] = 0x80 | byte(c>>24)&0x3f // variant 10, counter bits 29-24
	u[9], u[10], u[11] = byte(c>>16), byte(c>>8), byte(c)
	// The last 32 bits only keep ids of two processes apart; they are no
	// secret, so the runtime's cheap generator serves (crypto/rand cost a
	// developer log entry, one per webhook post, a third of a microsecond).
	binary.BigEndian.PutUint32(u[12:], mrand.Uint32())
	return u.String()
}

// PrefixAt is the first 13 characters ("xxxxxxxx-xxxx") of every NewAt id
// of the millisecond t: ids of earlier milliseconds sort before it.
func PrefixAt(t time.Time) string {
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	h := fmt.Sprintf("%012x", ms)
	return h[:8] + "-" + h[8:]
}

// Nonce returns a random nonzero 64-bit value that tells one request from
// another within a short time (a retry from a new request); it is not a
// secret and not unique forever.
func Nonce() uint64 { return mrand.Uint64() | 1 }
