package raftnet_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/cluster/raftnet"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/loglimit"
	"github.com/kitd/kitd/multiraft"
)

func snapMsg(to uint64) multiraft.Message {
	return multiraft.Message{Group: 7, Msg: pb.Message{
		Type: pb.MsgSnap, From: 1, To: to, Term: 1,
		Snapshot: &pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 10, Term: 1}},
	}}
}

// TestReceiveRefusesAndCounts: what arrives for this node is handed to its
// node, or refused, dropped or passed to OnUnknownGroup, and counted; one
// row per rule, each over a real connection. Node 2 runs a replication
// node holding no group; node 1 sends.
func TestReceiveRefusesAndCounts(t *testing.T) {
	type unknown struct {
		g    multiraft.GroupID
		from uint64
	}
	for _, tc := range []struct {
		name  string
		hook  bool
		send  func(t *testing.T, snd *endpoint, addr string) error
		want  func(st raftnet.Stats) bool
		heard []unknown // what OnUnknownGroup hears
	}{
		{"an undecodable batch is refused", false,
			func(t *testing.T, snd *endpoint, addr string) error {
				return snd.peer.Send(addr, []byte{0x01, 0x01, 0x02, 0xff, 0xff})
			},
			func(st raftnet.Stats) bool { return st.Refused == 1 && st.Received == 0 }, nil},
		{"a batch of another version is refused", false,
			func(t *testing.T, snd *endpoint, addr string) error { return snd.peer.Send(addr, []byte{0x7f}) },
			func(st raftnet.Stats) bool { return st.Refused == 1 }, nil},
		{"a message for another node is refused", false,
			func(t *testing.T, snd *endpoint, addr string) error {
				snd.dir.Set(9, addr) // node 1 believes node 9 listens there
				snd.net.Send([]multiraft.Message{appendTo(9, 10)})
				return nil
			},
			func(st raftnet.Stats) bool { return st.Refused == 1 && st.UnknownGroup == 0 }, nil},
		{"a message for an unknown group is dropped and counted", false,
			func(t *testing.T, snd *endpoint, addr string) error {
				snd.net.Send([]multiraft.Message{appendTo(2, 10)})
				return nil
			},
			func(st raftnet.Stats) bool { return st.UnknownGroup == 1 && st.Refused == 0 }, nil},
		{"a message for an unknown group goes to OnUnknownGroup", true,
			func(t *testing.T, snd *endpoint, addr string) error {
				snd.net.Send([]multiraft.Message{appendTo(2, 10)})
				return nil
			},
			func(st raftnet.Stats) bool { return st.UnknownGroup == 1 }, []unknown{{1, 1}}},
		{"a snapshot stream with a malformed header is refused", false,
			func(t *testing.T, snd *endpoint, addr string) error {
				w, err := snd.peer.Stream(context.Background(), addr, []byte{0x81, 0x80})
				if err != nil {
					return err
				}
				if err := w.Close(); !errors.Is(err, peer.ErrAborted) {
					t.Errorf("the sender's Close: %v, want an abort", err)
				}
				return nil
			},
			func(st raftnet.Stats) bool { return st.Refused == 1 && st.SnapshotsRefused == 1 }, nil},
		{"a snapshot for an unknown group is refused and goes to OnUnknownGroup", true,
			func(t *testing.T, snd *endpoint, addr string) error {
				if err := snd.net.SendSnapshot(snapMsg(2), strings.NewReader("state")); err == nil {
					t.Error("SendSnapshot of an unknown group returned nil")
				}
				if st := snd.net.Stats(); st.SnapshotsFailed != 1 || st.SnapshotsSent != 0 {
					t.Errorf("sender: %+v", st)
				}
				return nil
			},
			func(st raftnet.Stats) bool { return st.SnapshotsRefused == 1 && st.UnknownGroup == 1 }, []unknown{{7, 1}}},
		{"a snapshot for another node is refused", false,
			func(t *testing.T, snd *endpoint, addr string) error {
				snd.dir.Set(9, addr)
				if err := snd.net.SendSnapshot(snapMsg(9), strings.NewReader("state")); err == nil {
					t.Error("SendSnapshot to the wrong node returned nil")
				}
				return nil
			},
			func(st raftnet.Stats) bool { return st.SnapshotsRefused == 1 && st.Refused == 1 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var heard []unknown
			o := options{}
			if tc.hook {
				o.edit = func(c *raftnet.Config) {
					c.OnUnknownGroup = func(g multiraft.GroupID, from uint64) {
						mu.Lock()
						defer mu.Unlock()
						heard = append(heard, unknown{g, from})
					}
				}
			}
			c := newCluster(t, []uint64{1, 2}, o, nil)
			snd, rcv := c.members[1], c.members[2]
			addr := rcv.peer.Addr()
			if err := tc.send(t, snd.endpoint, addr); err != nil {
				t.Fatal(err)
			}
			eventually.True(t, tc.name, func() bool { return tc.want(rcv.net.Stats()) })
			mu.Lock()
			defer mu.Unlock()
			if len(heard) != len(tc.heard) || (len(heard) > 0 && heard[0] != tc.heard[0]) {
				t.Fatalf("OnUnknownGroup heard %v, want %v", heard, tc.heard)
			}
		})
	}
}

// TestRefusalsLogAtABoundedRate: a peer sending garbage in a loop gets
// every batch refused and counted, but at most loglimit.Burst lines
// written.
func TestRefusalsLogAtABoundedRate(t *testing.T) {
	c := newCluster(t, []uint64{1, 2}, options{}, nil)
	snd, rcv := c.members[1], c.members[2]
	const n = 500
	for range n {
		if err := snd.peer.Send(rcv.peer.Addr(), []byte{0x01, 0x01, 0x09}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, "every batch refused", func() bool { return rcv.net.Stats().Refused == n })
	if lines := strings.Count(rcv.log.String(), "raftnet: batch refused"); lines != loglimit.Burst {
		t.Fatalf("%d lines for %d refusals, want %d", lines, n, loglimit.Burst)
	}
}

// TestBeforeBindAndAttach: a transport not yet bound to its peer transport
// drops what it is asked to send, and one without its node drops what
// arrives; both count it.
func TestBeforeBindAndAttach(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) raftnet.Stats
		want func(raftnet.Stats) bool
	}{
		{"Send before Bind drops", func(t *testing.T) raftnet.Stats {
			tr, err := raftnet.New(raftnet.Config{NodeID: 1, Directory: raftnet.NewStaticDirectory(map[uint64]string{2: "127.0.0.1:1"})})
			if err != nil {
				t.Fatal(err)
			}
			tr.Send([]multiraft.Message{appendTo(2, 10)})
			if err := tr.SendSnapshot(snapMsg(2), strings.NewReader("state")); !errors.Is(err, peer.ErrUnavailable) {
				t.Errorf("SendSnapshot before Bind: %v", err)
			}
			return tr.Stats()
		}, func(st raftnet.Stats) bool { return st.Dropped == 1 && st.Sent == 0 && st.SnapshotsFailed == 1 }},
		{"a batch before Attach is not delivered", func(t *testing.T) raftnet.Stats {
			snd, rcv := newEndpoint(t, 1, options{}), newEndpoint(t, 2, options{})
			snd.dir.Set(2, rcv.peer.Addr())
			connect(t, snd, rcv.peer.Addr())
			snd.net.Send([]multiraft.Message{appendTo(2, 10)})
			eventually.True(t, "the batch", func() bool { return rcv.net.Stats().Undelivered == 1 })
			return rcv.net.Stats()
		}, func(st raftnet.Stats) bool { return st.Undelivered == 1 && st.Received == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st := tc.run(t); !tc.want(st) {
				t.Fatalf("%+v", st)
			}
		})
	}
}
