package input

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodeJSON is the strict reader on the two bodies of POST
// /messages it sees: a message with Blocks (the fast path in http/api
// passes those on) and one with escapes in its text.
func BenchmarkDecodeJSON(b *testing.B) {
	type post struct {
		ConversationID *string         `json:"conversationId"`
		Text           *string         `json:"text"`
		Blocks         json.RawMessage `json:"blocks"`
		ThreadParentID *string         `json:"threadParentId"`
	}
	bodies := []struct{ name, body string }{
		{"Blocks", `{"conversationId":"01a20000-0000-7000-8000-000000000002","text":"deploy finished","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*Deploy* of ` + "`api`" + ` finished"}},{"type":"divider"},{"type":"context","elements":[{"type":"plain_text","text":"5 minutes ago"}]}]}`},
		{"Escapes", `{"conversationId":"01a20000-0000-7000-8000-000000000002","text":"line one\nline \"two\" \u00e9t\u00e9 🎉","threadParentId":null}`},
	}
	for _, c := range bodies {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				var p post
				if err := DecodeJSON([]byte(c.body), &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
