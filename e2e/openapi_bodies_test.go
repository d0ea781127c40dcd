package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON bodies are validated here, each schema compiled once: kin-openapi
// validates a document of OpenAPI 3.1 by compiling the schema again for
// every value it visits, which was two thirds of the suite's own CPU. The
// rest of an exchange (the operation, parameters, headers, status, bodies
// of other media types) is still kin-openapi's.

// bodySchemas compiles the body schemas of one document, each once. The
// document itself is a resource of the compiler, so that a schema's
// references into components resolve.
type bodySchemas struct {
	docURL string

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[*openapi3.SchemaRef]*jsonschema.Schema
}

func newBodySchemas(name string, doc *openapi3.T) (*bodySchemas, error) {
	b := &bodySchemas{docURL: "https://kitd.test/" + name, compiler: jsonschema.NewCompiler(), compiled: map[*openapi3.SchemaRef]*jsonschema.Schema{}}
	b.compiler.DefaultDraft(jsonschema.Draft2020)
	b.compiler.AssertFormat()
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if err := b.compiler.AddResource(b.docURL, v); err != nil {
		return nil, err
	}
	return b, nil
}

// of compiles ref once: its JSON, with its references into the document
// made absolute, is a resource of its own.
func (b *bodySchemas) of(ref *openapi3.SchemaRef) (*jsonschema.Schema, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.compiled[ref]; ok {
		return s, nil
	}
	data, err := json.Marshal(ref)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte(`"$ref":"#/`), []byte(`"$ref":"`+b.docURL+`#/`))
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s/bodies/%d", b.docURL, len(b.compiled))
	if err := b.compiler.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := b.compiler.Compile(url)
	if err != nil {
		return nil, err
	}
	b.compiled[ref] = s
	return s, nil
}

// isJSON reports whether a Content-Type is JSON.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// validate checks body, sent or answered with contentType, against the
// schema content documents for it; "" means it conforms. Like
// kin-openapi: no content documented, or no schema for the media type,
// accepts any body.
func (b *bodySchemas) validate(content openapi3.Content, contentType string, body []byte) string {
	if len(content) == 0 {
		return ""
	}
	mt := content.Get(contentType)
	if mt == nil {
		return fmt.Sprintf("Content-Type %q is not documented", contentType)
	}
	if mt.Schema == nil {
		return ""
	}
	s, err := b.of(mt.Schema)
	if err != nil {
		return fmt.Sprintf("the schema does not compile: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("the body is not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Sprintf("the body does not match its schema: %v", err)
	}
	return ""
}

// requestBody checks a JSON request body as kin-openapi would: a body the
// operation requires must be there; "" means the document accepts it.
func (b *bodySchemas) requestBody(rb *openapi3.RequestBodyRef, header http.Header, body []byte) string {
	if rb == nil || rb.Value == nil {
		return ""
	}
	if len(body) == 0 {
		if rb.Value.Required {
			return "the request body is required"
		}
		return ""
	}
	return b.validate(rb.Value.Content, header.Get("Content-Type"), body)
}

// responseBody checks a JSON answer's body against the operation's
// response for status (or its default).
func (b *bodySchemas) responseBody(op *openapi3.Operation, status int, header http.Header, body []byte) string {
	if op.Responses == nil {
		return ""
	}
	ref := op.Responses.Status(status)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return "" // kin-openapi reports the status
	}
	return b.validate(ref.Value.Content, header.Get("Content-Type"), body)
}
