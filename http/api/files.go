package api

import (
	"errors"
	"strings"
	"unicode"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Reactions and files (SPEC.md 4.4, 4.5; limits in section 8 and
// docs/files.md).

// reactionsAndUploads: Kit bots cannot react or upload in v1.
var reactionsAndUploads = []string{actors.CallerUser}

// reactionValues is the reaction enum of SPEC.md 4.4.
var reactionValues = []string{"thumbs_up", "heart", "laugh", "celebrate", "eyes", "thinking", "thanks", "check"}

// maxFileName is the longest name of a file, in characters.
const maxFileName = 120

// maxFileBytes is the decoded size limit of each allowed mimeType (SPEC.md
// leaves it open; docs/files.md). Above it: 413 payload_too_large.
var maxFileBytes = map[string]int{
	"text/plain":       5_000_000,
	"text/markdown":    5_000_000,
	"application/json": 5_000_000,
	"application/pdf":  5_000_000,
	"image/png":        5_000_000,
	"image/jpeg":       5_000_000,
}

var mimeTypes = []string{"text/plain", "text/markdown", "application/json", "application/pdf", "image/png", "image/jpeg"}

// magic is the signature the bytes of a type must start with, where a cheap
// one exists.
var magic = map[string][]byte{
	"image/png":       {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'},
	"image/jpeg":      {0xff, 0xd8, 0xff},
	"application/pdf": []byte("%PDF-"),
}

// filesAPI serves reactions and files (SPEC.md 4.4, 4.5); it reports
// whether it owned the route.
func (s *Server) filesAPI(ctx *fasthttp.RequestCtx, method string, seg []string) bool {
	switch {
	case method == "POST" && route(seg, "reactions"):
		s.addReaction(ctx)
	case method == "DELETE" && route(seg, "reactions"):
		s.removeReaction(ctx)
	case method == "POST" && route(seg, "files"):
		s.uploadFile(ctx)
	case method == "GET" && route(seg, "files", "*"):
		s.getFile(ctx, seg[1])
	case method == "GET" && route(seg, "files", "*", "content"):
		s.fileContent(ctx, seg[1])
	default:
		return false
	}
	return true
}

// ---- reactions ----

type reactionBody struct {
	MessageID *string `json:"messageId"`
	Reaction  *string `json:"reaction"`
}

func reactionInput(messageID, reaction *string) error {
	if err := requireUUID("messageId", messageID); err != nil {
		return err
	}
	if reaction == nil {
		return kiterr.Invalid("reaction", "is required")
	}
	return oneOf("reaction", *reaction, reactionValues...)
}

func (s *Server) addReaction(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, reactionsAndUploads, "reactions:write", limits.Write)
	if p == nil {
		return
	}
	var body reactionBody
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = reactionInput(body.MessageID, body.Reaction)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.react(ctx, *body.MessageID, &kitpb.AddReaction{Caller: p.Caller, MessageId: *body.MessageID, Reaction: *body.Reaction})
}

func (s *Server) removeReaction(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, reactionsAndUploads, "reactions:write", limits.Write)
	if p == nil {
		return
	}
	args := ctx.QueryArgs()
	query := func(name string) *string {
		if !args.Has(name) {
			return nil
		}
		v := string(args.Peek(name))
		return &v
	}
	messageID, reaction := query("messageId"), query("reaction")
	if err := reactionInput(messageID, reaction); err != nil {
		s.fail(ctx, err)
		return
	}
	s.react(ctx, *messageID, &kitpb.RemoveReaction{Caller: p.Caller, MessageId: *messageID, Reaction: *reaction})
}

// react sends a reaction change to the message's conversation.
func (s *Server) react(ctx *fasthttp.RequestCtx, messageID string, request proto.Message) {
	convID, err := actors.LocateMessage(s.env, messageID)
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindConversation, convID, request)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}

// ---- files ----

// jsonText keeps a JSON value as the raw bytes of the body it was decoded
// from.
type jsonText struct{ raw []byte }

func (j *jsonText) UnmarshalJSON(b []byte) error {
	j.raw = b // valid while the request is served, which is all we need
	return nil
}

type uploadBody struct {
	ConversationID *string  `json:"conversationId"`
	Name           *string  `json:"name"`
	MimeType       *string  `json:"mimeType"`
	ContentBase64  jsonText `json:"contentBase64"`
}

// uploadFile reads the body as it arrives (fasthttp streams it, see
// readBodies): the base64 text is decoded on the fly into the chunk values
// the conversation stores, so an upload never holds its base64 or a
// whole-file buffer. Every rule and answer is the one decoding the whole
// body at once gives (uploadReader says how).
func (s *Server) uploadFile(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, reactionsAndUploads, "files:write", limits.Files)
	if p == nil {
		return
	}
	size := ctx.Request.Header.ContentLength()
	if !ctx.Request.IsBodyStream() || size < 0 {
		size = len(ctx.PostBody())
	}
	if b, ok := ctx.UserValue(uploadBudgetKey{}).(*byteBudget); ok {
		n := b.acquire(size)
		defer b.release(n)
	}
	var body uploadBody
	chunks, err := s.readUpload(ctx, size, &body)
	if !ctx.Request.IsBodyStream() {
		// Only the chunks are needed from here on: let a large body buffer
		// go rather than keep it pooled with the connection. (Never with a
		// stream: that would drop the part of the body not read yet.)
		ctx.Request.ReleaseBody(maxJSONBody)
	}
	var readErr *bodyReadError
	if errors.As(err, &readErr) {
		// What fasthttp answers when it fails to read a body itself.
		s.parseError(ctx, readErr.err)
		ctx.SetConnectionClose()
		return
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := ask[*kitpb.FileReply](s, actors.KindConversation, *body.ConversationID, &kitpb.UploadFile{
		Caller: p.Caller, FileId: ids.New(), Name: *body.Name, MimeType: *body.MimeType, Chunks: chunks,
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusCreated, fileBody{viewFile(r.File)})
}

// bodyReadError is a failure to read the request body from the connection
// (client gone, read timeout), as opposed to a problem with its content.
type bodyReadError struct{ err error }

func (e *bodyReadError) Error() string { return "read request body: " + e.err.Error() }
func (e *bodyReadError) Unwrap() error { return e.err }

// readUpload checks the body in the order decode would (size, empty,
// Content-Type, JSON), then the fields, then the content, and returns the
// content cut into chunks of actors.FileChunkSize bytes.
func (s *Server) readUpload(ctx *fasthttp.RequestCtx, size int, body *uploadBody) ([][]byte, error) {
	if size > maxFilesBody || !isJSON(ctx) {
		// Refused before the JSON is read: decode gives these answers.
		if err := s.decode(ctx, body, maxFilesBody, false); err != nil {
			return nil, err
		}
		return nil, errors.New("upload: decode accepted a body it must refuse")
	}
	u := newUploadReader(size)
	if ctx.Request.IsBodyStream() {
		if err := u.readFrom(ctx.RequestBodyStream()); err != nil {
			return nil, err
		}
	} else {
		u.feed(ctx.PostBody())
	}
	return u.upload(body)
}

// upload applies the rules of POST /files to the body read: its JSON, the
// fields, then the content, whose chunks it returns.
func (u *uploadReader) upload(body *uploadBody) ([][]byte, error) {
	if err := u.decode(body); err != nil {
		return nil, err
	}
	if err := firstError(
		requireUUID("conversationId", body.ConversationID),
		fileName(body.Name),
		requireEnum("mimeType", body.MimeType, mimeTypes...),
	); err != nil {
		return nil, err
	}
	c, err := u.contentOf(body.ContentBase64.raw)
	if err != nil {
		return nil, err
	}
	return c.result(*body.MimeType)
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

func fileName(name *string) error {
	if err := requireString("name", name, 1, maxFileName); err != nil {
		return err
	}
	if strings.IndexFunc(*name, unicode.IsControl) >= 0 {
		return kiterr.Invalid("name", "must not contain control characters")
	}
	return notBlank("name", *name)
}

func requireEnum(path string, v *string, allowed ...string) error {
	if v == nil {
		return kiterr.Invalid(path, "is required")
	}
	return oneOf(path, *v, allowed...)
}

// fileOf finds the visible file id through its conversation.
func (s *Server) fileOf(p *actors.Principal, id string) (*kitpb.File, error) {
	if !ids.Valid(id) {
		return nil, kiterr.Absent("file")
	}
	kind, convID, err := actors.Locate(s.env, id)
	if err != nil {
		return nil, err
	}
	if kind != actors.KindConversation {
		return nil, kiterr.Absent("file")
	}
	r, err := ask[*kitpb.FileReply](s, actors.KindConversation, convID, &kitpb.GetFile{Caller: p.Caller, FileId: id})
	if err != nil {
		return nil, err
	}
	return r.File, nil
}

func (s *Server) getFile(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "files:read", limits.Read)
	if p == nil {
		return
	}
	f, err := s.fileOf(p, id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, fileBody{viewFile(f)})
}

// fileContent streams the bytes from storage after the conversation has
// said the caller may see the file. They are always an attachment of type
// application/octet-stream, so that a browser never renders them.
func (s *Server) fileContent(ctx *fasthttp.RequestCtx, id string) {
	p := s.authorize(ctx, botOrUser, "files:read", limits.Files)
	if p == nil {
		return
	}
	f, err := s.fileOf(p, id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	h := &ctx.Response.Header
	h.SetContentType("application/octet-stream")
	h.Set("X-Service-Content-Type", f.MimeType)
	h.Set("Content-Disposition", contentDisposition(f.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	c := actors.OpenFileContent(s.env, f)
	ctx.SetBodyStream(c, int(c.Size()))
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
