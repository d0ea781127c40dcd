package deliveries

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/limits"
)

func TestToolResultRules(t *testing.T) {
	big := `"` + strings.Repeat("x", limits.ToolResultBytes-1) + `"` // one byte over
	fits := `"` + strings.Repeat("x", limits.ToolResultBytes-2) + `"`
	for _, tc := range []struct {
		rule, answer, result, reason string
	}{
		{"an object's result is the run's result", `{"result": {"a": [1, 2]}}`, `{"a":[1,2]}`, ""},
		{"a result may be any JSON, null included", `{"result": null}`, `null`, ""},
		{"other members of the answer are ignored", `{"result": 1, "note": "x"}`, `1`, ""},
		{"an answer without result is invalid", `{"answer": 1}`, "", ReasonInvalidAnswer},
		{"an answer that is no object is invalid", `[{"result": 1}]`, "", ReasonInvalidAnswer},
		{"an answer of null is invalid", `null`, "", ReasonInvalidAnswer},
		{"an empty answer is invalid", ``, "", ReasonInvalidAnswer},
		{"an answer that is no JSON is invalid", `{"result": }`, "", ReasonInvalidAnswer},
		// RFC 8259 8.1: GET /runs/{id} shows the result as it is kept, and
		// JSON text must be UTF-8.
		{"a result that is not UTF-8 is invalid", "{\"result\": \"a\xffb\"}", "", ReasonInvalidAnswer},
		{"invalid UTF-8 outside the result is ignored with the member", "{\"result\": 1, \"note\": \"\xff\"}", `1`, ""},
		{"a result of ToolResultBytes fits", `{"result": ` + fits + `}`, fits, ""},
		{"a result longer than ToolResultBytes is refused", `{"result": ` + big + `}`, "", ReasonResultTooLarge},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, reason := ToolResult([]byte(tc.answer))
			if string(got) != tc.result || reason != tc.reason {
				t.Fatalf("ToolResult = %.40q, %q; want %.40q, %q", got, reason, tc.result, tc.reason)
			}
		})
	}
}
