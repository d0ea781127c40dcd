package kitclient

import (
	"context"
	"encoding/base64"
	"net/http"
)

// UploadFile stores content as a file of a conversation (POST /files; user
// tokens only). mimeType is one of those of docs/api.md "Files" (text/plain,
// text/markdown, application/json, application/pdf, image/png,
// image/jpeg). An upload has no Idempotency-Key, so it is not retried after
// a failure that may have stored it.
func (c *Client) UploadFile(ctx context.Context, conversationID, name, mimeType string, content []byte) (*File, error) {
	cl := c.write(http.MethodPost, "/files", uploadBody{
		ConversationID: conversationID, Name: name, MimeType: mimeType,
		ContentBase64: base64.StdEncoding.EncodeToString(content),
	})
	cl.family = familyFiles
	return c.file(ctx, cl)
}

// File returns a file's metadata (GET /files/{id}).
func (c *Client) File(ctx context.Context, id string) (*File, error) {
	return c.file(ctx, c.get("/files/"+pathID(id), nil, familyRead))
}

func (c *Client) file(ctx context.Context, cl call) (*File, error) {
	var out struct {
		File File `json:"file"`
	}
	return &out.File, c.doJSON(ctx, cl, &out)
}

// FileContent returns a file's bytes (GET /files/{id}/content).
func (c *Client) FileContent(ctx context.Context, id string) (*FileContent, error) {
	a, err := c.do(ctx, c.get("/files/"+pathID(id)+"/content", nil, familyFiles))
	if err != nil {
		return nil, err
	}
	return &FileContent{Data: a.body, MimeType: a.header.Get("X-Service-Content-Type")}, nil
}
