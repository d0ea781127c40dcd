package raftnet

import (
	"encoding/binary"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/multiraft"
)

func msg(typ pb.MessageType, from, to uint64) pb.Message {
	return pb.Message{Type: typ, From: from, To: to, Term: 3}
}

// sameMessage reports whether a and b encode alike.
func sameMessage(t testing.TB, a, b pb.Message) bool {
	t.Helper()
	ea, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(ea) == string(eb)
}

func appendMsg(from, to uint64, data ...string) pb.Message {
	m := msg(pb.MsgApp, from, to)
	m.Index, m.LogTerm, m.Commit = 7, 2, 6
	for i, d := range data {
		m.Entries = append(m.Entries, pb.Entry{Term: 3, Index: uint64(8 + i), Data: []byte(d)})
	}
	return m
}

func batch(t testing.TB, msgs ...multiraft.Message) []byte {
	t.Helper()
	b := []byte{batchV1}
	for _, m := range msgs {
		var err error
		if b, err = appendMessage(b, m.Group, &m.Msg); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestBatchRoundTrip: every message of a batch arrives with its group,
// equal to what was sent.
func TestBatchRoundTrip(t *testing.T) {
	sent := []multiraft.Message{
		{Group: 0, Msg: appendMsg(1, 2, "a", "bb")},
		{Group: 63, Msg: msg(pb.MsgHeartbeat, 1, 2)},
		{Group: 65535, Msg: msg(pb.MsgVote, 3, 2)},
	}
	got, err := decodeBatch(batch(t, sent...), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sent) {
		t.Fatalf("%d messages, want %d", len(got), len(sent))
	}
	for i := range sent {
		if got[i].Group != sent[i].Group || !sameMessage(t, got[i].Msg, sent[i].Msg) {
			t.Fatalf("message %d: got %v %v, want %v %v", i, got[i].Group, got[i].Msg, sent[i].Group, sent[i].Msg)
		}
	}
	// An empty batch (a version byte alone) is well-formed and holds nothing.
	if got, err := decodeBatch([]byte{batchV1}, 2, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v, %v", got, err)
	}
}

// TestDecodeBatchRefuses: one row per rule of what a batch must not hold.
// The whole batch is refused: nothing of it is delivered.
func TestDecodeBatchRefuses(t *testing.T) {
	good := batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgHeartbeat, 1, 2)})
	hb := msg(pb.MsgHeartbeat, 1, 2)
	encoded, _ := hb.Marshal()
	withGroup := func(g uint64) []byte {
		b := binary.AppendUvarint([]byte{batchV1}, g)
		b = binary.AppendUvarint(b, uint64(len(encoded)))
		return append(b, encoded...)
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error // nil: any error
	}{
		{"an empty payload", nil, errVersion},
		{"an unknown version", append([]byte{0x02}, good[1:]...), errVersion},
		{"a snapshot header's version", append([]byte{snapshotV1}, good[1:]...), errVersion},
		{"a truncated group id", []byte{batchV1, 0x80}, errTruncated},
		{"a group id out of range", withGroup(1 << 16), errGroupRange},
		{"a length past the end", good[:len(good)-1], errTruncated},
		{"a truncated length", []byte{batchV1, 0x01, 0x80}, errTruncated},
		{"a message that does not decode", []byte{batchV1, 0x01, 0x02, 0xff, 0xff}, nil},
		{"a message for another node", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgHeartbeat, 1, 3)}), errNotForMe},
		{"a message without a destination", batch(t, multiraft.Message{Group: 1, Msg: pb.Message{Type: pb.MsgApp}}), errNotForMe},
		{"a negative message type", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MessageType(-2090414693), 1, 2)}), errType},
		{"a message type raft does not define", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MessageType(1000), 1, 2)}), errType},
		{"a local message (MsgHup)", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgHup, 1, 2)}), errType},
		{"a local message (MsgStorageAppend)", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgStorageAppend, 1, 2)}), errType},
		{"a proposal (forwarding is off)", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgProp, 1, 2)}), errType},
		{"a snapshot outside a stream", batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgSnap, 1, 2)}), errType},
		{"one bad message among good ones", append(append([]byte(nil), good...), batch(t, multiraft.Message{Group: 1, Msg: msg(pb.MsgHeartbeat, 1, 9)})[1:]...), errNotForMe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prior := []multiraft.Message{{Group: 5}}
			out, err := decodeBatch(tc.batch, 2, prior)
			if err == nil {
				t.Fatalf("accepted: %v", out)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if len(out) != len(prior) {
				t.Fatalf("a refused batch delivered %d messages", len(out)-len(prior))
			}
		})
	}
}

// TestDecodeSnapshotHeader: a stream's header names a MsgSnap for this
// node, or the stream is refused.
func TestDecodeSnapshotHeader(t *testing.T) {
	snap := msg(pb.MsgSnap, 1, 2)
	snap.Snapshot = &pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 40, Term: 3}}
	header := func(g multiraft.GroupID, m pb.Message) []byte {
		b, err := appendSnapshotHeader(nil, multiraft.Message{Group: g, Msg: m})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	m, err := decodeSnapshotHeader(header(9, snap), 2)
	if err != nil || m.Group != 9 || !sameMessage(t, m.Msg, snap) {
		t.Fatalf("round trip: %v %v", m, err)
	}
	toOther := snap
	toOther.To = 3
	for _, tc := range []struct {
		name   string
		header []byte
		want   error
	}{
		{"an empty header", nil, errVersion},
		{"a batch's version", append([]byte{batchV1}, header(9, snap)[1:]...), errVersion},
		{"a truncated group id", []byte{snapshotV1, 0x80}, errTruncated},
		{"a group id out of range", append(binary.AppendUvarint([]byte{snapshotV1}, 1<<16), header(9, snap)[2:]...), errGroupRange},
		{"a message that does not decode", []byte{snapshotV1, 0x09, 0xff}, nil},
		{"a snapshot for another node", header(9, toOther), errNotForMe},
		{"not a snapshot", header(9, msg(pb.MsgApp, 1, 2)), errType},
		{"a snapshot message without its snapshot", header(9, msg(pb.MsgSnap, 1, 2)), errType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeSnapshotHeader(tc.header, 2)
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzDecodeBatch: the decoder never panics, and what it accepts is only
// messages for this node that encode and decode back to themselves. The
// seed corpus (testdata/fuzz/FuzzDecodeBatch) holds a valid batch of each
// common message type and the refused shapes of TestDecodeBatchRefuses.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batch(f, multiraft.Message{Group: 3, Msg: appendMsg(1, 2, "x")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeBatch(data, 2, nil)
		if err != nil {
			if len(got) != 0 {
				t.Fatalf("a refused batch delivered %d messages", len(got))
			}
			return
		}
		again, err := decodeBatch(batch(t, got...), 2, nil)
		if err != nil {
			t.Fatalf("an accepted batch does not decode again: %v", err)
		}
		if len(again) != len(got) {
			t.Fatalf("%d messages, then %d", len(got), len(again))
		}
		for i := range got {
			if got[i].Msg.To != 2 {
				t.Fatalf("accepted a message to %d", got[i].Msg.To)
			}
			if again[i].Group != got[i].Group || !sameMessage(t, again[i].Msg, got[i].Msg) {
				t.Fatalf("message %d changed in a round trip", i)
			}
		}
	})
}
