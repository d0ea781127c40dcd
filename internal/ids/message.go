package ids

import (
	"crypto/sha256"
	"encoding/binary"
	mrand "math/rand/v2"
	"time"

	"github.com/google/uuid"
)

// MaxMessageSeq is the largest position a message id can carry.
const MaxMessageSeq = 1<<42 - 1

// MessageTag is the 32-bit tag that every message id of a conversation
// carries: the first four bytes of SHA-256 of the conversation's id. Tags
// of different conversations may collide; the id's position and a compare
// of the stored id tell them apart.
func MessageTag(conversationID string) uint32 {
	// Every key of a partition is built with it (internal/partition): an
	// id of up to 64 bytes is hashed from the stack, not a copy on the heap.
	var buf [64]byte
	b := buf[:0]
	if len(conversationID) <= len(buf) {
		b = append(b, conversationID...)
	} else {
		b = []byte(conversationID)
	}
	h := sha256.Sum256(b)
	return binary.BigEndian.Uint32(h[:4])
}

// NewMessage returns the id of message seq (1 to MaxMessageSeq) of the
// conversation tagged tag: a UUIDv7 of millisecond t whose 74 bits after
// the timestamp are the tag (32 bits) then seq (42 bits). The id itself
// says where the message is stored, so a post writes no locator record
// beside the message (docs/architecture.md "Message ids").
func NewMessage(t time.Time, tag uint32, seq uint64) string {
	var u uuid.UUID
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	hi := tag >> 22                           // payload bits 73-64
	lo := uint64(tag)<<42 | seq&MaxMessageSeq // payload bits 63-0
	u[6] = 0x70 | byte(hi>>6)                 // version 7, payload 73-70
	u[7] = byte(hi&0x3f)<<2 | byte(lo>>62)    // payload 69-62
	u[8] = 0x80 | byte(lo>>56)&0x3f           // variant 10, payload 61-56
	for i := range 7 {
		u[9+i] = byte(lo >> (48 - 8*i))
	}
	return u.String()
}

// ParseMessage returns the tag and position that NewMessage put into id.
// ok is false when id cannot be a message id: not a canonical UUID, not
// version 7 of the RFC variant, or position 0.
func ParseMessage(id string) (tag uint32, seq uint64, ok bool) {
	if len(id) != 36 {
		return 0, 0, false
	}
	u, err := uuid.Parse(id)
	if err != nil || u[6]>>4 != 7 || u[8]>>6 != 2 {
		return 0, 0, false
	}
	hi := uint32(u[6]&0x0f)<<6 | uint32(u[7]>>2)
	lo := uint64(u[7]&3)<<62 | uint64(u[8]&0x3f)<<56
	for i := range 7 {
		lo |= uint64(u[9+i]) << (48 - 8*i)
	}
	tag, seq = hi<<22|uint32(lo>>42), lo&MaxMessageSeq
	return tag, seq, seq != 0
}

// NewTagged returns a fresh id of millisecond t that carries tag as a
// message id does, with a random number where a message id has its
// position: the id of a file says which conversation's partition and tag
// index to look in, as a message's does, so it needs no locator record.
func NewTagged(t time.Time, tag uint32) string {
	return NewMessage(t, tag, 1+mrand.Uint64N(MaxMessageSeq))
}
