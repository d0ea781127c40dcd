package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/kiterr/kiterrtest"
)

type strictItem struct {
	Label *string `json:"label"`
}

type strictBody struct {
	Text   *string               `json:"text"`
	Items  []strictItem          `json:"items"`
	Meta   map[string]strictItem `json:"meta"`
	Blocks json.RawMessage       `json:"blocks"`
	Any    any                   `json:"any"`
}

// TestDecodeJSONStrict: docs/decisions.md "Request bodies".
func TestDecodeJSONStrict(t *testing.T) {
	const secret = "zzSecretKey"
	many := func(n int) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		b.WriteString(`"k":2}`)
		return b.String()
	}
	tests := []struct {
		name     string
		body     string
		wantPath string // "-": no error
		check    func(b *strictBody) bool
	}{
		{"keys are case-sensitive: a case variant is ignored", `{"TEXT":"x"}`, "-", func(b *strictBody) bool { return b.Text == nil }},
		{"a case variant does not overwrite its field", `{"text":"a","Text":"b"}`, "-", func(b *strictBody) bool { return *b.Text == "a" }},
		{"a case variant before its field does not set it", `{"Text":"b","text":"a"}`, "-", func(b *strictBody) bool { return *b.Text == "a" }},
		{"a case variant of a nested field is ignored", `{"items":[{"LABEL":"x"}]}`, "-", func(b *strictBody) bool { return b.Items[0].Label == nil }},
		{"a case variant written with an escape is ignored", `{"T\u0065xt":"x"}`, "-", func(b *strictBody) bool { return b.Text == nil }},
		{"an escaped key that is exactly a field matches it", `{"te\u0078t":"a"}`, "-", func(b *strictBody) bool { return *b.Text == "a" }},
		{"unknown keys are ignored", `{"text":"a","extra":{"b":[1,{"c":null}]}}`, "-", func(b *strictBody) bool { return *b.Text == "a" }},
		{"a non-ASCII key that folds onto a field is ignored (long s)", `{"iteſ":[{"label":"x"}],"itemſ":[{"label":"x"}]}`, "-", func(b *strictBody) bool { return b.Items == nil }},
		{"a key with the Kelvin sign is ignored", "{\"text\":\"a\",\"\u212aey\":1}", "-", func(b *strictBody) bool { return *b.Text == "a" }},
		{"a repeated key is refused at its path", `{"text":"a","text":"b"}`, "text", nil},
		{"a repeated key written with an escape is refused", `{"text":"a","te\u0078t":"b"}`, "text", nil},
		{"a repeated key with a null is refused", `{"text":null,"text":"b"}`, "text", nil},
		{"a repeated key in a nested object is refused at its path", `{"items":[{},{"label":"a","label":"b"}]}`, "items[1].label", nil},
		{"a repeated unknown key is refused at its object, unnamed", `{"` + secret + `":1,"` + secret + `":2}`, "", nil},
		{"a repeated key of a map is refused at the map, unnamed", `{"meta":{"` + secret + `":{},"` + secret + `":{}}}`, "meta", nil},
		{"a repeated key inside an unknown key's value is refused, unnamed", `{"` + secret + `":{"a":1,"a":2}}`, "", nil},
		{"a repeated key inside a value of any type is refused", `{"any":[{"a":1,"a":2}]}`, "any[0]", nil},
		{"a repeated key in an array under an unknown key is refused at its object", `{"` + secret + `":[{"a":1,"a":2}]}`, "", nil},
		{"a repeated key in an array under an unknown nested key is refused at its object", `{"items":[{"` + secret + `":[[{"a":1,"a":2}]]}]}`, "items[0]", nil},
		{"a repeated field under a map key is refused at the map", `{"meta":{"` + secret + `":{"label":"a","label":"b"}}}`, "meta", nil},
		{"an array for the body is a type error, not a path into it", `[{"a":1,"a":2}]`, "", nil},
		{"an array for a string is a type error at its field, not a path into it", `{"text":[{"a":1,"a":2}]}`, "text", nil},
		{"a repeated key in an object of 100 keys is refused", `{"any":` + many(100) + `}`, "any", nil},
		{"100 distinct keys are read", `{"any":` + strings.Replace(many(100), `"k":2`, `"y":2`, 1) + `}`, "-", nil},
		{"blocks are left whole to their validator", `{"blocks":[{"a":1,"a":2}]}`, "-", func(b *strictBody) bool { return len(b.Blocks) > 0 }},
		{"a syntax error is still json's, with its offset", `{"text":"a",}`, "", nil},
		{"a syntax error after a repeated key is still json's", `{"text":"a","text":"b"`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strictBody
			err := DecodeJSON([]byte(tt.body), &b)
			kiterrtest.WantPath(t, err, tt.wantPath)
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q names a submitted key", err)
			}
			if tt.check != nil && !tt.check(&b) {
				t.Fatalf("decoded %+v", b)
			}
		})
	}
}

// strictPath is a path made of strictBody's field names and indices.
var strictPath = regexp.MustCompile(`^((text|items|meta|blocks|any)(\[\d+\])*(\.label)?)?$`)

// FuzzDecodeJSONStrict: DecodeJSON refuses with a validation error at a
// path of the schema's own names that repeats nothing of the body, or
// accepts JSON that, encoded again, decodes to the same bytes.
func FuzzDecodeJSONStrict(f *testing.F) {
	const secret = "zzSecretKey"
	for _, s := range []string{`{"text":"a"}`, `{"Text":"a","text":"b"}`, `{"items":[{"label":"x"}]}`, `{"a\"b":1}`, `{"meta":{"x":{"label":null}}}`, `{"blocks":[{"x":"}"}]}`,
		`{"` + secret + `":[{"a":1,"a":2}]}`, `{"meta":{"` + secret + `":{"label":"a","label":"b"}}}`, `[{"` + secret + `":1,"` + secret + `":2}]`, `{"text":"` + secret + `","text":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got strictBody
		err := DecodeJSON(body, &got)
		var e *kiterr.Error
		if err != nil && (!errors.As(err, &e) || e.Code != kiterr.Validation) {
			t.Fatalf("%q: %v is not a validation error", body, err)
		}
		if err != nil && !strictPath.MatchString(e.Path) {
			t.Fatalf("%q: refused at %q, not a path of the schema", body, e.Path)
		}
		if err != nil && strings.Contains(string(body), secret) && strings.Contains(err.Error(), secret) {
			t.Fatalf("%q: error %q echoes the body", body, err)
		}
		if err != nil {
			return
		}
		// Not "encoding/json accepts it too": a case variant of a field,
		// which encoding/json would decode into it, is ignored.
		if !json.Valid(body) {
			t.Fatalf("%q: accepted what is not JSON", body)
		}
		once, err := json.Marshal(&got)
		if err != nil {
			t.Fatalf("%q: accepted, then not encodable: %v", body, err)
		}
		var again strictBody
		if err := DecodeJSON(once, &again); err != nil {
			t.Fatalf("%q: accepted, re-encoded as %s and refused: %v", body, once, err)
		}
		if twice, _ := json.Marshal(&again); !bytes.Equal(once, twice) {
			t.Fatalf("%q: re-encoded as %s, decoded again as %s", body, once, twice)
		}
	})
}

// TestCheckKeysAllocatesNothing: the walk adds no allocation to a message
// body with blocks (the hot path that the fast decoder does not take).
func TestCheckKeysAllocatesNothing(t *testing.T) {
	body := []byte(`{"text":"t","channel":"#x","username":"u","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*x*"}}],"items":[{"label":"a"},{"label":"b"}],"meta":{"k":{"label":"v"}}}`)
	typ := reflect.TypeFor[*strictBody]()
	checkKeys(body, typ) // fills the field cache
	if n := testing.AllocsPerRun(100, func() { checkKeys(body, typ) }); n != 0 {
		t.Fatalf("checkKeys allocates %v times per body", n)
	}
}

func TestValueKeys(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		ok          bool
	}{
		{"an object", `{"a":1,"b":{"c":[1,2,{"d":null}]}}`, true},
		{"a number no float64 holds: the value is never read", `{"n":1e400}`, true},
		{"a long string", `{"s":"` + strings.Repeat("x", 10000) + `"}`, true},
		{"a key given twice", `{"a":1,"a":2}`, false},
		{"a key given twice deep down", `{"a":[{"b":1,"b":2}]}`, false},
		{"a key given twice, once escaped", `{"a":1,"\u0061":2}`, false},
		{"the same key in two objects", `{"a":{"k":1},"b":{"k":2}}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValueKeys("arguments", []byte(tt.value))
			if tt.ok {
				kiterrtest.WantPath(t, err, "-")
				return
			}
			kiterrtest.WantPath(t, err, "arguments")
		})
	}
}
