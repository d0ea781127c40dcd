package actors_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// eventsManifest is manifestJSON subscribing to events.
func eventsManifest(slug, version string, scopes, events []string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(manifestJSON(slug, version, scopes...)), &m); err != nil {
		panic(err)
	}
	if len(events) > 0 {
		m["events"] = events
		m["endpoints"] = map[string]any{"events": "https://events.example.com/kit"}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// queued is every event queued for the installation so far. Notices reach
// the delivery actor before a request sent after the write that sent them,
// and it commits what they took before it answers: no waiting needed.
func queued(t testing.TB, n *testNode, instID string) []*kitpb.Event {
	t.Helper()
	return ask[*kitpb.QueuedEventsReply](t, n, actors.KindDelivery, instID, &kitpb.ListQueuedEvents{}).Events
}

func types(evs []*kitpb.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// eventsFixture: a workspace with two members, a channel of both, and a
// Kit installed with its bot in the channel.
type eventsFixture struct {
	n        *testNode
	ws       *workspace
	conv     string
	kitID    string
	slug     string
	inst     *kitpb.Installation
	user     *kitpb.Caller
	botCall  *kitpb.Caller
	baseline int // events queued by the setup
}

var allScopes = []string{"conversations:read", "messages:read", "messages:write", "files:read", "users:read"}

func newEventsFixture(t *testing.T, n *testNode, events []string) *eventsFixture {
	t.Helper()
	f := &eventsFixture{n: n, ws: n.workspace(t, 2), slug: newSlug()}
	f.conv = n.channel(t, f.ws.id, f.ws.users...)
	v := n.mustUpload(t, f.ws.id, eventsManifest(f.slug, "1.0.0", allScopes, events), false)
	f.kitID = v.Kit.Id
	f.inst = n.install(t, f.ws.id, f.kitID, "")
	f.inst = n.addChannel(t, f.inst.Id, f.conv)
	tok := n.botToken(t, f.inst.Id)
	p, err := n.auth.Authenticate([]byte(tok))
	noErr(t, err)
	f.botCall = p.Caller
	f.user = userCaller(f.ws.id, f.ws.users[0])
	f.baseline = len(queued(t, n, f.inst.Id))
	return f
}

// Each kind of docs/manifest.md is emitted by the write that causes it, to
// an installation that subscribes to it and whose bot may see it.
func TestEventsEmittedByTheirWrites(t *testing.T) {
	n := shared
	all := []string{"bot.added", "bot.mentioned", "bot.removed", "channel.archived", "channel.member_joined",
		"channel.member_left", "file.shared", "installation.uninstalled", "installation.updated",
		"message.deleted", "message.edited", "message.posted", "reaction.added", "reaction.removed"}
	for _, tc := range []struct {
		name   string
		events []string
		act    func(t *testing.T, f *eventsFixture)
		want   []string
	}{
		{"message.posted for a member's post", all, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.user, f.conv, postReq{text: "hi"})
		}, []string{"message.posted"}},
		{"message.posted for the bot's own post", all, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.botCall, f.conv, postReq{text: "hi"})
		}, []string{"message.posted"}},
		{"nothing for a kind the Kit does not subscribe to", []string{"message.edited"}, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.user, f.conv, postReq{text: "hi"})
		}, nil},
		{"nothing for a conversation the bot is not in", all, func(t *testing.T, f *eventsFixture) {
			other := n.channel(t, f.ws.id, f.ws.users...)
			n.post(t, f.user, other, postReq{text: "hi"})
		}, nil},
		{"bot.mentioned when the text mentions the bot", all, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.user, f.conv, postReq{text: "hey <@" + f.inst.BotId + "> look"})
		}, []string{"message.posted", "bot.mentioned"}},
		{"bot.mentioned when the text mentions the bot as the Web API writes mentions (<@user:ID>)", all, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.user, f.conv, postReq{text: "hey <@user:" + f.inst.BotId + "> look"})
		}, []string{"message.posted", "bot.mentioned"}},
		{"no bot.mentioned for another id", all, func(t *testing.T, f *eventsFixture) {
			n.post(t, f.user, f.conv, postReq{text: "hey <@" + ids.New() + "> look"})
		}, []string{"message.posted"}},
		{"message.edited", all, func(t *testing.T, f *eventsFixture) {
			m := n.post(t, f.user, f.conv, postReq{text: "hi"})
			ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.EditMessage{Caller: f.user, MessageId: m.Id, Text: "ho", KeepBlocks: true})
		}, []string{"message.posted", "message.edited"}},
		{"message.deleted", all, func(t *testing.T, f *eventsFixture) {
			m := n.post(t, f.user, f.conv, postReq{text: "hi"})
			ask[*kitpb.MessageReply](t, n, actors.KindConversation, f.conv, &kitpb.DeleteMessage{Caller: f.user, MessageId: m.Id})
		}, []string{"message.posted", "message.deleted"}},
		{"reaction.added and reaction.removed", all, func(t *testing.T, f *eventsFixture) {
			m := n.post(t, f.user, f.conv, postReq{text: "hi"})
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.AddReaction{Caller: f.user, MessageId: m.Id, Reaction: "heart"})
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.AddReaction{Caller: f.user, MessageId: m.Id, Reaction: "heart"}) // no change: no event
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.RemoveReaction{Caller: f.user, MessageId: m.Id, Reaction: "heart"})
		}, []string{"message.posted", "reaction.added", "reaction.removed"}},
		{"file.shared", all, func(t *testing.T, f *eventsFixture) {
			ask[*kitpb.FileReply](t, n, actors.KindConversation, f.conv, &kitpb.UploadFile{Caller: f.user, FileId: ids.NewTagged(time.Now(), ids.MessageTag(f.conv)), Name: "a.txt", MimeType: "text/plain", Chunks: [][]byte{[]byte("abc")}})
		}, []string{"file.shared"}},
		{"channel.member_joined and channel.member_left", all, func(t *testing.T, f *eventsFixture) {
			u := n.user(t, f.ws.id)
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.AddMember{UserId: u, UserWorkspaceId: f.ws.id})
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.RemoveMember{UserId: u})
		}, []string{"channel.member_joined", "channel.member_left"}},
		{"channel.archived", all, func(t *testing.T, f *eventsFixture) {
			ask[*kitpb.ConversationReply](t, n, actors.KindConversation, f.conv, &kitpb.ArchiveConversation{})
		}, []string{"channel.archived"}},
		{"bot.added and bot.removed", all, func(t *testing.T, f *eventsFixture) {
			other := n.channel(t, f.ws.id, f.ws.users...)
			n.addChannel(t, f.inst.Id, other)
			ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, f.inst.Id, &kitpb.RemoveChannel{ConversationId: other})
		}, []string{"bot.added", "bot.removed"}},
		{"installation.updated, then the new version's kinds", all, func(t *testing.T, f *eventsFixture) {
			n.mustUpload(t, f.ws.id, eventsManifest(f.slug, "1.0.1", allScopes, []string{"installation.updated", "message.edited"}), false)
			n.install(t, f.ws.id, f.kitID, "1.0.1")
			n.post(t, f.user, f.conv, postReq{text: "no longer subscribed"})
		}, []string{"installation.updated"}},
		{"installation.uninstalled, and nothing after it", all, func(t *testing.T, f *eventsFixture) {
			ask[*kitpb.Ok](t, n, actors.KindInstallation, f.inst.Id, &kitpb.Uninstall{})
			n.post(t, f.user, f.conv, postReq{text: "after"})
		}, []string{"installation.uninstalled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEventsFixture(t, n, tc.events)
			tc.act(t, f)
			got := queued(t, n, f.inst.Id)[f.baseline:]
			if !slices.Equal(types(got), tc.want) {
				t.Fatalf("events %q, want %q", types(got), tc.want)
			}
		})
	}
}

// An event carries its resource as the Web API shows it: a message.posted
// event the message, with its conversation.
func TestEventCarriesItsResource(t *testing.T) {
	n := shared
	f := newEventsFixture(t, n, []string{"message.posted", "reaction.added"})
	m := n.post(t, f.user, f.conv, postReq{text: "the text"})
	ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.AddReaction{Caller: f.user, MessageId: m.Id, Reaction: "eyes"})
	evs := queued(t, n, f.inst.Id)[f.baseline:]
	if len(evs) != 2 {
		t.Fatalf("events %q", types(evs))
	}
	posted := evs[0]
	if posted.Message.GetId() != m.Id || posted.Message.Text != "the text" || posted.Message.ConversationId != f.conv ||
		posted.ConversationId != f.conv || posted.OccurredAt != m.CreatedAt || !ids.Valid(posted.Id) {
		t.Errorf("message.posted is %v, want message %v", posted, m)
	}
	r := evs[1].Reaction
	if r.GetMessageId() != m.Id || r.Reaction != "eyes" || r.UserId != f.user.UserId {
		t.Errorf("reaction.added carries %v", r)
	}
	if posted.Id == evs[1].Id {
		t.Error("two events share an id")
	}
}

// Sequences of one installation start at 1 and have no gaps, and each
// conversation's events keep their order, under concurrent writes to many
// conversations.
func TestEventSequencesHaveNoGapsUnderConcurrentWrites(t *testing.T) {
	n := ownNode(t)
	ws := n.workspace(t, 1)
	user := userCaller(ws.id, ws.users[0])
	v := n.mustUpload(t, ws.id, eventsManifest(newSlug(), "1.0.0", allScopes, []string{"message.posted"}), false)
	inst := n.install(t, ws.id, v.Kit.Id, "")
	const convs, posts = 16, 5 // posts: the post_message burst, so the clock need not move
	var cs []string
	for range convs {
		c := n.channel(t, ws.id, ws.users...)
		n.addChannel(t, inst.Id, c)
		cs = append(cs, c)
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for i := range posts {
				if _, err := n.send(user, c, postReq{text: fmt.Sprint(i)}); err != nil {
					t.Errorf("post: %v", err)
				}
			}
		})
	}
	wg.Wait()
	evs := queued(t, n, inst.Id)
	if len(evs) != convs*posts {
		t.Fatalf("%d events, want %d", len(evs), convs*posts)
	}
	next := map[string]int{}
	for i, e := range evs {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
		if want := fmt.Sprint(next[e.ConversationId]); e.Message.Text != want {
			t.Fatalf("conversation %s: event %q, want %q", e.ConversationId, e.Message.Text, want)
		}
		next[e.ConversationId]++
	}
}

// flakyReads is a cluster's read barrier that fails the catch-up of one
// partition while fails is above zero, as one without a leader does.
type flakyReads struct {
	p     partition.ID
	fails atomic.Int32
}

func (r *flakyReads) CatchUp(p partition.ID) error {
	if p == r.p && r.fails.Add(-1) >= 0 {
		return errors.New("no leader")
	}
	return nil
}

// A delivery actor that cannot read the outbox as it activates (in a
// cluster, one partition without a leader for a moment) stops and starts
// again a moment later, so that the event whose notice started it is
// taken: no other notice may come to start it.
func TestDeliveryActorThatCannotLoadStartsAgain(t *testing.T) {
	n := ownNode(t)
	reads := &flakyReads{}
	n.env.Reads = reads // before any actor reads through it
	f := newEventsFixture(t, n, []string{"message.posted"})
	used := []partition.ID{partition.Of(f.inst.Id), partition.Of(f.conv), partition.Of(f.ws.id), partition.Of(f.kitID)}
	for _, u := range f.ws.users {
		used = append(used, partition.Of(u))
	}
	// A partition the post does not read, read after the conversation's
	// (where the outbox holds the post's event) when one is: what the
	// failed activation took before it failed must not be written.
	reads.p = partition.Count - 1
	for slices.Contains(used, reads.p) {
		reads.p--
	}
	takenRefs := func() int {
		refs := 0
		prefix := actors.TakenEventsPrefix(f.inst.Id)
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
			refs += len(actors.DecodeTaken(t, v))
			return true
		}))
		return refs
	}
	n.post(t, f.user, f.conv, postReq{text: "a"})
	eventually.True(t, "a taken", func() bool { return takenRefs() == 1 })
	p := partition.Of(f.inst.Id)
	n.node.Release(p) // the delivery actor stops
	n.node.Host(p)
	reads.fails.Store(3)
	n.post(t, f.user, f.conv, postReq{text: "b"})
	eventually.True(t, "b taken by an activation after three that failed", func() bool { return takenRefs() == 2 })
	if left := reads.fails.Load(); left > 0 {
		t.Fatalf("%d failed catch-ups left: the actor was not activated again", left)
	}
}

// An event is recorded in the batch of its write: when the notice is lost
// (the process died right after the write), the restarted node finds the
// event in the outbox and sequences it, in order and without a gap.
func TestEventsOfLostNoticesAreSequencedAfterARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	f := newEventsFixture(t, n, []string{"message.posted"})
	n.post(t, f.user, f.conv, postReq{text: "a"})
	actors.DropNotices(n.env)
	n.post(t, f.user, f.conv, postReq{text: "b"})
	n.post(t, f.user, f.conv, postReq{text: "c"})
	if got := types(queued(t, n, f.inst.Id)); len(got) != 1 {
		t.Fatalf("before the restart: %q, want the first post's event only", got)
	}
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	noErr(t, actors.WakeDeliveries(n.env))
	evs := queued(t, n, f.inst.Id)
	var texts []string
	for i, e := range evs {
		if e.Sequence != uint64(i+1) {
			t.Errorf("event %d has sequence %d", i, e.Sequence)
		}
		texts = append(texts, e.Message.GetText())
	}
	if !slices.Equal(texts, []string{"a", "b", "c"}) {
		t.Fatalf("after the restart: %q, want a, b, c", texts)
	}
	// New events follow them.
	n.post(t, f.user, f.conv, postReq{text: "d"})
	if evs := queued(t, n, f.inst.Id); len(evs) != 4 || evs[3].Sequence != 4 || evs[3].Message.Text != "d" {
		t.Fatalf("after a new post: %d events", len(evs))
	}
}

// A notice says what its source wrote before it (OutboxNotice.After), so
// that the delivery actor takes, in the order written, the events of
// notices lost or still on their way, rather than leave them in the
// outbox until its next activation and send them out of order then.
func TestNoticesTakeWhatTheirSourceWroteBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tests := []struct {
		name string
		// run posts b and c after a, and may send what their notices
		// would have said itself (send).
		run func(t *testing.T, n *testNode, f *eventsFixture, send func(i int))
	}{
		{"a lost notice's event is taken with the next notice of its source, before it", func(t *testing.T, n *testNode, f *eventsFixture, _ func(int)) {
			actors.DropNotices(n.env)
			n.post(t, f.user, f.conv, postReq{text: "b"})
			actors.KeepNotices(n.env)
			n.post(t, f.user, f.conv, postReq{text: "c"})
		}},
		{"a notice that comes before an earlier one takes both in order, and the earlier one changes nothing", func(t *testing.T, n *testNode, f *eventsFixture, send func(int)) {
			actors.DropNotices(n.env)
			n.post(t, f.user, f.conv, postReq{text: "b"})
			n.post(t, f.user, f.conv, postReq{text: "c"})
			actors.KeepNotices(n.env)
			send(1) // c
			send(0) // b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			f := newEventsFixture(t, n, []string{"message.posted"})
			n.post(t, f.user, f.conv, postReq{text: "a"})
			// send sends the notice of the i-th entry after a's, as its
			// source would have.
			send := func(i int) {
				var pos []uint64
				var recs [][]byte
				prefix := actors.OutboxSourcePrefix(f.inst.Id, f.conv)
				noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
					pos = append(pos, actors.DecodeSeq(k[len(prefix):]))
					recs = append(recs, bytes.Clone(v))
					return true
				}))
				n.node.Send(actors.KindDelivery, f.inst.Id, &kitpb.OutboxNotice{Source: f.conv, Pos: pos[i+1], After: pos[i], Event: recs[i+1]})
			}
			tt.run(t, n, f, send)
			var texts []string
			var last uint64
			for _, e := range queued(t, n, f.inst.Id)[f.baseline:] {
				if e.Sequence <= last {
					t.Fatalf("sequence %d after %d", e.Sequence, last)
				}
				last = e.Sequence
				texts = append(texts, e.Message.GetText())
			}
			if !slices.Equal(texts, []string{"a", "b", "c"}) {
				t.Fatalf("queued %q, want a, b, c", texts)
			}
			metricIs(t, n, 1, "kitd_delivery_outbox_gap_reads_total") // one read, and none in order
		})
	}
}

// No event leaves the node before its sequence is durable: otherwise a
// crash could give the sequence a receiver saw to another event. Here a
// post's event waits in the outbox (its notice was lost) when a test event
// is queued under sequence 1 and handed to the sender; after a power cut,
// the restarted node takes the outbox, and would give the post's event
// sequence 1 had the test event's sequence not been synced before it left.
func TestEventsLeaveOnlyOnceTheirSequenceIsDurable(t *testing.T) {
	n, fs := crashableNode(t)
	f := newEventsFixture(t, n, []string{"message.posted"})
	queued(t, n, f.inst.Id) // the delivery actor is active: only notices reach it
	actors.DropNotices(n.env)
	n.post(t, f.user, f.conv, postReq{text: "waits in the outbox"})
	actors.KeepNotices(n.env)

	test := ask[*kitpb.Event](t, n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.posted", KitId: f.kitID})
	sent := take(t, n, f.inst.Id).Events
	if len(sent) != 1 || sent[0].Id != test.Id || sent[0].Sequence != 1 {
		t.Fatalf("sent %v, want the test event with sequence 1", sent)
	}
	got := queuedAfterCrash(t, n, fs, f.inst.Id)
	if got[1] != test.Id || len(got) != 2 {
		t.Fatalf("after the cut, sequence 1 is event %q of %d; want the test event %q, as sent, and the post's after it", got[1], len(got), test.Id)
	}
}

// A test event is answered (202 with its eventId and sequence) only once
// it is durable: a crash after the answer must find it queued under the
// sequence the developer was told, not lose it and give that sequence to
// the next event. Nothing takes it here, so no take's sync covers it.
func TestAnAnsweredTestEventIsDurable(t *testing.T) {
	n, fs := crashableNode(t)
	f := newEventsFixture(t, n, []string{"message.posted"})
	test := ask[*kitpb.Event](t, n, actors.KindDelivery, f.inst.Id, &kitpb.QueueTestEvent{Type: "message.posted", KitId: f.kitID})
	got := queuedAfterCrash(t, n, fs, f.inst.Id)
	if got[test.Sequence] != test.Id {
		t.Fatalf("after the cut, sequence %d is event %q of %d queued; want the answered test event %q", test.Sequence, got[test.Sequence], len(got), test.Id)
	}
}

// A redelivery is answered (202 with its sequences) only once it is
// durable: a crash after the answer must find the event queued again,
// not delivered (or dead) as before, with nothing left to send it.
func TestAnAnsweredRedeliveryIsDurable(t *testing.T) {
	n, fs := crashableNode(t)
	f, _ := deliveryFixture(t, n, 1)
	n.post(t, f.user, f.conv, postReq{text: "delivered"})
	ev := take(t, n, f.inst.Id).Events[0]
	record(t, n, f.inst.Id, ev.Sequence, true)
	// The next take hands out a new sequence, so it commits durably, the
	// delivered record with it.
	n.post(t, f.user, f.conv, postReq{text: "next"})
	if next := take(t, n, f.inst.Id).Events; len(next) != 1 || next[0].Id == ev.Id {
		t.Fatalf("took %v", next)
	}
	if got := redeliver(t, n, f.inst.Id, &kitpb.Redeliver{EventId: ev.Id}); !slices.Equal(got, []uint64{ev.Sequence}) {
		t.Fatalf("redelivered %v", got)
	}
	if got := queuedAfterCrash(t, n, fs, f.inst.Id); got[ev.Sequence] != ev.Id {
		t.Fatalf("after the cut, sequence %d is %q of %d queued; want the redelivered event %q", ev.Sequence, got[ev.Sequence], len(got), ev.Id)
	}
}

// queuedAfterCrash stops n, starts a node on what a crash at this moment
// would have left of fs (nothing unsynced), wakes its deliveries, and
// returns inst's queue there: event ids by sequence.
func queuedAfterCrash(t *testing.T, n *testNode, fs *vfs.MemFS, inst string) map[uint64]string {
	t.Helper()
	cut := fs.CrashClone(vfs.CrashCloneCfg{})
	noErr(t, n.stop())
	after, err := startNode(cut, n.clk)
	noErr(t, err)
	t.Cleanup(func() { after.stop() })
	noErr(t, actors.WakeDeliveries(after.env))
	got := map[uint64]string{}
	for _, e := range queued(t, after, inst) {
		got[e.Sequence] = e.Id
	}
	return got
}
