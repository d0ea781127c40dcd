package actors_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestIdempotency(t *testing.T) {
	n := shared
	type fixture struct {
		ws     *workspace
		conv   string
		caller *kitpb.Caller
		parent *kitpb.Message
	}
	setup := func(t *testing.T) fixture {
		w := n.workspace(t, 1)
		c := n.channel(t, w.id, w.users...)
		caller := userCaller(w.id, w.users[0])
		return fixture{w, c, caller, n.post(t, caller, c, postReq{text: "parent"})}
	}
	count := func(t *testing.T, c *kitpb.Caller, conv string) int {
		t.Helper()
		r, err := n.list(c, conv, "", 0, 200)
		noErr(t, err)
		return len(r.Messages)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, f fixture)
	}{
		{"idempotency: same key same content replays with the stored message", func(t *testing.T, f fixture) {
			p := postReq{text: "once", key: "key-1", blocks: `[{"type":"divider"}]`, parent: f.parent.Id}
			first := n.post(t, f.caller, f.conv, p)
			before := count(t, f.caller, f.conv)
			n.clk.Advance(time.Hour)
			r, err := n.send(f.caller, f.conv, p)
			noErr(t, err)
			if !r.Replayed {
				t.Fatal("second post was not a replay")
			}
			if r.Message.Id != first.Id || r.Message.Seq != first.Seq || r.Message.CreatedAt != first.CreatedAt {
				t.Fatalf("replayed %v, want the stored %v", r.Message, first)
			}
			if got := count(t, f.caller, f.conv); got != before {
				t.Fatalf("%d messages after the replay, want %d", got, before)
			}
		}},
		{"a first post is not a replay", func(t *testing.T, f fixture) {
			r, err := n.send(f.caller, f.conv, postReq{key: "fresh"})
			noErr(t, err)
			if r.Replayed {
				t.Fatal("first post reported as a replay")
			}
		}},
		{"same key different content conflicts", func(t *testing.T, f fixture) {
			base := postReq{text: "original", key: "key-2"}
			n.post(t, f.caller, f.conv, base)
			for _, changed := range []struct {
				what string
				p    postReq
			}{
				{"text", postReq{text: "changed", key: "key-2"}},
				{"blocks", postReq{text: "original", key: "key-2", blocks: `[{"type":"divider"}]`}},
				{"threadParentId", postReq{text: "original", key: "key-2", parent: f.parent.Id}},
			} {
				_, err := n.send(f.caller, f.conv, changed.p)
				if kiterr.CodeOf(err) != kiterr.IdempotencyConflict {
					t.Errorf("different %s: got %v, want %s", changed.what, err, kiterr.IdempotencyConflict)
				}
			}
		}},
		{"blocks that differ only in JSON whitespace are the same content", func(t *testing.T, f fixture) {
			first := n.post(t, f.caller, f.conv, postReq{text: "spaced", key: "key-ws", blocks: `[{"type":"divider"}]`})
			r, err := n.send(f.caller, f.conv, postReq{text: "spaced", key: "key-ws", blocks: "[ {\"type\": \"divider\"} ]"})
			noErr(t, err)
			if !r.Replayed || r.Message.Id != first.Id {
				t.Fatalf("got %v, want a replay of %v", r.Message, first)
			}
		}},
		{"the same key in another conversation is a new post", func(t *testing.T, f fixture) {
			other := n.channel(t, f.ws.id, f.caller.UserId)
			a := n.post(t, f.caller, f.conv, postReq{text: "same", key: "key-3"})
			r, err := n.send(f.caller, other, postReq{text: "same", key: "key-3"})
			noErr(t, err)
			if r.Replayed || r.Message.Id == a.Id {
				t.Fatalf("post into another conversation replayed %v", r.Message)
			}
		}},
		{"key expires after 24 hours", func(t *testing.T, f fixture) {
			first := n.post(t, f.caller, f.conv, postReq{text: "day one", key: "key-4"})
			n.clk.Advance(actors.IdempotencyTTL - time.Minute)
			r, err := n.send(f.caller, f.conv, postReq{text: "day one", key: "key-4"})
			noErr(t, err)
			if !r.Replayed || r.Message.Id != first.Id {
				t.Fatalf("within 24 hours: got %v (replayed %v), want a replay", r.Message, r.Replayed)
			}
			n.clk.Advance(2 * time.Minute)
			r, err = n.send(f.caller, f.conv, postReq{text: "day two, other content", key: "key-4"})
			noErr(t, err)
			if r.Replayed || r.Message.Id == first.Id {
				t.Fatalf("after 24 hours: got a replay of %v", r.Message)
			}
			// The key now names the new message.
			n.clk.Advance(time.Second)
			r, err = n.send(f.caller, f.conv, postReq{text: "day two, other content", key: "key-4"})
			noErr(t, err)
			if !r.Replayed {
				t.Fatal("the re-used key does not replay its new message")
			}
		}},
		{"idempotency is scoped to the caller", func(t *testing.T, f fixture) {
			b1 := n.bot(t, f.ws.id, chatScopes, f.conv)
			b2 := n.bot(t, f.ws.id, chatScopes, f.conv)
			p := postReq{text: "same content", key: "shared-key"}
			seen := map[string]bool{}
			for _, c := range []*kitpb.Caller{b1.caller, b2.caller, f.caller} {
				n.clk.Advance(time.Second)
				r, err := n.send(c, f.conv, p)
				noErr(t, err)
				if r.Replayed || seen[r.Message.Id] {
					t.Fatalf("%s %s got a replay of another caller's post", c.Kind, c.BotId+c.UserId)
				}
				seen[r.Message.Id] = true
			}
		}},
		{"a replay comes from the same caller only", func(t *testing.T, f fixture) {
			other := n.user(t, f.ws.id)
			ask[*kitpb.Ok](t, n, actors.KindConversation, f.conv, &kitpb.AddMember{UserId: other, UserWorkspaceId: f.ws.id})
			n.post(t, f.caller, f.conv, postReq{text: "mine", key: "key-5"})
			r, err := n.send(userCaller(f.ws.id, other), f.conv, postReq{text: "theirs", key: "key-5"})
			noErr(t, err)
			if r.Replayed || r.Message.Text != "theirs" {
				t.Fatalf("another member's key was judged against mine: %v", r.Message)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, setup(t)) })
	}
}

func TestListMessages(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users...)
	c := userCaller(w.id, w.users[0])
	// m1..m7, where m3 and m5 reply to m2 and m6 replies to m4.
	msgs := map[string]*kitpb.Message{}
	for i, parent := range []string{"", "", "m2", "", "m2", "m4", ""} {
		name := "m" + strconv.Itoa(i+1)
		p := postReq{text: name}
		if parent != "" {
			p.parent = msgs[parent].Id
		}
		msgs[name] = n.post(t, c, conv, p)
	}

	// pages lists every page of limit items and returns the texts per page.
	pages := func(t *testing.T, parent string, limit int32) [][]string {
		t.Helper()
		var out [][]string
		var before uint64
		for range 20 {
			r, err := n.list(c, conv, parent, before, limit)
			noErr(t, err)
			out = append(out, texts(r.Messages))
			if !r.More {
				return out
			}
			before = r.Messages[len(r.Messages)-1].Seq
		}
		t.Fatal("paging does not end")
		return nil
	}
	tests := []struct {
		name   string
		parent string
		limit  int32
		want   [][]string
	}{
		{"messages list newest first with before_seq paging", "", 3,
			[][]string{{"m7", "m6", "m5"}, {"m4", "m3", "m2"}, {"m1"}}},
		{"a page as large as the rest ends the list", "", 7,
			[][]string{{"m7", "m6", "m5", "m4", "m3", "m2", "m1"}}},
		{"replies list only the thread", msgs["m2"].Id, 10,
			[][]string{{"m5", "m3"}}},
		{"replies page newest first", msgs["m2"].Id, 1,
			[][]string{{"m5"}, {"m3"}}},
		{"a message without replies has an empty thread", msgs["m7"].Id, 10,
			[][]string{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, tt.parent, tt.limit)
			if len(got) != len(tt.want) {
				t.Fatalf("pages %v, want %v", got, tt.want)
			}
			for i := range got {
				if !slices.Equal(got[i], tt.want[i]) {
					t.Fatalf("pages %v, want %v", got, tt.want)
				}
			}
		})
	}

	t.Run("posts made while paging never shift or repeat items", func(t *testing.T) {
		first, err := n.list(c, conv, "", 0, 2)
		noErr(t, err)
		n.post(t, c, conv, postReq{text: "m8"})
		next, err := n.list(c, conv, "", first.Messages[1].Seq, 2)
		noErr(t, err)
		if got := append(texts(first.Messages), texts(next.Messages)...); !slices.Equal(got, []string{"m7", "m6", "m5", "m4"}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("listing the replies of a reply is not found", func(t *testing.T) {
		_, err := n.list(c, conv, msgs["m3"].Id, 0, 10)
		wantCode(t, err, kiterr.NotFound)
	})
	t.Run("sequence numbers increase by one per post", func(t *testing.T) {
		for i := 1; i <= 7; i++ {
			if got := msgs["m"+strconv.Itoa(i)].Seq; got != uint64(i) {
				t.Fatalf("m%d has seq %d", i, got)
			}
		}
	})
}

func TestConcurrentPosts(t *testing.T) {
	n := shared
	w := n.workspace(t, 5)
	conv := n.channel(t, w.id, w.users...)
	n.clk.Advance(time.Second)
	t.Run("concurrent posts get distinct consecutive sequence numbers and are all readable", func(t *testing.T) {
		type result struct {
			m   *kitpb.Message
			err error
		}
		results := make(chan result, len(w.users))
		for _, u := range w.users { // five posts: within the burst
			go func() {
				r, err := n.send(userCaller(w.id, u), conv, postReq{text: "from " + u})
				if err != nil {
					results <- result{err: err}
					return
				}
				results <- result{m: r.Message}
			}()
		}
		var seqs []uint64
		for range w.users {
			r := <-results
			if r.err != nil {
				t.Fatalf("post: %v", r.err)
			}
			// Every acknowledged post is readable at once.
			got, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.GetMessage{Caller: userCaller(w.id, w.users[0]), MessageId: r.m.Id})
			noErr(t, err)
			if got.Message.Seq != r.m.Seq {
				t.Fatalf("read seq %d, posted %d", got.Message.Seq, r.m.Seq)
			}
			seqs = append(seqs, r.m.Seq)
		}
		slices.Sort(seqs)
		if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5}) {
			t.Fatalf("seqs %v", seqs)
		}
	})
}

func TestPostBucket(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	c := userCaller(w.id, w.users[0])

	t.Run("post_message bucket allows 5 then refuses until a second passes", func(t *testing.T) {
		conv := n.channel(t, w.id, w.users...)
		for i := range 5 {
			if _, err := n.send(c, conv, postReq{text: "burst " + strconv.Itoa(i)}); err != nil {
				t.Fatalf("post %d of the burst: %v", i+1, err)
			}
		}
		if _, err := n.send(c, conv, postReq{text: "one too many"}); err == nil {
			t.Fatal("sixth post within a second was allowed")
		}
		n.clk.Advance(time.Second)
		if _, err := n.send(c, conv, postReq{text: "after a second"}); err != nil {
			t.Fatalf("post after a second: %v", err)
		}
		if _, err := n.send(c, conv, postReq{text: "again too many"}); err == nil {
			t.Fatal("a second post after one second was allowed")
		}
		r, err := n.list(c, conv, "", 0, 50)
		noErr(t, err)
		if len(r.Messages) != 6 {
			t.Fatalf("%d messages stored, want 6 (refused posts store nothing)", len(r.Messages))
		}
	})
	t.Run("the post bucket is counted per conversation", func(t *testing.T) {
		a, b := n.channel(t, w.id, w.users...), n.channel(t, w.id, w.users...)
		for i := range 5 {
			if _, err := n.send(c, a, postReq{text: "a" + strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.send(c, b, postReq{text: "b"}); err != nil {
			t.Fatalf("post into another conversation: %v", err)
		}
	})
	t.Run("a refused post answers rate_limited", func(t *testing.T) {
		conv := n.channel(t, w.id, w.users...)
		var err error
		for range 6 {
			if _, err = n.send(c, conv, postReq{}); err != nil {
				break
			}
		}
		var e *kiterr.Error
		if !errors.As(err, &e) || e.Code != kiterr.RateLimited {
			t.Fatalf("6th post: got %v, want rate_limited", err)
		}
		if e.Limit == nil || e.Limit.Policy != "post_message" || e.Limit.RetryAfter < 1 {
			t.Fatalf("6th post: limit %+v, want post_message with Retry-After >= 1", e.Limit)
		}
	})
}

// A message id says where its message is (ids.NewMessage): the tag of its
// conversation and its position. The stored id must match, so an id that
// points at a message without being its id finds nothing.
func TestMessageIDsSayWhereTheMessageIs(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users...)
	other := n.channel(t, w.id, w.users...)
	c := userCaller(w.id, w.users[0])
	a := n.post(t, c, conv, postReq{text: "a"})
	elsewhere := n.post(t, c, other, postReq{text: "elsewhere"})
	tag := ids.MessageTag(conv)
	for _, tc := range []struct {
		name string
		id   string
		want string // text, or "" for not found
	}{
		{"the id of a message finds it", a.Id, "a"},
		{"the id of another conversation's message is not found", elsewhere.Id, ""},
		{"this tag with a position past the end is not found", ids.NewMessage(time.Now(), tag, a.Seq+100), ""},
		{"this tag and an existing position with another timestamp is not found", ids.NewMessage(time.Now().Add(time.Hour), tag, a.Seq), ""},
		{"a UUID that is not a message id is not found", ids.New(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.GetMessage{Caller: c, MessageId: tc.id})
			if tc.want == "" {
				wantCode(t, err, kiterr.NotFound)
				return
			}
			noErr(t, err)
			if r.Message.Text != tc.want {
				t.Fatalf("got %q, want %q", r.Message.Text, tc.want)
			}
		})
	}
	if gotTag, gotSeq, _ := ids.ParseMessage(a.Id); gotTag != tag || gotSeq != a.Seq {
		t.Errorf("id %s carries tag %#x seq %d, want %#x and %d", a.Id, gotTag, gotSeq, tag, a.Seq)
	}
}

// A stored message leaves its conversation id to its key; every answer
// carries it.
func TestStoredMessagesLeaveTheirConversationToTheKey(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users...)
	c := userCaller(w.id, w.users[0])
	parent := n.post(t, c, conv, postReq{text: "parent"})
	reply := n.post(t, c, conv, postReq{text: "reply", parent: parent.Id})
	edited := ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.EditMessage{Caller: c, MessageId: parent.Id, Text: "edited"}).Message
	got := ask[*kitpb.MessageReply](t, n, actors.KindConversation, conv, &kitpb.GetMessage{Caller: c, MessageId: reply.Id}).Message
	history, err := n.list(c, conv, "", 0, 10)
	noErr(t, err)
	thread, err := n.list(c, conv, parent.Id, 0, 10)
	noErr(t, err)
	answers := append([]*kitpb.Message{parent, reply, edited, got}, append(history.Messages, thread.Messages...)...)
	for _, m := range answers {
		if m.ConversationId != conv {
			t.Errorf("message %q answered with conversation %q, want %q", m.Text, m.ConversationId, conv)
		}
	}
	stored := storedRecords(t, n, actors.MessagesPrefix(conv), func() *kitpb.Message { return &kitpb.Message{} })
	for _, m := range stored {
		if m.ConversationId != "" {
			t.Errorf("stored message %q repeats its conversation id", m.Text)
		}
	}
	if len(stored) != 2 {
		t.Fatalf("%d messages stored, want 2", len(stored))
	}
}

// LocateMessage finds a message's conversation from the tag in its id. Two
// conversations whose ids share a tag are told apart by the stored id.
func TestLocateMessage(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	first, second := idsWithOneTag(t)
	n.conversationWithID(t, w.id, first, "channel", w.users...)
	n.conversationWithID(t, w.id, second, "channel", w.users...)
	lone := n.channel(t, w.id, w.users...)
	c := userCaller(w.id, w.users[0])
	inFirst := n.post(t, c, first, postReq{text: "first"})
	inSecond := n.post(t, c, second, postReq{text: "second"})
	inLone := n.post(t, c, lone, postReq{text: "lone"})
	for _, tc := range []struct {
		name string
		id   string
		want string // conversation, or "" for not found
	}{
		{"a message of a conversation with its own tag", inLone.Id, lone},
		{"a message of the first of two conversations sharing a tag", inFirst.Id, first},
		{"a message of the second of two conversations sharing a tag", inSecond.Id, second},
		{"a shared tag and a position neither conversation has", ids.NewMessage(time.Now(), ids.MessageTag(first), 99), ""},
		{"a tag no conversation has", ids.NewMessage(time.Now(), ids.MessageTag(lone)+1, 1), ""},
		{"a UUID that is not a message id", ids.New(), ""},
		{"not a UUID", "message", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := actors.LocateMessage(n.env, tc.id)
			if tc.want == "" {
				wantCode(t, err, kiterr.NotFound)
				return
			}
			noErr(t, err)
			if got != tc.want {
				t.Fatalf("LocateMessage = %s, want %s", got, tc.want)
			}
		})
	}
}

// idsWithOneTag returns two conversation ids whose message tags collide
// (a birthday search: 300,000 ids find a 32-bit collision but once in 10^4).
func idsWithOneTag(t *testing.T) (string, string) {
	seen := make(map[uint32]string, 300_000)
	for range 300_000 {
		id := ids.New()
		tag := ids.MessageTag(id)
		if prev, ok := seen[tag]; ok {
			return prev, id
		}
		seen[tag] = id
	}
	t.Fatal("no two of 300,000 ids share a tag")
	return "", ""
}

// SPEC 3 "Idempotency record": the same key with different content is 409
// idempotency_conflict. Blocks are compared as sent: two bodies that differ
// only in interactive elements, which a caller without interactivity has
// removed, are different content.
func TestIdempotencyComparesTheBlocksAsSent(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	c := n.channel(t, w.id, w.users...)
	caller := userCaller(w.id, w.users[0]) // Interactive: false
	const a = `[{"type":"divider"},{"type":"actions","elements":[{"type":"button","actionId":"approve","text":"Approve","value":"yes"}]}]`
	const b = `[{"type":"divider"},{"type":"actions","elements":[{"type":"button","actionId":"reject","text":"Reject","value":"no"}]}]`
	n.post(t, caller, c, postReq{text: "deploy", key: "k-strip", blocks: a})
	r, err := n.send(caller, c, postReq{text: "deploy", key: "k-strip", blocks: b})
	if kiterr.CodeOf(err) != kiterr.IdempotencyConflict {
		t.Fatalf("same key, different blocks: got replayed=%v err=%v, want 409 idempotency_conflict", r != nil && r.Replayed, err)
	}
}

// The same request retried with the same key after the
// installation's interactivity changed (a new manifest version) is the same
// content, and must replay with 200, not answer 409.
func TestIdempotencyReplaysAcrossAnInteractivityChange(t *testing.T) {
	n := shared
	w := n.workspace(t, 1)
	c := n.channel(t, w.id, w.users...)
	with := userCaller(w.id, w.users[0])
	with.Interactive = true
	without := userCaller(w.id, w.users[0])
	const bl = `[{"type":"actions","elements":[{"type":"button","actionId":"approve","text":"Approve"}]}]`
	first := n.post(t, with, c, postReq{text: "deploy", key: "k-retry", blocks: bl})
	r, err := n.send(without, c, postReq{text: "deploy", key: "k-retry", blocks: bl})
	if err != nil || !r.Replayed || r.Message.Id != first.Id {
		t.Fatalf("retry of the same request: err=%v, want a replay of %s", err, first.Id)
	}
}

// docs/cluster.md "Upgrading across the Idempotency-Keys of user tokens":
// a user token's keyed post also writes the member-wide record that a
// build before keys were the installation's reads, so that such a build
// leading the conversation next in a rolling upgrade replays a retry
// rather than posting it again; this build reads that copy only for its
// own installation, and an older build's record (no installation) for any.
func TestIdempotencyOfAUserTokenAcrossBuilds(t *testing.T) {
	n := shared
	type fixture struct {
		conv, user string
		x, y       *kitpb.Caller // one member's user tokens of two installations
	}
	setup := func(t *testing.T) fixture {
		w := n.workspace(t, 1)
		f := fixture{conv: n.channel(t, w.id, w.users...), user: w.users[0]}
		f.x, f.y = userCaller(w.id, f.user), userCaller(w.id, f.user)
		f.x.InstallationId, f.y.InstallationId = ids.New(), ids.New()
		return f
	}
	memberWide := func(t *testing.T, f fixture, key string) (*kitpb.Idempotency, bool) {
		t.Helper()
		v, err := n.store.Get(actors.IdempotencyKey(f.conv, "user", f.user, key))
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, false
		}
		noErr(t, err)
		rec := &kitpb.Idempotency{}
		noErr(t, proto.Unmarshal(v, rec))
		return rec, true
	}
	for _, tc := range []struct {
		rule string
		run  func(t *testing.T, f fixture)
	}{
		{"a post writes the member-wide record an older build reads", func(t *testing.T, f fixture) {
			m := n.post(t, f.x, f.conv, postReq{text: "once", key: "k"})
			rec, found := memberWide(t, f, "k")
			if !found || rec.MessageId != m.Id || rec.InstallationId != f.x.InstallationId {
				t.Fatalf("member-wide record %v (found %v), want one of %s naming installation %s", rec, found, m.Id, f.x.InstallationId)
			}
		}},
		{"another installation's member-wide copy is not replayed, and stays", func(t *testing.T, f fixture) {
			m := n.post(t, f.x, f.conv, postReq{text: "once", key: "k"})
			r, err := n.send(f.y, f.conv, postReq{text: "once", key: "k"})
			noErr(t, err)
			if r.Replayed || r.Message.Id == m.Id {
				t.Fatalf("installation y's post answered x's message %s", m.Id)
			}
			if rec, _ := memberWide(t, f, "k"); rec.GetMessageId() != m.Id {
				t.Fatalf("member-wide record %v, want x's, kept", rec)
			}
		}},
		{"an older build's member-wide record is replayed", func(t *testing.T, f fixture) {
			m := n.post(t, f.x, f.conv, postReq{text: "once", key: "k"})
			// As an older build leaves it: member-wide alone, no installation.
			rec, found := memberWide(t, f, "k")
			if !found {
				t.Fatal("no member-wide record to leave as an older build does")
			}
			rec.InstallationId = ""
			v, err := proto.Marshal(rec)
			noErr(t, err)
			b := n.store.NewBatch()
			b.Delete(actors.IdempotencyKey(f.conv, "user", f.user+"/"+f.x.InstallationId, "k"))
			b.Set(actors.IdempotencyKey(f.conv, "user", f.user, "k"), v)
			noErr(t, b.Commit())
			r, err := n.send(f.x, f.conv, postReq{text: "once", key: "k"})
			noErr(t, err)
			if !r.Replayed || r.Message.Id != m.Id {
				t.Fatalf("a retry over an older build's record: replayed %v %s, want %s", r.Replayed, r.Message.Id, m.Id)
			}
		}},
	} {
		t.Run(tc.rule, func(t *testing.T) { tc.run(t, setup(t)) })
	}
}

// SPEC 3 "Idempotency record" keeps a key 24 hours, and then the record
// goes: a post of the conversation sweeps, at most once per 10 minutes of
// the service clock, the records whose expiry index entries are due, the
// member-wide copy of a user token's post with its record. A record's
// stored expiry decides: one a newer post with its key overwrote lives
// until the newer expiry. A sweep takes a bounded number of entries, and
// the next post continues one that reached the bound.
func TestIdempotencyRecordsExpire(t *testing.T) {
	type fixture struct {
		n      *testNode
		conv   string
		user   string
		caller *kitpb.Caller // a user token of an installation: its keyed posts write a member-wide copy
	}
	setup := func(t *testing.T, n *testNode) fixture {
		w := n.workspace(t, 1)
		f := fixture{n: n, conv: n.channel(t, w.id, w.users...), user: w.users[0]}
		f.caller = userCaller(w.id, f.user)
		f.caller.InstallationId = ids.New()
		return f
	}
	keys := func(t *testing.T, f fixture, prefix []byte) int {
		t.Helper()
		count := 0
		noErr(t, f.n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool { count++; return true }))
		return count
	}
	// holds checks the conversation's records (each key's own and its
	// member-wide copy) and expiry index entries.
	holds := func(t *testing.T, f fixture, records, entries int) {
		t.Helper()
		if got := keys(t, f, actors.IdempotencyRecordsPrefix(f.conv)); got != records {
			t.Errorf("%d idempotency records, want %d", got, records)
		}
		if got := keys(t, f, actors.IdempotencyExpiriesPrefix(f.conv)); got != entries {
			t.Errorf("%d expiry index entries, want %d", got, entries)
		}
	}
	stored := func(t *testing.T, f fixture, key string) (own, memberWide *kitpb.Idempotency) {
		t.Helper()
		read := func(owner string) *kitpb.Idempotency {
			v, err := f.n.store.Get(actors.IdempotencyKey(f.conv, "user", owner, key))
			if errors.Is(err, persistence.ErrNotFound) {
				return nil
			}
			noErr(t, err)
			rec := &kitpb.Idempotency{}
			noErr(t, proto.Unmarshal(v, rec))
			return rec
		}
		return read(f.user + "/" + f.caller.InstallationId), read(f.user)
	}
	// sweep posts without a key once a sweep is due.
	sweep := func(t *testing.T, f fixture) {
		t.Helper()
		f.n.clk.Advance(actors.WriteSweepEvery)
		f.n.post(t, f.caller, f.conv, postReq{text: "no key"})
	}
	replays := func(t *testing.T, f fixture, p postReq, of *kitpb.Message) {
		t.Helper()
		r, err := f.n.send(f.caller, f.conv, p)
		noErr(t, err)
		if !r.Replayed || r.Message.Id != of.Id {
			t.Fatalf("retry of %q: replayed %v %s, want the stored %s", p.key, r.Replayed, r.Message.Id, of.Id)
		}
	}
	for _, tc := range []struct {
		rule string
		own  bool // on a node of its own (it changes the node's sweep bound)
		run  func(t *testing.T, f fixture)
	}{
		{"an expired record and its member-wide copy are deleted by the next sweep", false, func(t *testing.T, f fixture) {
			f.n.post(t, f.caller, f.conv, postReq{text: "once", key: "k"})
			if own, memberWide := stored(t, f, "k"); own == nil || memberWide == nil {
				t.Fatalf("records after a keyed post: %v and member-wide %v, want both", own, memberWide)
			}
			holds(t, f, 2, 1)
			f.n.clk.Advance(actors.IdempotencyTTL)
			sweep(t, f)
			holds(t, f, 0, 0)
		}},
		{"a live record is kept, with its entry, while an expired one goes", false, func(t *testing.T, f fixture) {
			f.n.post(t, f.caller, f.conv, postReq{text: "first", key: "old"})
			f.n.clk.Advance(actors.IdempotencyTTL / 2)
			young := postReq{text: "second", key: "young"}
			m := f.n.post(t, f.caller, f.conv, young)
			f.n.clk.Advance(actors.IdempotencyTTL / 2)
			sweep(t, f)
			if own, memberWide := stored(t, f, "old"); own != nil || memberWide != nil {
				t.Errorf("the expired key's records are still there: %v, member-wide %v", own, memberWide)
			}
			if own, memberWide := stored(t, f, "young"); own.GetMessageId() != m.Id || memberWide.GetMessageId() != m.Id {
				t.Errorf("the live key's records: %v, member-wide %v, want both of %s", own, memberWide, m.Id)
			}
			holds(t, f, 2, 1)
			replays(t, f, young, m)
		}},
		{"a record overwritten by a newer post with its key is kept until its new expiry", false, func(t *testing.T, f fixture) {
			f.n.post(t, f.caller, f.conv, postReq{text: "day one", key: "k"})
			// A sweep just before the record expires: the overwrite
			// below is a post that does not sweep, and the first entry
			// stays due.
			f.n.clk.Advance(actors.IdempotencyTTL - actors.WriteSweepEvery*3/2)
			sweep(t, f)
			f.n.clk.Advance(actors.WriteSweepEvery / 2)
			again := postReq{text: "day two", key: "k"}
			m := f.n.post(t, f.caller, f.conv, again)
			holds(t, f, 2, 2)
			sweep(t, f) // the first entry is due; the record it names is not
			if own, memberWide := stored(t, f, "k"); own.GetMessageId() != m.Id || memberWide.GetMessageId() != m.Id {
				t.Fatalf("records after the first entry's sweep: %v, member-wide %v, want both of %s", own, memberWide, m.Id)
			}
			holds(t, f, 2, 1)
			replays(t, f, again, m)
			f.n.clk.Advance(actors.IdempotencyTTL)
			sweep(t, f)
			holds(t, f, 0, 0)
		}},
		{"a post that sweeps its own expired key keeps the record it writes", false, func(t *testing.T, f fixture) {
			f.n.post(t, f.caller, f.conv, postReq{text: "day one", key: "k"})
			f.n.clk.Advance(actors.IdempotencyTTL)
			again := postReq{text: "day two", key: "k"}
			m := f.n.post(t, f.caller, f.conv, again) // a sweep is due: this post sweeps
			holds(t, f, 2, 1)
			replays(t, f, again, m)
		}},
		{"a retry within 24 hours is answered with the stored message across sweeps", false, func(t *testing.T, f fixture) {
			p := postReq{text: "once", key: "k"}
			m := f.n.post(t, f.caller, f.conv, p)
			for range 3 {
				f.n.clk.Advance(actors.IdempotencyTTL / 4)
				sweep(t, f)
				replays(t, f, p, m)
			}
			holds(t, f, 2, 1)
		}},
		{"an incoming webhook's post into the conversation sweeps too", false, func(t *testing.T, f fixture) {
			f.n.post(t, f.caller, f.conv, postReq{text: "once", key: "k"})
			holds(t, f, 2, 1)
			b := f.n.bot(t, f.caller.WorkspaceId, chatScopes, f.conv)
			f.n.clk.Advance(actors.IdempotencyTTL + actors.WriteSweepEvery)
			ask[*kitpb.MessageReply](t, f.n, actors.KindConversation, f.conv, &kitpb.PostAsWebhook{
				BotId: b.caller.BotId, WorkspaceId: f.caller.WorkspaceId, Text: "from a webhook",
			})
			holds(t, f, 0, 0)
		}},
		{"a sweep takes at most its bound of entries and the next post continues", true, func(t *testing.T, f fixture) {
			actors.SetWriteSweepMax(f.n.env, 2)
			for i := range 5 {
				f.n.post(t, f.caller, f.conv, postReq{text: "post", key: "k" + strconv.Itoa(i)})
			}
			holds(t, f, 10, 5)
			f.n.clk.Advance(actors.IdempotencyTTL)
			for _, left := range []int{3, 1, 0} {
				f.n.post(t, f.caller, f.conv, postReq{text: "no key"}) // a second later: due only when the last sweep reached its bound
				holds(t, f, 2*left, left)
			}
		}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			n := shared
			if tc.own {
				n = ownNode(t)
			}
			tc.run(t, setup(t, n))
		})
	}
}
