package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// eventsKit registers and publishes a private Kit that subscribes to
// events, at an endpoint that never answers (.invalid, RFC 6761).
func (w *Workspace) eventsKit(t testing.TB, events []string, scopes ...string) *Kit {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: scopes}
	k.Manifest = manifest(k.Slug, k.Version, scopes)
	k.Manifest["events"] = events
	k.Manifest["endpoints"] = map[string]any{"events": "https://events.kit.invalid/kit"}
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	k.Upload = r
	return k
}

// receivingKit registers and publishes a private Kit that subscribes to
// events at rcv's endpoint, gives it a signing secret, and returns both.
func (w *Workspace) receivingKit(t testing.TB, rcv *receiver, events []string, scopes ...string) (*Kit, string) {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: scopes}
	k.Manifest = manifest(k.Slug, k.Version, scopes)
	k.Manifest["events"] = events
	k.Manifest["endpoints"] = map[string]any{"events": rcv.srv.URL + "/events"}
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID, k.Upload = r.Str("kitId"), r
	r = w.S.ops(t, "POST", "/ops/v1/kits/"+k.ID+"/signing-secret", nil)
	want(t, r, 201)
	return k, r.Str("signingSecret")
}

// storedEvents reads a stopped server's data directory: the events queued
// for inst in sequence order (its queue records, and the events of its
// taken records that are references still: without a queue record of
// their own and with their outbox entry, merged with it, as the delivery
// actor reads them), and the outbox entries no queued event refers to or
// was copied from, still to be taken.
func storedEvents(t *testing.T, dir, inst string) (queued []*kitpb.Event, inOutbox []*kitpb.Event) {
	t.Helper()
	store, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	type entry struct {
		source string
		rec    []byte
		taken  bool
	}
	outbox := map[uint64][]*entry{}   // by position
	own := map[uint64][]byte{}        // queue records, by sequence
	refs := map[uint64]*kitpb.Event{} // references of taken records, by sequence
	err = store.Scan(nil, nil, false, func(k, v []byte) bool {
		kind := actors.KeyKind(k)
		if kind == "outboxKey" {
			if entryInst, source, pos := actors.OutboxEntry(k); entryInst == inst {
				outbox[pos] = append(outbox[pos], &entry{source: source, rec: bytes.Clone(v)})
			}
			return true
		}
		if !strings.Contains(string(k), "/"+inst+"/") {
			return true
		}
		switch kind {
		case "queuedEventKey":
			own[binary.BigEndian.Uint64(k[len(k)-8:])] = bytes.Clone(v)
		case "takenEventsKey":
			first, sources, positions, err := actors.TakenEvents(k, v)
			if err != nil {
				t.Fatal(err)
			}
			for i := range sources {
				seq := first + uint64(i)
				refs[seq] = &kitpb.Event{Sequence: seq, OutboxSource: sources[i], OutboxPos: positions[i]}
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	decode := func(rec []byte) *kitpb.Event {
		ev := &kitpb.Event{}
		if err := proto.Unmarshal(rec, ev); err != nil {
			t.Fatalf("decode event: %v", err)
		}
		return ev
	}
	entryOf := func(ref *kitpb.Event) *entry {
		for _, e := range outbox[ref.OutboxPos] {
			if e.source == ref.OutboxSource {
				return e
			}
		}
		return nil
	}
	recs := map[uint64][]byte{} // the queue by sequence: own records, else references
	for seq, ref := range refs {
		if _, ok := own[seq]; !ok && entryOf(ref) != nil {
			rec, err := proto.Marshal(ref)
			if err != nil {
				t.Fatal(err)
			}
			recs[seq] = rec
		}
	}
	for seq, rec := range own {
		recs[seq] = rec
	}
	for _, seq := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[seq]
		ev := decode(rec)
		if ev.OutboxSource != "" {
			found := entryOf(ev)
			if found == nil || found.taken {
				t.Fatalf("queued event %d refers to outbox entry %s/%d, which is missing or taken twice", ev.Sequence, ev.OutboxSource, ev.OutboxPos)
			}
			found.taken = true
			ev = decode(append(slices.Clone(found.rec), rec...))
		} else if ev.CopiedFromPos != 0 {
			// A copy keeps the entry it came from until it leaves the queue.
			if found := entryOf(&kitpb.Event{OutboxSource: ev.ConversationId, OutboxPos: ev.CopiedFromPos}); found != nil {
				found.taken = true
			}
		}
		queued = append(queued, ev)
	}
	for _, es := range outbox {
		for _, e := range es {
			if !e.taken {
				inOutbox = append(inOutbox, decode(e.rec))
			}
		}
	}
	return queued, inOutbox
}

// docs/deliveries.md "Outbox and sequencer": an event is recorded in the same synced
// batch as the write that caused it, so kill -9 at any moment loses none,
// and there is none for a write the restarted node does not hold. Posters
// write into 4 conversations with a subscribed installation until SIGKILL;
// after a restart (which sequences what the outbox held) and a clean stop,
// the data directory holds exactly one message.posted per stored message,
// with sequences 1..n and each conversation's events in its order.
func TestEventsSurviveKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off"}
	s := startServerOpts(t, opts)
	w := newWorkspace(t, s)
	k := w.eventsKit(t, []string{"message.posted"}, baseScopes...)
	var convs []string
	for range 4 {
		convs = append(convs, w.channel(t, "public", w.Owner.ID, w.Mem.ID).ID)
	}
	in := w.install(t, k, convs...)

	var mu sync.Mutex
	acked := map[string]bool{} // message ids answered 201
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				r, err := s.request("POST", "/api/v1/messages", in.Token, postBody(convs[p%len(convs)], fmt.Sprintf("p%d n%d", p, n)), nil)
				if err != nil || r.Status != 201 {
					return
				}
				mu.Lock()
				acked[r.Str("message.id")] = true
				mu.Unlock()
			}
		})
	}
	time.Sleep(500*time.Millisecond + rand.N(time.Second)) // the moment of the kill, not a synchronization
	s.kill()
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no post was acknowledged before the kill")
	}

	s2 := startServerOpts(t, opts)
	held := map[string]int{} // message id -> its place in its conversation, oldest first
	for _, c := range convs {
		h := historyKeys(t, s2, in.Token, c)
		for i, key := range h {
			held[strings.SplitN(key, "\x00", 2)[0]] = len(h) - i
		}
	}
	s2.stopClean(t)

	queued, outbox := storedEvents(t, dir, in.ID)
	t.Logf("%d posts acknowledged, %d held; %d events queued, %d still in the outbox", len(acked), len(held), len(queued), len(outbox))
	seen := map[string]bool{}
	last := map[string]int{}
	for i, ev := range append(queued, outbox...) {
		if i < len(queued) && ev.Sequence != uint64(i+1) {
			t.Fatalf("queued event %d has sequence %d: a gap or a duplicate", i, ev.Sequence)
		}
		id := ev.GetMessage().GetId()
		pos, ok := held[id]
		switch {
		case ev.Type != "message.posted":
			t.Errorf("event %s of type %q", ev.Id, ev.Type)
		case !ok:
			t.Errorf("an event for message %s, which the restarted node does not hold", id)
		case seen[id]:
			t.Errorf("two events for message %s", id)
		case i < len(queued) && pos < last[ev.ConversationId]:
			t.Errorf("conversation %s: the event of message %d queued after that of message %d", ev.ConversationId, pos, last[ev.ConversationId])
		}
		seen[id] = true
		if i < len(queued) {
			last[ev.ConversationId] = pos
		}
	}
	for id := range held {
		if !seen[id] {
			t.Errorf("message %s is held but has no event", id)
		}
	}
	for id := range acked {
		if !seen[id] {
			t.Errorf("acknowledged message %s has no event", id)
		}
	}
}
