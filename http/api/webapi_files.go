package api

import (
	"errors"
	"strings"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/http/internal/upload"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Reactions and files (docs/api.md "Reactions", "Files"; limits in "Limits" and
// docs/files.md).

// reactionValues is the reaction enum of docs/api.md "Reactions".
var reactionValues = []string{"thumbs_up", "heart", "laugh", "celebrate", "eyes", "thinking", "thanks", "check"}

// ---- reactions ----

type reactionBody struct {
	MessageID *string `json:"messageId"`
	Reaction  *string `json:"reaction"`
}

func reactionInput(messageID, reaction *string) error {
	if err := input.RequireUUID("messageId", messageID); err != nil {
		return err
	}
	if reaction == nil {
		return kiterr.Invalid("reaction", "is required")
	}
	return input.OneOf("reaction", *reaction, reactionValues...)
}

func (s *Server) addReaction(in call) (reply, error) {
	var body reactionBody
	err := in.decode(&body)
	if err == nil {
		err = reactionInput(body.MessageID, body.Reaction)
	}
	if err != nil {
		return reply{}, err
	}
	return s.react(*body.MessageID, &kitpb.AddReaction{Caller: in.p.Caller, MessageId: *body.MessageID, Reaction: *body.Reaction})
}

func (s *Server) removeReaction(in call) (reply, error) {
	var query [2]*string
	for i, name := range []string{"messageId", "reaction"} {
		raw, err := queryParam(in.ctx.QueryArgs(), name)
		if err != nil {
			return reply{}, err
		}
		if raw != nil {
			v := string(raw)
			query[i] = &v
		}
	}
	messageID, reaction := query[0], query[1]
	if err := reactionInput(messageID, reaction); err != nil {
		return reply{}, err
	}
	return s.react(*messageID, &kitpb.RemoveReaction{Caller: in.p.Caller, MessageId: *messageID, Reaction: *reaction})
}

// react sends a reaction change to the message's conversation.
func (s *Server) react(messageID string, request proto.Message) (reply, error) {
	convID, err := actors.LocateMessage(s.env, messageID)
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindConversation, convID, request)
	}
	return okOr(err)
}

// ---- files ----

// uploadFile reads the body as it arrives (fasthttp streams it, see
// readBody): the base64 text is decoded on the fly into the chunk values
// the conversation stores, so an upload never holds its base64 or a
// whole-file buffer. Every rule and answer is the one decoding the whole
// body at once gives (uploadReader says how).
func (s *Server) uploadFile(in call) (reply, error) {
	size := in.ctx.Request.Header.ContentLength()
	if !in.ctx.Request.IsBodyStream() || size < 0 {
		size = len(in.ctx.PostBody())
	}
	if b, ok := in.ctx.UserValue(uploadBudgetKey{}).(*byteBudget); ok {
		n := b.acquire(size)
		defer b.release(n)
	}
	var body upload.Body
	chunks, err := readUpload(in, size, &body)
	if !in.ctx.Request.IsBodyStream() {
		// Only the chunks are needed from here on: let a large body buffer
		// go rather than keep it pooled with the connection. (Never with a
		// stream: that would drop the part of the body not read yet.)
		in.ctx.Request.ReleaseBody(maxJSONBody)
	}
	var readErr *upload.ReadError
	if errors.As(err, &readErr) {
		// What fasthttp answers when it fails to read a body itself.
		s.refuseBody(in.ctx, readErr.Err)
		return answered()
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.FileReply](s, actors.KindConversation, *body.ConversationID, &kitpb.UploadFile{
		Caller: in.p.Caller, FileId: ids.NewTagged(s.env.Clock.Now(), ids.MessageTag(*body.ConversationID)), Name: *body.Name, MimeType: *body.MimeType, Chunks: chunks,
	})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusCreated, fileBody{viewFile(r.File)})
}

// readUpload checks the body in the order decode would (size, empty,
// Content-Type, JSON), then the fields, then the content, and returns the
// content cut into chunks of actors.FileChunkSize bytes.
func readUpload(in call, size int, body *upload.Body) ([][]byte, error) {
	ctx := in.ctx
	if size > in.body || !isJSON(ctx) {
		// Refused before the JSON is read: decode gives these answers.
		if err := in.decode(body); err != nil {
			return nil, err
		}
		return nil, errors.New("upload: decode accepted a body it must refuse")
	}
	u := upload.NewReader(size)
	if ctx.Request.IsBodyStream() {
		if err := u.ReadBody(ctx.RequestBodyStream()); err != nil {
			return nil, err
		}
	} else {
		u.Feed(ctx.PostBody())
	}
	return u.Upload(body)
}

// isJSON is decode's Content-Type check.
func isJSON(ctx *fasthttp.RequestCtx) bool {
	ct := string(ctx.Request.Header.ContentType())
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

type fileBody struct {
	File fileView `json:"file"`
}

// fileOf finds the visible file id through its conversation.
func (s *Server) fileOf(p *actors.Principal, id string) (*kitpb.File, error) {
	if !ids.Valid(id) {
		return nil, kiterr.Absent("file")
	}
	convID, err := actors.LocateFile(s.env, id)
	if err != nil {
		return nil, err
	}
	r, err := ask[*kitpb.FileReply](s, actors.KindConversation, convID, &kitpb.GetFile{Caller: p.Caller, FileId: id})
	if err != nil {
		return nil, err
	}
	return r.File, nil
}

func (s *Server) getFile(in call) (reply, error) {
	id := in.param("id")
	f, err := s.fileOf(in.p, id)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, fileBody{viewFile(f)})
}

// fileContent streams the bytes from storage after the conversation has
// said the caller may see the file. They are always an attachment of type
// application/octet-stream, so that a browser never renders them.
func (s *Server) fileContent(in call) (reply, error) {
	id := in.param("id")
	f, err := s.fileOf(in.p, id)
	if err != nil {
		return reply{}, err
	}
	h := &in.ctx.Response.Header
	h.SetContentType("application/octet-stream")
	h.Set("X-Service-Content-Type", f.MimeType)
	h.Set("Content-Disposition", contentDisposition(f.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	c := actors.OpenFileContent(s.env, f)
	in.ctx.SetBodyStream(c, int(c.Size()))
	return answered()
}

// contentDisposition names the file for a download: an ASCII fallback and
// the exact name in RFC 5987 form.
func contentDisposition(name string) string {
	var ascii, ext strings.Builder
	for _, r := range name {
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' {
			ascii.WriteByte('_')
		} else {
			ascii.WriteRune(r)
		}
	}
	const hex = "0123456789ABCDEF"
	for _, c := range []byte(name) {
		if c < 0x80 && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0) {
			ext.WriteByte(c)
		} else {
			ext.WriteByte('%')
			ext.WriteByte(hex[c>>4])
			ext.WriteByte(hex[c&15])
		}
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + ext.String()
}
