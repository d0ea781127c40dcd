package multiraft

import (
	"reflect"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func ents(from uint64, n int) []pb.Entry {
	es := make([]pb.Entry, n)
	for i := range es {
		es[i] = pb.Entry{Term: 2, Index: from + uint64(i), Data: []byte("0123456789")}
	}
	return es
}

func app(to, index uint64, es []pb.Entry, commit uint64) pb.Message {
	return pb.Message{Type: pb.MsgApp, To: to, Term: 2, Index: index, LogTerm: 2, Entries: es, Commit: commit}
}

func answer(to, index uint64) pb.Message {
	return pb.Message{Type: pb.MsgAppResp, To: to, Term: 2, Index: index}
}

// Within a cycle, what a group says twice to one node is said once.
func TestCoalesce(t *testing.T) {
	rejected := answer(1, 4)
	rejected.Reject, rejected.RejectHint = true, 4
	newerTerm := app(2, 11, ents(12, 1), 10)
	newerTerm.Term = 3
	heartbeat := pb.Message{Type: pb.MsgHeartbeat, To: 2, Term: 2, Commit: 10}

	for _, tc := range []struct {
		name string
		in   []pb.Message
		want []pb.Message
	}{
		{"appends that follow each other in the log become one, with the later commit index",
			[]pb.Message{app(2, 10, ents(11, 1), 9), heartbeat, app(2, 11, ents(12, 2), 10)},
			[]pb.Message{app(2, 10, ents(11, 3), 10), heartbeat}},
		{"appends to two followers stay apart",
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(3, 10, ents(11, 1), 9)},
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(3, 10, ents(11, 1), 9)}},
		{"appends with a gap between them stay apart",
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(2, 12, ents(13, 1), 9)},
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(2, 12, ents(13, 1), 9)}},
		{"appends of two terms stay apart",
			[]pb.Message{app(2, 10, ents(11, 1), 9), newerTerm},
			[]pb.Message{app(2, 10, ents(11, 1), 9), newerTerm}},
		{"an empty append is not merged",
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(2, 11, nil, 11)},
			[]pb.Message{app(2, 10, ents(11, 1), 9), app(2, 11, nil, 11)}},
		{"appends past the size bound stay apart",
			[]pb.Message{app(2, 10, ents(11, 3), 9), app(2, 13, ents(14, 3), 9)},
			[]pb.Message{app(2, 10, ents(11, 3), 9), app(2, 13, ents(14, 3), 9)}},
		{"of the answers to one leader, the highest index stays",
			[]pb.Message{answer(1, 5), answer(1, 7), answer(1, 6)},
			[]pb.Message{answer(1, 7)}},
		{"answers to two leaders stay apart",
			[]pb.Message{answer(1, 5), answer(3, 7)},
			[]pb.Message{answer(1, 5), answer(3, 7)}},
		{"a rejection stays",
			[]pb.Message{answer(1, 5), rejected, answer(1, 6)},
			[]pb.Message{answer(1, 6), rejected}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := coalesce(tc.in, 50); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The entries raft hands over may share an array with its log: a merge
// writes a new one.
func TestCoalesceLeavesRaftsEntriesAlone(t *testing.T) {
	log := ents(11, 3)
	first := app(2, 10, log[:1:3], 9)
	coalesce([]pb.Message{first, app(2, 11, ents(12, 1), 9)}, 1<<20)
	if !reflect.DeepEqual(log, ents(11, 3)) {
		t.Fatalf("raft's entries changed: %+v", log)
	}
}
