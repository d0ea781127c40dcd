package actors

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/msgjson"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// A conversation answers pages of its history already encoded, and keeps
// its newest messages so encoded in its window (internal/history), within
// the node's budget: a page the window holds is served from memory, any
// other is read from the store and, when it touches the window, extends
// it. The window holds exactly what the store holds:
//   - it is filled only from the store (lazily, by the first page read
//     after activation or after the budget emptied it), so a restart
//     serves the same pages;
//   - every change of a message's encoded form (a post, an edit, a delete,
//     a reaction) goes into it in the step that commits the change, after
//     the commit and before the answer, and a failed commit empties it
//     (the store may or may not hold the write: the next page reads it);
//   - the encoding depends on nothing but the message, never on who reads
//     it: who may read the page is checked before (list).
// The actor only runs on its partition's leader, under the lease every
// request checks (docs/cluster.md), and leaving the lead stops it, window
// and all.

// list returns history (or one thread's replies) newest first.
func (a *conversationActor) list(m *kitpb.ListMessages) (proto.Message, error) {
	if !a.visible(m.Caller) {
		return nil, kiterr.Absent("conversation")
	}
	if m.ThreadParentId != "" {
		return a.listReplies(m)
	}
	limit := int(m.Limit)
	if page, last, more, ok := a.window.Page(m.BeforeSeq, limit, make([][]byte, 0, limit)); ok {
		return &kitpb.MessagesReply{Encoded: page, LastSeq: last, More: more}, nil
	}
	read, more, err := a.readHistory(m.BeforeSeq, limit)
	if err != nil {
		return nil, err
	}
	before := m.BeforeSeq
	if before > a.lastSeq {
		before = 0 // the page began at the newest message
	}
	a.window.Fill(before, read, more)
	return pageReply(read, more), nil
}

// readHistory reads from the store the page of at most limit messages
// older than before (0: from the newest), newest first, encoded.
func (a *conversationActor) readHistory(before uint64, limit int) (read []history.Entry, more bool, err error) {
	lower := a.messages
	upper := persistence.PrefixEnd(lower)
	if before != 0 {
		upper = messageKey(a.id, before)
	}
	read = make([]history.Entry, 0, limit)
	msg := &kitpb.Message{}
	var decodeErr error
	err = a.env.Store.Scan(lower, upper, true, func(_, v []byte) bool {
		if len(read) == limit {
			more = true
			return false
		}
		msg.Reset()
		if decodeErr = proto.Unmarshal(v, msg); decodeErr != nil {
			return false
		}
		msg.ConversationId = a.id
		read = append(read, history.Entry{Seq: msg.Seq, JSON: a.encode(msg)})
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return read, more, err
}

// listReplies pages one thread's replies, read from the store.
func (a *conversationActor) listReplies(m *kitpb.ListMessages) (proto.Message, error) {
	parent, err := a.messageByID(m.ThreadParentId)
	if err != nil || parent.ThreadParentId != "" {
		return nil, kiterr.Absent("message")
	}
	lower := threadRepliesPrefix(a.id, parent.Seq)
	upper := persistence.PrefixEnd(lower)
	if m.BeforeSeq != 0 {
		upper = threadReplyKey(a.id, parent.Seq, m.BeforeSeq)
	}
	var seqs []uint64
	more := false
	err = a.env.Store.Scan(lower, upper, true, func(k, _ []byte) bool {
		if len(seqs) == int(m.Limit) {
			more = true
			return false
		}
		seqs = append(seqs, decodeSeq(k[len(lower):]))
		return true
	})
	if err != nil {
		return nil, err
	}
	read := make([]history.Entry, 0, len(seqs))
	for _, s := range seqs {
		msg, err := a.messageBySeq(s)
		if err != nil {
			return nil, err
		}
		read = append(read, history.Entry{Seq: msg.Seq, JSON: a.encode(msg)})
	}
	return pageReply(read, more), nil
}

func pageReply(read []history.Entry, more bool) *kitpb.MessagesReply {
	r := &kitpb.MessagesReply{Encoded: make([][]byte, len(read)), More: more}
	for i, e := range read {
		r.Encoded[i] = e.JSON
	}
	if n := len(read); n > 0 {
		r.LastSeq = read[n-1].Seq
	}
	return r
}

// encode returns msg as the API answers it, in a slice of its own (a
// window keeps it, and never changes it).
func (a *conversationActor) encode(msg *kitpb.Message) []byte {
	a.scratch = msgjson.AppendMessage(a.scratch[:0], msg)
	return bytes.Clone(a.scratch)
}

// keepPosted keeps a message just committed as the newest.
func (a *conversationActor) keepPosted(msg *kitpb.Message) {
	if a.window.Keeps() {
		a.window.Append(history.Entry{Seq: msg.Seq, JSON: a.encode(msg)})
	}
}

// keepChanged keeps the new form of a message a commit changed.
func (a *conversationActor) keepChanged(msg *kitpb.Message) {
	if a.window.Keeps() {
		a.window.Replace(history.Entry{Seq: msg.Seq, JSON: a.encode(msg)})
	}
}

// release gives back what the window keeps: the actor stops.
func (a *conversationActor) release() { a.window.Drop() }
