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

// The newest configuration entry of the log is followed as entries are
// appended, also when they replace the tail that held it.
func TestTheNewestConfigurationEntryIsFollowed(t *testing.T) {
	normal := func(i uint64) pb.Entry { return pb.Entry{Index: i, Term: 1} }
	conf := func(i uint64) pb.Entry { return pb.Entry{Index: i, Term: 1, Type: pb.EntryConfChangeV2} }
	for _, tc := range []struct {
		name      string
		snapIndex uint64
		log       []pb.Entry
		confIndex uint64
		appended  []pb.Entry
		want      uint64
		told      bool // a follower told of the old one still counts as told
	}{
		{"a configuration entry appended is the newest", 0, []pb.Entry{normal(1), normal(2)}, 0,
			[]pb.Entry{conf(3), normal(4)}, 3, false},
		{"normal entries leave it as it was", 0, []pb.Entry{normal(1), conf(2)}, 2,
			[]pb.Entry{normal(3)}, 2, true},
		{"a tail replaced over it leaves the newest before it", 0, []pb.Entry{conf(1), normal(2), conf(3)}, 3,
			[]pb.Entry{normal(3), normal(4)}, 1, false},
		{"a tail replaced over it with one of its own", 0, []pb.Entry{conf(1), normal(2), conf(3)}, 3,
			[]pb.Entry{normal(2), conf(3), normal(4)}, 3, false},
		{"none left in the log: the compaction mark", 5, []pb.Entry{conf(6)}, 6,
			[]pb.Entry{normal(6)}, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLogStore()
			s.snapIndex, s.ents = tc.snapIndex, append([]pb.Entry(nil), tc.log...)
			g := &group{log: s, confIndex: tc.confIndex, confTold: map[uint64]bool{2: true}}
			s.append(tc.appended)
			g.noteConfEntries(tc.appended)
			if g.confIndex != tc.want || g.confTold[2] != tc.told {
				t.Errorf("newest configuration entry %d, follower told %v; want %d, %v", g.confIndex, g.confTold[2], tc.want, tc.told)
			}
		})
	}
}
