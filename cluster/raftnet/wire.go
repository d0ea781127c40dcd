package raftnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
)

// The wire format (docs/cluster.md, "Only members talk to members").
//
// A raft batch is one payload of a peer one-way batch, all its messages
// for one node:
//
//	version byte (batchV1)
//	then, until the end, for each message:
//	  group    uvarint (at most 65535: a multiraft.GroupID)
//	  length   uvarint
//	  message  length bytes: a raftpb.Message, protobuf encoded
//
// A snapshot stream's header is:
//
//	version byte (snapshotV1)
//	group    uvarint
//	message  the rest: the MsgSnap, protobuf encoded
//
// and its chunks are the bytes StateMachine.Snapshot wrote, in order. The
// two version bytes differ, so that a stream or batch of the other kind,
// or of a later version, is refused by its first byte.
const (
	batchV1    byte = 0x01
	snapshotV1 byte = 0x81
)

var (
	errVersion    = errors.New("unknown version")
	errTruncated  = errors.New("truncated")
	errGroupRange = errors.New("group id out of range")
	errNotForMe   = errors.New("message for another node")
	errType       = errors.New("message type not carried between nodes")
)

// appendMessage appends one message of a batch to b.
func appendMessage(b []byte, g multiraft.GroupID, m *pb.Message) ([]byte, error) {
	size := m.Size()
	b = binary.AppendUvarint(b, uint64(g))
	return appendEncoded(binary.AppendUvarint(b, uint64(size)), m, size)
}

// appendEncoded appends m's protobuf encoding, size bytes (m.Size()), to b
// (raftpb's generated code, which skips the fields it does not know when
// it decodes).
func appendEncoded(b []byte, m *pb.Message, size int) ([]byte, error) {
	b = slices.Grow(b, size)
	if _, err := m.MarshalToSizedBuffer(b[len(b) : len(b)+size]); err != nil {
		return nil, err
	}
	return b[:len(b)+size], nil
}

// decodeBatch appends to out the messages of batch b for node to. It
// refuses the whole batch, appending nothing, when any part of it is
// malformed or not acceptable from the network (checkMessage).
func decodeBatch(b []byte, to uint64, out []multiraft.Message) ([]multiraft.Message, error) {
	if len(b) == 0 || b[0] != batchV1 {
		return out, errVersion
	}
	start := len(out)
	for rest := b[1:]; len(rest) > 0; {
		g, k := binary.Uvarint(rest)
		if k <= 0 {
			return out[:start], fmt.Errorf("group: %w", errTruncated)
		}
		if g > math.MaxUint16 {
			return out[:start], errGroupRange
		}
		rest = rest[k:]
		size, k := binary.Uvarint(rest)
		if k <= 0 || size > uint64(len(rest)-k) {
			return out[:start], fmt.Errorf("message length: %w", errTruncated)
		}
		rest = rest[k:]
		out = append(out, multiraft.Message{Group: multiraft.GroupID(g)})
		m := &out[len(out)-1].Msg
		if err := m.Unmarshal(rest[:size]); err != nil {
			return out[:start], fmt.Errorf("message: %w", err)
		}
		rest = rest[size:]
		if err := checkMessage(m, to); err != nil {
			return out[:start], err
		}
	}
	return out, nil
}

// checkMessage refuses what no member sends to node to: a message for
// another node, a type raft does not define (raft indexes tables by it),
// one of raft's local messages (a node's messages to itself), a proposal
// (kitd's groups never forward them) and a snapshot outside a snapshot
// stream.
func checkMessage(m *pb.Message, to uint64) error {
	if m.To != to {
		return errNotForMe
	}
	switch t := m.Type; {
	case !knownType(t), raft.IsLocalMsg(t), t == pb.MsgProp, t == pb.MsgSnap:
		return fmt.Errorf("%w: %v", errType, t)
	}
	return nil
}

// knownType reports whether raft defines message type t. Protobuf keeps
// an enum's unknown values, negative ones too.
func knownType(t pb.MessageType) bool {
	_, ok := pb.MessageType_name[int32(t)]
	return ok
}

// appendSnapshotHeader appends the header of m's snapshot stream to b.
func appendSnapshotHeader(b []byte, m multiraft.Message) ([]byte, error) {
	b = append(b, snapshotV1)
	b = binary.AppendUvarint(b, uint64(m.Group))
	return appendEncoded(b, &m.Msg, m.Msg.Size())
}

// decodeSnapshotHeader decodes the header of a snapshot stream for node to.
func decodeSnapshotHeader(b []byte, to uint64) (multiraft.Message, error) {
	if len(b) == 0 || b[0] != snapshotV1 {
		return multiraft.Message{}, errVersion
	}
	g, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return multiraft.Message{}, fmt.Errorf("group: %w", errTruncated)
	}
	if g > math.MaxUint16 {
		return multiraft.Message{}, errGroupRange
	}
	var m pb.Message
	if err := m.Unmarshal(b[1+k:]); err != nil {
		return multiraft.Message{}, fmt.Errorf("message: %w", err)
	}
	if m.To != to {
		return multiraft.Message{}, errNotForMe
	}
	if m.Type != pb.MsgSnap || m.Snapshot == nil {
		return multiraft.Message{}, fmt.Errorf("%w: %v in a snapshot stream", errType, m.Type)
	}
	return multiraft.Message{Group: multiraft.GroupID(g), Msg: m}, nil
}
