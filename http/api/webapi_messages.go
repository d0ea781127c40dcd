package api

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Field limits of docs/api.md "Messages" and "Field and size limits".
const (
	maxTextLen        = 8000
	maxIdempotencyKey = 255
)

type messagesPage struct {
	Messages   []messageView `json:"messages"`
	NextCursor *string       `json:"nextCursor"`
}

type messageBody struct {
	Message messageView `json:"message"`
}

func (s *Server) listMessages(in call) (reply, error) {
	convID := in.param("id")
	list := "messages:" + convID
	pg, before, err := messageQuery(in, list)
	if err == nil && !ids.Valid(convID) {
		err = kiterr.Absent("conversation")
	}
	if err != nil {
		return reply{}, err
	}
	return s.messagePage(in, convID, "", list, pg, before)
}

func (s *Server) listReplies(in call) (reply, error) {
	msgID := in.param("id")
	list := "replies:" + msgID
	// The query first, as for history: a 400 that only a message that
	// exists got would tell it from an absent one.
	pg, before, err := messageQuery(in, list)
	if err != nil {
		return reply{}, err
	}
	convID, err := actors.LocateMessage(s.env, msgID)
	if err != nil {
		return reply{}, err
	}
	return s.messagePage(in, convID, msgID, list, pg, before)
}

// messageQuery reads the page query of a messages list: its limit and the
// position its cursor continues before.
func messageQuery(in call, list string) (page, uint64, error) {
	pg, err := parsePage(in.ctx, list, maxLimit)
	if err != nil {
		return pg, 0, err
	}
	before, err := seqPosition(pg)
	return pg, before, err
}

func (s *Server) messagePage(in call, convID, parentID, list string, pg page, before uint64) (reply, error) {
	r, err := ask[*kitpb.MessagesReply](s, actors.KindConversation, convID, &kitpb.ListMessages{
		Caller: in.p.Caller, ThreadParentId: parentID, BeforeSeq: before, Limit: int32(pg.limit),
	})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendPage(bodyBuffer(in.ctx), r, list))
}

// appendPage appends the page of list that r answered: its messages as
// the conversation encoded them, or, from a node built before pages came
// encoded (a cluster in a rolling upgrade), as it sent them.
func appendPage(b []byte, r *kitpb.MessagesReply, list string) []byte {
	if n := len(r.Messages); n > 0 {
		last := strconv.FormatUint(r.Messages[n-1].Seq, 10)
		return appendMessagesPage(b, r.Messages, cursorFor(list, last, r.More))
	}
	last := ""
	if len(r.Encoded) > 0 {
		last = strconv.FormatUint(r.LastSeq, 10)
	}
	return appendEncodedPage(b, r.Encoded, cursorFor(list, last, r.More))
}

func (s *Server) getMessage(in call) (reply, error) {
	id := in.param("id")
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.GetMessage{Caller: in.p.Caller, MessageId: id})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

type postBody struct {
	ConversationID *string         `json:"conversationId"`
	Text           *string         `json:"text"`
	Blocks         json.RawMessage `json:"blocks"`
	ThreadParentID *string         `json:"threadParentId"`
}

func (s *Server) postMessage(in call) (reply, error) {
	var body postBody
	key, err := idempotencyKey(in.ctx)
	if err == nil {
		err = in.decode(&body)
	}
	if err == nil {
		err = input.FirstError(
			input.RequireUUID("conversationId", body.ConversationID),
			messageText(body.Text),
		)
	}
	if err == nil && body.ThreadParentID != nil && !ids.Valid(*body.ThreadParentID) {
		err = kiterr.Invalid("threadParentId", "must be a live top-level message of this conversation")
	}
	if err != nil {
		return reply{}, err
	}
	msg := &kitpb.PostMessage{
		Caller: in.p.Caller, Text: *body.Text,
		Blocks: rawBlocks(body.Blocks), IdempotencyKey: key,
	}
	if body.ThreadParentID != nil {
		msg.ThreadParentId = *body.ThreadParentID
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, *body.ConversationID, msg)
	if err != nil {
		return reply{}, err
	}
	status := fasthttp.StatusCreated
	if r.Replayed {
		status = fasthttp.StatusOK
	}
	return rawReply(status, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

type editBody struct {
	Text   *string         `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

func (s *Server) editMessage(in call) (reply, error) {
	id := in.param("id")
	var body editBody
	err := in.decode(&body)
	if err == nil {
		err = messageText(body.Text)
	}
	if err != nil {
		return reply{}, err
	}
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.EditMessage{
		Caller: in.p.Caller, MessageId: id, Text: *body.Text, Blocks: rawBlocks(body.Blocks),
		KeepBlocks: body.Blocks == nil,
	})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

func (s *Server) deleteMessage(in call) (reply, error) {
	id := in.param("id")
	convID, err := actors.LocateMessage(s.env, id)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.MessageReply](s, actors.KindConversation, convID, &kitpb.DeleteMessage{Caller: in.p.Caller, MessageId: id})
	if err != nil {
		return reply{}, err
	}
	return rawReply(fasthttp.StatusOK, appendMessageBody(bodyBuffer(in.ctx), r.Message))
}

func messageText(text *string) error {
	if err := input.RequireString("text", text, 1, maxTextLen); err != nil {
		return err
	}
	return input.NotBlank("text", *text)
}

// rawBlocks returns the blocks as sent, nil for none (absent or null). The
// conversation validates them: it knows the files and the installation's
// interactivity.
func rawBlocks(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// idempotencyKey reads the optional Idempotency-Key header: 1-255
// printable ASCII characters (0x21-0x7e), given once.
func idempotencyKey(ctx *fasthttp.RequestCtx) (string, error) {
	raw := ctx.Request.Header.Peek("Idempotency-Key")
	if raw == nil {
		return "", nil
	}
	if len(ctx.Request.Header.PeekAll("Idempotency-Key")) > 1 {
		// Which key is meant (a proxy or cache may key on the other) is
		// not kitd's to guess, as for two Authorization headers.
		return "", kiterr.Invalid("Idempotency-Key", "must be given once")
	}
	if len(raw) < 1 || len(raw) > maxIdempotencyKey {
		return "", kiterr.Invalid("Idempotency-Key", "must be 1 to 255 characters")
	}
	for _, c := range raw {
		if c < 0x21 || c > 0x7e {
			return "", kiterr.Invalid("Idempotency-Key", "must be printable ASCII without spaces")
		}
	}
	return string(raw), nil
}
