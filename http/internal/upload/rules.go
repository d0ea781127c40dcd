package upload

import (
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/kiterr"
)

// The rules of an upload's fields and of the file types (docs/api.md "Files";
// docs/files.md).

// maxFileName is the longest name of a file, in characters.
const maxFileName = 120

// maxFileBytes is the decoded size limit of each allowed mimeType (the
// contract leaves it open; docs/files.md). Above it: 413 payload_too_large.
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

// Text keeps a JSON value as the raw bytes of the body it was decoded
// from.
type Text struct{ raw []byte }

func (j *Text) UnmarshalJSON(b []byte) error {
	j.raw = b // valid while the request is served, which is all we need
	return nil
}

// Body is the JSON of an upload; Upload fills it.
type Body struct {
	ConversationID *string `json:"conversationId"`
	Name           *string `json:"name"`
	MimeType       *string `json:"mimeType"`
	ContentBase64  Text    `json:"contentBase64"`
}

// ReadError is a failure to read the request body from the connection
// (client gone, read timeout), as opposed to a problem with its content.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "read request body: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Upload applies the rules of POST /files to the body read: its JSON, the
// fields, then the content, whose chunks it returns.
func (u *Reader) Upload(body *Body) ([][]byte, error) {
	if err := u.decode(body); err != nil {
		return nil, err
	}
	if err := input.FirstError(
		input.RequireUUID("conversationId", body.ConversationID),
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

func fileName(name *string) error {
	if err := input.RequireString("name", name, 1, maxFileName); err != nil {
		return err
	}
	return input.FirstError(input.Plain("name", *name), input.NotBlank("name", *name))
}

func requireEnum(path string, v *string, allowed ...string) error {
	if v == nil {
		return kiterr.Invalid(path, "is required")
	}
	return input.OneOf(path, *v, allowed...)
}
