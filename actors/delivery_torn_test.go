package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// tornCommits is a node's Committer that can die in the middle of a
// commit: once torn, it applies the commit's writes to every partition but
// one and none of that one's, and then commits nothing more. It is what a
// kill -9 can leave of a batch that spans partitions on a cluster, where
// replica.Log proposes each partition's part to its own group: the parts
// that other nodes lead go first, the actor's own partition last.
type tornCommits struct {
	inner actors.Committer
	store *persistence.Store

	mu   sync.Mutex
	lost *partition.ID // armed: the partition whose part the next commit loses
	torn chan struct{} // closed once a commit was torn
	dead bool
}

// tearCommits puts a tornCommits in front of n's commits. It must run
// before n's actors commit anything.
func tearCommits(n *testNode) *tornCommits {
	c := &tornCommits{inner: n.env.Commits, store: n.store, torn: make(chan struct{})}
	if c.inner == nil {
		c.inner = storeCommits{n.store}
	}
	n.env.Commits = c
	return c
}

// tearNext has the next commit lose its part of partition p; torn is
// closed once it has.
func (c *tornCommits) tearNext(p partition.ID) (torn <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost = &p
	return c.torn
}

var errNodeKilled = errors.New("the node was killed in the middle of a commit")

func (c *tornCommits) Commit(repr []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
		return errNodeKilled
	case c.lost == nil:
		return c.inner.Commit(repr)
	}
	kept := c.store.NewBatch()
	defer kept.Close()
	err := persistence.Ops(repr, func(op persistence.Op) error {
		if p, ok := partition.OfKey(op.Key); !ok || p != *c.lost {
			kept.Add(op)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !kept.Empty() {
		if err := c.inner.Commit(kept.Repr()); err != nil {
			return err
		}
	}
	c.dead, c.lost = true, nil
	close(c.torn)
	return errNodeKilled
}

// A node killed between the parts of a delivery actor's commit loses no
// event: whatever part of it the survivors hold, every event is still
// queued, or delivered, or dead, once the installation's partition is
// led again (docs/deliveries.md, "A write that spans partitions").
func TestAKillBetweenACommitsPartitionsLosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes per row")
	}
	type state struct {
		n    *testNode
		f    *eventsFixture
		conv string // a conversation outside the installation's partition
	}
	post := func(t *testing.T, s *state, text string) {
		s.n.post(t, s.f.user, s.conv, postReq{text: text})
	}
	takeOne := func(t *testing.T, s *state, text string) *kitpb.Event {
		t.Helper()
		evs := take(t, s.n, s.f.inst.Id).Events
		if len(evs) != 1 || evs[0].Message.GetText() != text {
			t.Fatalf("took %q, want %s", eventTexts(evs), text)
		}
		return evs[0]
	}
	failed := func(t *testing.T, s *state, text string) *kitpb.Event {
		t.Helper()
		ev := takeOne(t, s, text)
		record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		queued(t, s.n, s.f.inst.Id) // flushes the outcome
		return ev
	}
	for _, tc := range []struct {
		name string
		// torn does what ends in the torn commit, armed by tear.
		torn func(t *testing.T, s *state, tear func())
		want []string // queued after the restart, in order
		// then, when set, runs after the restart, before the rest goes.
		then func(t *testing.T, s *state)
	}{
		{"an attempt's failure", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		}, []string{"a1"}, nil},
		{"a delivery after a failure", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			failed(t, s, "a1")
			s.n.clk.Advance(actors.FirstRetryAfter * 2)
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, true)
		}, []string{"a1"}, nil},
		{"a dead letter", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			failed(t, s, "a1")
			s.n.clk.Advance(actors.DeadAfter)
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		}, []string{"a1"}, nil},
		{"a redelivery of an event waiting behind another", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			post(t, s, "a2")
			takeOne(t, s, "a1")
			var a2 *kitpb.Event
			for _, ev := range queued(t, s.n, s.f.inst.Id) {
				if ev.Message.GetText() == "a2" {
					a2 = ev
				}
			}
			tear()
			_, _ = try[*kitpb.RedeliverReply](s.n, actors.KindDelivery, s.f.inst.Id, &kitpb.Redeliver{EventId: a2.Id})
		}, []string{"a1", "a2"}, nil},
		{"a redelivery of a delivered event", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			ev := takeOne(t, s, "a1")
			record(t, s.n, s.f.inst.Id, ev.Sequence, true)
			queued(t, s.n, s.f.inst.Id)
			tear()
			_, _ = try[*kitpb.RedeliverReply](s.n, actors.KindDelivery, s.f.inst.Id, &kitpb.Redeliver{EventId: ev.Id})
		}, nil, func(t *testing.T, s *state) {
			// Not answered, so not done; but done when asked again.
			ev := listDeliveries(t, s.n, s.f.inst.Id, 0, 10).Deliveries[0].Event
			redeliver(t, s.n, s.f.inst.Id, &kitpb.Redeliver{EventId: ev.Id})
			if q := queued(t, s.n, s.f.inst.Id); !slices.Equal(eventTexts(q), []string{"a1"}) {
				t.Fatalf("queued %q after the redelivery, want a1", eventTexts(q))
			}
		}},
		{"a pruning of delivered records", func(t *testing.T, s *state, tear func()) {
			const total = actors.KeepDelivered + 101 // the last delivery prunes
			for i := range total {
				post(t, s, fmt.Sprint(i))
				ev := takeOne(t, s, fmt.Sprint(i))
				if i == total-1 {
					tear()
				}
				record(t, s.n, s.f.inst.Id, ev.Sequence, true)
			}
		}, []string{fmt.Sprint(actors.KeepDelivered + 100)}, func(t *testing.T, s *state) {
			// The pruned records whose entries went are gone too: every page
			// of the list reads.
			succeeded := 0
			for before := uint64(0); ; {
				p := listDeliveries(t, s.n, s.f.inst.Id, before, 100)
				for _, d := range p.Deliveries {
					if d.State == actors.DeliverySucceeded {
						succeeded++
					}
					before = d.Event.Sequence
				}
				if !p.More {
					break
				}
			}
			if succeeded != actors.KeepDelivered-1 {
				t.Fatalf("listed %d deliveries that succeeded, want the %d that the pruning kept", succeeded, actors.KeepDelivered-1)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			n, err := startNode(fs, nil)
			noErr(t, err)
			commits := tearCommits(n)
			f, _ := deliveryFixture(t, n, 1)
			s := &state{n: n, f: f, conv: f.conv}
			home := partition.Of(f.inst.Id)
			for partition.Of(s.conv) == home {
				s.conv = n.channel(t, f.ws.id, f.ws.users...)
				n.addChannel(t, f.inst.Id, s.conv)
			}
			var torn <-chan struct{}
			tc.torn(t, s, func() { torn = commits.tearNext(home) })
			waitFor(t, "the torn commit", torn)
			noErr(t, n.stop())

			n, err = startNode(fs, n.clk)
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			s.n = n
			q := queued(t, n, f.inst.Id)
			if got := eventTexts(q); !slices.Equal(got, tc.want) {
				t.Fatalf("queued %q after the restart, want %q", got, tc.want)
			}
			if tc.then != nil {
				tc.then(t, s)
				q = queued(t, n, f.inst.Id)
			}
			// What is queued goes, each once.
			n.clk.Advance(actors.MaxRetryWait * 2)
			sent := map[string]int{}
			for range len(q) + 1 {
				for _, ev := range take(t, n, f.inst.Id).Events {
					sent[ev.Message.GetText()]++
					record(t, n, f.inst.Id, ev.Sequence, true)
				}
			}
			for _, ev := range q {
				if text := ev.Message.GetText(); sent[text] != 1 {
					t.Fatalf("after the restart sent %v, want each of %q once", sent, eventTexts(q))
				}
			}
			if q := queued(t, n, f.inst.Id); len(q) != 0 {
				t.Fatalf("%q still queued after every event was delivered", eventTexts(q))
			}
		})
	}
}
