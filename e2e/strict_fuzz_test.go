package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// docs/decisions.md "Request bodies", the rows found by fuzzing
// (http/internal/input FuzzDecodeJSONStrict, http/upload FuzzStreamedUpload):
// a key given twice below a key that is input is refused at the object
// holding that key, one in a value of the wrong kind is that field's type
// error, and a syntax error outranks a repeated key. Nothing is posted.
func TestStrict_BodyKeysFuzzFindings(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	_, c, in := webhookEnv(t, s, 5)
	h := in.hook(t, c.ID)
	sentinel := "zzSentinel" + randHex(4)
	conv := fmt.Sprintf("%q", c.ID)
	twice := `[{"` + sentinel + `":1,"` + sentinel + `":2}]`

	for _, tc := range []struct {
		name, path, token, body, wantMessage string
	}{
		{"POST /messages: a repeated key in an array under an unknown key is refused at the body", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":"x","` + sentinel + `":` + twice + `}`, "request body has a key given more than once"},
		{"POST /messages: a repeated key in an array for text is text's type error", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":` + twice + `}`, "text: must be of type string"},
		{"POST /messages: a body that ends after a repeated key is malformed", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":"a","text":"` + sentinel + `"`, "malformed JSON at byte "},
		{"webhook: a repeated key in an array under an ignored key is refused at the body", h.Path, "",
			`{"text":"x","attachments":` + twice + `}`, "request body has a key given more than once"},
		{"webhook: a repeated key in an array for text is text's type error", h.Path, "",
			`{"text":` + twice + `}`, "text: must be of type string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, "POST", tc.path, tc.token, raw(tc.body), nil)
			wantValidation(t, r, "", sentinel)
			if got := r.Str("message"); !strings.HasPrefix(got, tc.wantMessage) {
				t.Errorf("message %q, want %q", got, tc.wantMessage)
			}
		})
	}
	t.Run("nothing was posted", func(t *testing.T) {
		for _, m := range history(t, in, c.ID) {
			if strings.Contains(fmt.Sprint(m), sentinel) {
				t.Fatalf("a refused body was posted: %v", m)
			}
		}
	})
}
