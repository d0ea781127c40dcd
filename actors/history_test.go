package actors_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/msgjson"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// The differential test of the conversations' windows (internal/history):
// a seeded random run of posts (as members, as the Kit bot, as its
// incoming webhook), thread replies, edits, deletes and reactions over a
// few conversations, with pages read in between so that the windows are
// filled, extended, trimmed and emptied while the writes go on. Then every
// page of every conversation and thread, at every limit and cursor, as a
// member and as the bot, must be byte for byte the page built straight
// from the records in the store; and again after a restart.
func TestHistoryPagesFromMemoryEqualTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	tests := []struct {
		name string
		opts history.Options
		seed uint64
		// every page after the first walk is answered from memory
		allFromMemory bool
	}{
		{"a budget that keeps every conversation whole", history.Options{Bytes: 64 << 20}, 1, true},
		{"windows bounded to 16 messages and 3 KiB", history.Options{Bytes: 64 << 20, MaxMessages: 16, MaxWindowBytes: 3 << 10}, 2, false},
		{"a budget smaller than the conversations evicts", history.Options{Bytes: 20 << 10, MaxMessages: 24}, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewMem()
			n, err := startNode(fs, nil)
			noErr(t, err)
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = n.stop()
				}
			})
			n.env.History = history.NewBudget(tt.opts)
			h := newHistoryRun(t, n, tt.seed)
			h.run(t, 300)

			h.walk(t, n)
			walked := n.env.History.Stats()
			h.everyPage(t, n)
			after := n.env.History.Stats()
			t.Logf("after the walk %+v, after every page %+v", walked, after)
			if after.Hits == walked.Hits {
				t.Fatal("no page was answered from memory")
			}
			if tt.allFromMemory && after.Misses != walked.Misses {
				t.Fatalf("%d pages read from the store after the walk, want none", after.Misses-walked.Misses)
			}
			if tt.opts.Bytes < 64<<20 && after.Evictions == 0 {
				t.Fatal("a budget smaller than the conversations evicted nothing")
			}
			if after.Bytes > tt.opts.Bytes {
				t.Fatalf("%d bytes kept, bound %d", after.Bytes, tt.opts.Bytes)
			}

			// A restart keeps nothing in memory and serves the same pages.
			clk := n.clk
			stopped = true
			noErr(t, n.stop())
			r, err := startNode(fs, clk)
			noErr(t, err)
			t.Cleanup(func() { _ = r.stop() })
			r.env.History = history.NewBudget(tt.opts)
			h.walk(t, r)
			h.everyPage(t, r)
		})
	}
}

// historyRun is one random run and the callers it writes and reads as.
type historyRun struct {
	n      *testNode
	r      *rand.Rand
	ws     *workspace
	bot    *bot
	convs  []string
	member *kitpb.Caller // a member of every conversation
	// posted lists each conversation's messages: who may change them.
	posted map[string][]*postedMessage
}

type postedMessage struct {
	id      string
	author  *kitpb.Caller
	top     bool // not a thread reply
	deleted bool
}

func newHistoryRun(t *testing.T, n *testNode, seed uint64) *historyRun {
	h := &historyRun{n: n, r: rand.New(rand.NewPCG(seed, 30)), posted: map[string][]*postedMessage{}}
	h.ws = n.workspace(t, 3)
	for range 3 {
		h.convs = append(h.convs, n.channel(t, h.ws.id, h.ws.users...))
	}
	h.bot = n.bot(t, h.ws.id, chatScopes, h.convs...)
	h.member = userCaller(h.ws.id, h.ws.users[0])
	return h
}

var historyTexts = []string{"hello", `<b>"quoted"</b> & \path\`, "héllo 世界 🎉 \u2028 end", "a\nb\tc", ""}

const historyBlocks = `[{"type":"header","text":"Hi"},{"type":"divider"}]`

// run makes steps random writes and reads.
func (h *historyRun) run(t *testing.T, steps int) {
	for i := range steps {
		conv := h.convs[h.r.IntN(len(h.convs))]
		mine := h.posted[conv]
		switch op := h.r.IntN(10); {
		case op < 4 || len(mine) == 0:
			h.post(t, conv, i)
		case op == 4:
			h.change(t, conv, mine[h.r.IntN(len(mine))], i)
		case op == 5:
			m := mine[h.r.IntN(len(mine))]
			ask[*kitpb.MessageReply](t, h.n, actors.KindConversation, conv, &kitpb.DeleteMessage{Caller: m.author, MessageId: m.id})
			m.deleted = true
		case op == 6:
			m := mine[h.r.IntN(len(mine))]
			user := userCaller(h.ws.id, h.ws.users[h.r.IntN(len(h.ws.users))])
			err := h.n.react(user, conv, m.id, []string{"heart", "eyes"}[h.r.IntN(2)], h.r.IntN(3) > 0)
			allow(t, err, kiterr.NotFound) // a deleted message takes no reaction
		default:
			limit := int32(1 + h.r.IntN(30))
			before := uint64(0)
			if h.r.IntN(3) == 0 {
				before = h.r.Uint64N(uint64(len(mine)) + 2)
			}
			_, err := h.n.list(h.member, conv, "", before, limit)
			noErr(t, err)
		}
	}
}

func (h *historyRun) post(t *testing.T, conv string, i int) {
	text := historyTexts[h.r.IntN(len(historyTexts))] + fmt.Sprint(i)
	var blocks string
	if h.r.IntN(4) == 0 {
		blocks = historyBlocks
	}
	var parent string
	tops := slices.DeleteFunc(topLevel(h.posted[conv]), func(m *postedMessage) bool { return m.deleted })
	if len(tops) > 0 && h.r.IntN(3) == 0 {
		parent = tops[h.r.IntN(len(tops))].id
	}
	var msg *kitpb.Message
	switch who := h.r.IntN(4); {
	case who == 0 && parent == "":
		h.n.clk.Advance(1e9)
		msg = ask[*kitpb.MessageReply](t, h.n, actors.KindConversation, conv, &kitpb.PostAsWebhook{
			BotId: h.bot.caller.BotId, WorkspaceId: h.ws.id, Text: text, Blocks: []byte(blocks),
		}).Message
		h.posted[conv] = append(h.posted[conv], &postedMessage{id: msg.Id, author: h.bot.caller, top: true})
		return
	case who == 1:
		msg = h.n.post(t, h.bot.caller, conv, postReq{text: text, parent: parent, blocks: blocks})
		h.posted[conv] = append(h.posted[conv], &postedMessage{id: msg.Id, author: h.bot.caller, top: parent == ""})
		return
	}
	author := userCaller(h.ws.id, h.ws.users[h.r.IntN(len(h.ws.users))])
	msg = h.n.post(t, author, conv, postReq{text: text, parent: parent, blocks: blocks})
	h.posted[conv] = append(h.posted[conv], &postedMessage{id: msg.Id, author: author, top: parent == ""})
}

// change edits a message as its author: new text, and new, no or the same
// blocks.
func (h *historyRun) change(t *testing.T, conv string, m *postedMessage, i int) {
	edit := &kitpb.EditMessage{Caller: m.author, MessageId: m.id, Text: fmt.Sprintf("edited %d %s", i, historyTexts[h.r.IntN(len(historyTexts))])}
	switch h.r.IntN(3) {
	case 0:
		edit.Blocks = []byte(historyBlocks)
	case 1:
		edit.KeepBlocks = true
	}
	_, err := try[*kitpb.MessageReply](h.n, actors.KindConversation, conv, edit)
	allow(t, err, kiterr.Conflict) // a deleted message takes no edit
}

func topLevel(ms []*postedMessage) []*postedMessage {
	var out []*postedMessage
	for _, m := range ms {
		if m.top {
			out = append(out, m)
		}
	}
	return out
}

// allow fails the test on any error but one of code.
func allow(t *testing.T, err error, code kiterr.Code) {
	t.Helper()
	if err != nil && kiterr.CodeOf(err) != code {
		t.Fatal(err)
	}
}

// walk reads each conversation once by cursor from the newest, as a
// client's catch-up does, which fills the windows.
func (h *historyRun) walk(t *testing.T, n *testNode) {
	for _, conv := range h.convs {
		for before := uint64(0); ; {
			page, err := n.list(h.member, conv, "", before, 200)
			noErr(t, err)
			if !page.More {
				break
			}
			before = page.LastSeq
		}
	}
}

// everyPage checks every page of history and of every thread, at every
// limit and cursor, as a member and as the bot, against the store; and
// that a stranger still reads none.
func (h *historyRun) everyPage(t *testing.T, n *testNode) {
	for _, conv := range h.convs {
		stored := storedPages(t, n, conv)
		h.pagesAgree(t, n, conv, "", stored)
		for _, m := range topLevel(h.posted[conv]) {
			var replies []*kitpb.Message
			for _, s := range stored {
				if s.ThreadParentId == m.id {
					replies = append(replies, s)
				}
			}
			h.pagesAgree(t, n, conv, m.id, replies)
		}
	}
	stranger := userCaller(h.ws.id, n.user(t, h.ws.id))
	_, err := n.list(stranger, h.convs[0], "", 0, 10)
	wantCode(t, err, kiterr.NotFound)
}

// storedPages reads a conversation's messages straight from the store,
// oldest first, as the store holds them.
func storedPages(t *testing.T, n *testNode, conv string) []*kitpb.Message {
	ms := storedRecords(t, n, actors.MessagesPrefix(conv), func() *kitpb.Message { return &kitpb.Message{} })
	for _, m := range ms {
		m.ConversationId = conv
	}
	return ms
}

// pagesAgree asks every page of one list (a conversation's history, or
// one thread's replies when parent is set) and compares it with the page
// of the stored messages ms (oldest first).
func (h *historyRun) pagesAgree(t *testing.T, n *testNode, conv, parent string, ms []*kitpb.Message) {
	t.Helper()
	var last uint64
	if len(ms) > 0 {
		last = ms[len(ms)-1].Seq
	}
	for _, caller := range []*kitpb.Caller{h.member, h.bot.caller} {
		for before := uint64(0); before <= last+1; before++ {
			for limit := 1; limit <= len(ms)+1; limit++ {
				r, err := try[*kitpb.MessagesReply](n, actors.KindConversation, conv, &kitpb.ListMessages{
					Caller: caller, ThreadParentId: parent, BeforeSeq: before, Limit: int32(limit),
				})
				noErr(t, err)
				want, wantLast, wantMore := storedPage(ms, before, limit)
				if !slices.EqualFunc(r.Encoded, want, bytes.Equal) || r.LastSeq != wantLast || r.More != wantMore {
					t.Fatalf("%s thread %q before %d limit %d as %s:\n got  %q last %d more %v\n want %q last %d more %v",
						conv, parent, before, limit, caller.Kind, r.Encoded, r.LastSeq, r.More, want, wantLast, wantMore)
				}
			}
		}
	}
}

// storedPage is the page of ms (oldest first) older than before (0: from
// the newest), encoded as the API answers each message.
func storedPage(ms []*kitpb.Message, before uint64, limit int) (page [][]byte, last uint64, more bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if before != 0 && ms[i].Seq >= before {
			continue
		}
		if len(page) == limit {
			return page, last, true
		}
		page = append(page, msgjson.AppendMessage(nil, ms[i]))
		last = ms[i].Seq
	}
	return page, last, false
}

// A conversation's window answers only while its node may answer for the
// conversation at all (docs/cluster.md, "The lease on every request"): a
// node whose lead has no lease answers no page, from memory or not, and
// one that loses the lead stops the conversation, window and all, so the
// next leader's pages come from the store.
func TestWindowsGoWithTheLeaseAndTheLead(t *testing.T) {
	n := ownNode(t)
	var leased atomic.Bool
	leased.Store(true)
	n.node.SetLease(func(partition.ID) bool { return leased.Load() })
	w := n.workspace(t, 1)
	conv := n.channel(t, w.id, w.users...)
	c := userCaller(w.id, w.users[0])
	for i := range 5 {
		n.post(t, c, conv, postReq{text: fmt.Sprint("m", i)})
	}
	first, err := n.list(c, conv, "", 0, 10)
	noErr(t, err)
	budget := n.env.History
	kept := budget.Stats()
	if kept.Bytes == 0 {
		t.Fatal("the first page kept nothing")
	}

	leased.Store(false)
	if _, err := n.list(c, conv, "", 0, 10); err == nil {
		t.Fatal("a node without a lease answered a page")
	}
	if budget.Stats().Hits != kept.Hits {
		t.Fatal("a node without a lease answered from memory")
	}
	leased.Store(true)
	again, err := n.list(c, conv, "", 0, 10)
	noErr(t, err)
	if budget.Stats().Hits != kept.Hits+1 || !slices.EqualFunc(first.Encoded, again.Encoded, bytes.Equal) {
		t.Fatal("the lease back, the page did not come from memory as it was")
	}

	p := partition.Of(conv)
	n.node.Release(p)
	if !eventually.Holds(eventually.Within, func() bool { return budget.Stats().Bytes == 0 }) {
		t.Fatalf("the lead released, %d bytes still kept", budget.Stats().Bytes)
	}
	n.node.Host(p)
	misses := budget.Stats().Misses
	back, err := n.list(c, conv, "", 0, 10)
	noErr(t, err)
	if budget.Stats().Misses != misses+1 || !slices.EqualFunc(first.Encoded, back.Encoded, bytes.Equal) {
		t.Fatal("the lead back, the first page was not read from the store as it was")
	}
}
