package openapi

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

func load(t *testing.T, name string, data []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("%s: load: %v", name, err)
	}
	return doc
}

// TestDocumentsAreValid loads both documents and validates them as OpenAPI
// 3.1 (schemas, references, examples).
func TestDocumentsAreValid(t *testing.T) {
	for name, data := range map[string][]byte{"webapi.json": WebAPI, "devapi.json": DevAPI} {
		doc := load(t, name, data)
		if !doc.IsOpenAPI31OrLater() {
			t.Errorf("%s: openapi = %q, want 3.1.x", name, doc.OpenAPI)
		}
		if doc.Info.Version != "1.0.0" {
			t.Errorf("%s: info.version = %q, want 1.0.0 (docs/api.md, Versioning)", name, doc.Info.Version)
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSharedComponentsAgree keeps the two documents' copies of what they
// share identical: the error body, its codes, the headers and the generic
// error answers.
func TestSharedComponentsAgree(t *testing.T) {
	var web, dev struct {
		Components map[string]map[string]json.RawMessage `json:"components"`
	}
	if err := json.Unmarshal(WebAPI, &web); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(DevAPI, &dev); err != nil {
		t.Fatal(err)
	}
	shared := map[string][]string{
		"schemas":   {"Error", "ErrorCode", "NextCursor", "Ok", "SemVer"},
		"headers":   nil, // every one of devapi.json's
		"responses": nil, // every one of devapi.json's (it has no scopes, so no missing_scope answer)
	}
	for kind, names := range shared {
		if names == nil {
			for n := range dev.Components[kind] {
				names = append(names, n)
			}
		}
		for _, n := range names {
			var a, b any
			if err := json.Unmarshal(web.Components[kind][n], &a); err != nil {
				t.Errorf("webapi.json components.%s.%s: %v", kind, n, err)
				continue
			}
			if err := json.Unmarshal(dev.Components[kind][n], &b); err != nil {
				t.Errorf("devapi.json components.%s.%s: %v", kind, n, err)
				continue
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("components.%s.%s differs between webapi.json and devapi.json", kind, n)
			}
		}
	}
}

// TestErrorCodesCoverKiterr checks that every error code kitd can answer
// (the Code constants of internal/kiterr, read from its source so that a
// new one cannot be missed) is in the documents' ErrorCode enumeration.
func TestErrorCodesCoverKiterr(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "internal", "kiterr", "kiterr.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			return true
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				codes = append(codes, s)
			}
		}
		return true
	})
	if len(codes) < 10 {
		t.Fatalf("found %d Code constants in internal/kiterr/kiterr.go; has it moved?", len(codes))
	}
	for name, data := range map[string][]byte{"webapi.json": WebAPI, "devapi.json": DevAPI} {
		doc := load(t, name, data)
		enum := map[string]bool{}
		for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
			enum[v.(string)] = true
		}
		for _, c := range codes {
			if !enum[c] {
				t.Errorf("%s: ErrorCode lacks %q, a code of internal/kiterr", name, c)
			}
		}
	}
}

// TestSchemaExamplesMatch validates the `examples` of every component
// schema against it (Validate does not; Redocly does, when installed).
func TestSchemaExamplesMatch(t *testing.T) {
	for name, data := range map[string][]byte{"webapi.json": WebAPI, "devapi.json": DevAPI} {
		doc := load(t, name, data)
		for sname, ref := range doc.Components.Schemas {
			for i, ex := range ref.Value.Examples {
				if err := ref.Value.VisitJSON(ex, openapi3.EnableJSONSchema2020()); err != nil {
					t.Errorf("%s: components.schemas.%s.examples[%d]: %v", name, sname, i, err)
				}
			}
		}
	}
}

// TestRequestBodiesAreOpen holds the README's conventions for request
// bodies: kitd ignores keys it does not know (docs/decisions.md "Request
// bodies"), so no request schema is closed; and every route that reads a
// JSON body answers 413 past its limit and 415 to a body that is not JSON
// (a `*/*` body, the webhook's, is read as JSON whatever it says), so its
// operation lists both.
func TestRequestBodiesAreOpen(t *testing.T) {
	for name, data := range map[string][]byte{"webapi.json": WebAPI, "devapi.json": DevAPI} {
		doc := load(t, name, data)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if op.RequestBody == nil || op.RequestBody.Value == nil {
					continue
				}
				where := name + " " + method + " " + path
				content := op.RequestBody.Value.Content
				if mt := content.Get("application/json"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil {
					if ap := mt.Schema.Value.AdditionalProperties.Has; ap != nil && !*ap {
						t.Errorf("%s: the request body schema refuses unknown keys, which kitd ignores", where)
					}
				}
				if op.Responses.Value("413") == nil {
					t.Errorf("%s: reads a body but does not list 413", where)
				}
				if content["*/*"] == nil && op.Responses.Value("415") == nil {
					t.Errorf("%s: reads a JSON body but does not list 415", where)
				}
			}
		}
	}
}
