package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft/multirafttest"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// heldCommits is a node's Committer that can hold one commit until the
// test lets it go, or fail it: what a slow or lost raft round looks like
// to the delivery actor. It commits through the node's groups when the
// suite runs replicated, and straight to the store otherwise, so that a
// node alone takes the path a cluster takes.
type heldCommits struct {
	inner actors.Committer

	mu      sync.Mutex
	commits int
	hold    bool          // the next commit is held
	held    chan struct{} // closed once it is
	release chan error    // what the held commit returns (nil: it goes on)
}

// holdCommits puts a heldCommits in front of n's commits. It must run
// before n's actors commit anything.
func holdCommits(t *testing.T, n *testNode) *heldCommits {
	h := &heldCommits{inner: n.env.Commits, release: make(chan error, 1)}
	if h.inner == nil {
		h.inner = storeCommits{n.store}
	}
	n.env.Commits = h
	t.Cleanup(func() {
		select {
		case h.release <- nil: // nothing stays held past the test
		default:
		}
	})
	return h
}

// holdNext holds the next commit; held is closed when it arrives.
func (h *heldCommits) holdNext() (held <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.held = true, make(chan struct{})
	return h.held
}

func (h *heldCommits) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commits
}

func (h *heldCommits) Commit(repr []byte) error {
	h.mu.Lock()
	h.commits++
	hold := h.hold
	if hold {
		h.hold = false
		close(h.held)
	}
	h.mu.Unlock()
	if hold {
		if err := <-h.release; err != nil {
			return err
		}
	}
	return h.inner.Commit(repr)
}

// storeCommits commits a batch's writes to the store, synced.
type storeCommits struct{ store *persistence.Store }

func (s storeCommits) Commit(repr []byte) error {
	b := s.store.NewBatch()
	defer b.Close()
	if err := b.AddRepr(repr); err != nil {
		return err
	}
	return b.Commit()
}

// takeAsync takes an installation's events in a goroutine of its own.
func takeAsync(n *testNode, inst string) <-chan takeResult {
	out := make(chan takeResult, 1)
	go func() {
		r, err := try[*kitpb.DeliveriesReply](n, actors.KindDelivery, inst, &kitpb.TakeDeliveries{Max: 100})
		out <- takeResult{r, err}
	}()
	return out
}

// inFlightIs waits until n's delivery actor of inst has want events in
// flight: a take of none answers with the count and hands out nothing.
func inFlightIs(t *testing.T, n *testNode, inst string, want int32) {
	t.Helper()
	var got int32
	eventually.NoError(t, "events in flight", func() error {
		r, err := try[*kitpb.DeliveriesReply](n, actors.KindDelivery, inst, &kitpb.TakeDeliveries{Max: 0})
		if err != nil {
			return err
		}
		if got = r.InFlight; got != want {
			return fmt.Errorf("%d events in flight, want %d", got, want)
		}
		return nil
	})
}

type takeResult struct {
	r   *kitpb.DeliveriesReply
	err error
}

// waitFor returns what ch gives, or fails the test past a deadline.
func waitFor[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventually.Within):
		t.Fatalf("not within %v: %s", eventually.Within, what)
		panic("unreachable")
	}
}

// Through the raft groups (docs/deliveries.md, "Commits through the
// groups"), a take's reply waits for the commit that makes its sequences
// durable, the actor does not: it goes on with notices and requests, and
// every take the commit in flight does not cover shares the next one.
func TestTakesWaitForTheirCommitAndTheActorGoesOn(t *testing.T) {
	n := ownNode(t)
	n.env.DeliveryFlushAfter = time.Hour // no commit but the takes'
	commits := holdCommits(t, n)
	f, cs := deliveryFixture(t, n, 4)
	queued(t, n, f.inst.Id) // the delivery actor is active: only notices reach it
	n.post(t, f.user, cs[0], postReq{text: "first"})
	metricIs(t, n, 1, "kitd_delivery_backlog_events")

	held := commits.holdNext()
	first := takeAsync(n, f.inst.Id)
	waitFor(t, "the first take's commit", held)

	answered := make(chan error, 1)
	go func() {
		_, err := try[*kitpb.Ok](n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: 1 << 40, Delivered: true})
		answered <- err
	}()
	noErr(t, waitFor(t, "a request answered while a commit is in flight", answered))
	for _, c := range cs[1:] {
		n.post(t, f.user, c, postReq{text: c})
	}
	metricIs(t, n, 4, "kitd_delivery_backlog_events") // notices taken meanwhile
	rest := takeAsync(n, f.inst.Id)
	inFlightIs(t, n, f.inst.Id, 4) // handed out, the replies held
	select {
	case <-first:
		t.Fatal("a take's reply left before the commit of its sequences")
	case <-rest:
		t.Fatal("a take's reply left before the commit of its sequences")
	default:
	}
	before := commits.count()
	commits.release <- nil

	r1, r2 := waitFor(t, "the first take", first), waitFor(t, "the second take", rest)
	noErr(t, r1.err)
	noErr(t, r2.err)
	if got := eventTexts(r1.r.Events); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("the first take handed out %q, want the first post's event", got)
	}
	if got := len(r2.r.Events); got != 3 {
		t.Fatalf("the second take handed out %d events, want the 3 posted during the commit", got)
	}
	if got := commits.count() - before; got != 1 {
		t.Fatalf("the takes behind the commit in flight made %d commits, want 1 for all of them", got)
	}
}

// A commit through the groups that fails (a leader change, no quorum) is
// not a failed disk: the node goes on. The replies waiting for it, and
// for the commit after it, fail; the actor starts again from the store,
// which takes the same events again, with no gap in their sequences.
func TestAFailedCommitStartsTheActorAgainFromTheStore(t *testing.T) {
	n := ownNode(t)
	n.env.DeliveryFlushAfter = time.Hour
	commits := holdCommits(t, n)
	f, cs := deliveryFixture(t, n, 2)
	queued(t, n, f.inst.Id)
	n.post(t, f.user, cs[0], postReq{text: "a"})
	metricIs(t, n, 1, "kitd_delivery_backlog_events")

	held := commits.holdNext()
	first := takeAsync(n, f.inst.Id)
	waitFor(t, "the first take's commit", held)
	n.post(t, f.user, cs[1], postReq{text: "b"})
	metricIs(t, n, 2, "kitd_delivery_backlog_events")
	next := takeAsync(n, f.inst.Id)
	inFlightIs(t, n, f.inst.Id, 2)
	lost := errors.New("lost the leadership")
	commits.release <- lost

	for _, r := range []takeResult{waitFor(t, "the first take", first), waitFor(t, "the second take", next)} {
		if r.err == nil {
			t.Fatalf("a take waiting for a failed commit handed out %q", eventTexts(r.r.Events))
		}
	}
	var got *kitpb.DeliveriesReply
	eventually.NoError(t, "a take after the actor started again", func() (err error) {
		got, err = try[*kitpb.DeliveriesReply](n, actors.KindDelivery, f.inst.Id, &kitpb.TakeDeliveries{Max: 100})
		if err == nil && len(got.Events) != 2 {
			err = errors.New("not every event taken again")
		}
		return err
	})
	var seqs []uint64
	var texts []string
	for _, ev := range got.Events {
		seqs, texts = append(seqs, ev.Sequence), append(texts, ev.Message.GetText())
	}
	slices.Sort(seqs)
	slices.Sort(texts)
	// The two conversations' events may change places: order is kept
	// within a conversation.
	if !slices.Equal(seqs, []uint64{1, 2}) || !slices.Equal(texts, []string{"a", "b"}) {
		t.Fatalf("taken again as %v under sequences %v, want a and b under 1 and 2", texts, seqs)
	}
}

// On a node alone a take's reply waits for the WAL sync that makes its
// sequences durable, in the background as through the groups: the actor
// answers meanwhile.
func TestATakeWaitsForItsWALSyncAndTheActorGoesOn(t *testing.T) {
	if replicated {
		t.Skip("a node alone's commits: without KITD_TEST_REPLICATED")
	}
	if testing.Short() {
		t.Skip("starts a node")
	}
	fs := &multirafttest.SyncCountingFS{FS: vfs.NewMem()}
	n, err := startNode(fs, nil)
	noErr(t, err)
	t.Cleanup(func() { _ = n.stop() })
	n.env.DeliveryFlushAfter = time.Hour // no commit but the take's
	f, _ := deliveryFixture(t, n, 1)
	queued(t, n, f.inst.Id)
	n.post(t, f.user, f.conv, postReq{text: "a"})
	metricIs(t, n, 1, "kitd_delivery_backlog_events")

	fs.Block()
	t.Cleanup(fs.Unblock) // before the node stops
	first := takeAsync(n, f.inst.Id)
	eventually.True(t, "the take's WAL sync waits", func() bool { return fs.Waiting() > 0 })
	answered := make(chan error, 1)
	go func() {
		_, err := try[*kitpb.Ok](n, actors.KindDelivery, f.inst.Id, &kitpb.RecordAttempt{Sequence: 1 << 40, Delivered: true})
		answered <- err
	}()
	noErr(t, waitFor(t, "a request answered while a WAL sync is in flight", answered))
	select {
	case <-first:
		t.Fatal("a take's reply left before the WAL sync of its sequence")
	default:
	}
	fs.Unblock()
	r := waitFor(t, "the take", first)
	noErr(t, r.err)
	if got := eventTexts(r.r.Events); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the take handed out %q, want the post's event", got)
	}
}
