package api

import (
	"github.com/kitd/kitd/internal/kiterr/kiterrtest"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// docs/api.md "Incoming webhooks": the webhook body is {text, blocks?}; text 1-4,000
// characters and not blank; other keys ignored.
func TestHookBody(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantPath, wantText, wantBlocks string
	}{
		{"text alone is a post", `{"text":"hi"}`, "-", "hi", ""},
		{"blocks travel as sent", `{"text":"hi","blocks":[{"type":"divider"}]}`, "-", "hi", `[{"type":"divider"}]`},
		{"null blocks are none", `{"text":"hi","blocks":null}`, "-", "hi", ""},
		{"other keys are ignored", `{"text":"hi","channel":"#x","username":"u","icon_emoji":":x:"}`, "-", "hi", ""},
		{"text of 4,000 characters passes", `{"text":"` + strings.Repeat("é", 4000) + `"}`, "-", strings.Repeat("é", 4000), ""},
		{"text of 4,001 characters is rejected", `{"text":"` + strings.Repeat("é", 4001) + `"}`, "text", "", ""},
		{"text is required", `{"blocks":[]}`, "text", "", ""},
		{"empty text is rejected", `{"text":""}`, "text", "", ""},
		{"blank text is rejected", `{"text":"  \n "}`, "text", "", ""},
		{"text must be a string", `{"text":1}`, "text", "", ""},
		{"the body must be an object", `[1]`, "", "", ""},
		{"the body must be JSON", `text=hi`, "", "", ""},
		{"the body is required", ``, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, blocks, err := hookBody([]byte(tc.body))
			kiterrtest.WantPath(t, err, tc.wantPath)
			if tc.wantPath == "-" && (text != tc.wantText || string(blocks) != tc.wantBlocks) {
				t.Fatalf("got text %q blocks %q, want %q %q", text, blocks, tc.wantText, tc.wantBlocks)
			}
		})
	}
}

// The hooks host reads at most hookDrainLimit (a bound above the 64 KiB
// rule, see hookRequestConfig); other hosts keep the server's limit.
func TestHookRequestConfig(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want int
	}{
		{"/hooks/v1/a/b/c", hookDrainLimit},
		{"/api/v1/messages", 0},
		{"/ops/v1/hooks/x", 0},
	} {
		var h fasthttp.RequestHeader
		h.SetRequestURI(tc.uri)
		if got := hookRequestConfig(&h).MaxRequestBodySize; got != tc.want {
			t.Errorf("%s: MaxRequestBodySize %d, want %d", tc.uri, got, tc.want)
		}
	}
}
