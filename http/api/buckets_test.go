package api

import (
	"strings"
	"testing"
	"time"
)

// A request refused by a bucket spends no token of the buckets it passed
// before it (docs/decisions.md "Rate limits"): POST /messages takes the
// installation's write token in the adapter, then the conversation's
// post_message token; a post refused by post_message gets its write
// token back.
func TestRefusedRequestSpendsNoOtherBucket(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": f.other}), 200)
	post := func(conv string) *response {
		return h.do(t, request{method: "POST", path: "/api/v1/messages", token: f.bot,
			json: map[string]any{"conversationId": conv, "text": "hello"}})
	}
	tests := []struct {
		rule string
		// refused posts into f.conv after its post_message burst of 5
		refused int
		// the write tokens left after the next post into f.other
		wantWrite string
	}{
		{"a post refused by post_message gives its write token back", 1, `"write";r=44;`},
		{"many posts refused by post_message leave the write bucket as it was", 20, `"write";r=44;`},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			h.clk.Advance(time.Hour) // every bucket full; the clock then stands still
			for range 5 {
				want(t, post(f.conv), 201)
			}
			for range tt.refused {
				r := post(f.conv)
				wantError(t, r, 429, "rate_limited")
				if p := r.hdr("RateLimit-Policy"); !strings.HasPrefix(p, `"post_message"`) {
					t.Fatalf("refused by %q, want post_message", p)
				}
			}
			r := post(f.other)
			want(t, r, 201)
			if l := r.hdr("RateLimit"); !strings.HasPrefix(l, tt.wantWrite) {
				t.Fatalf("RateLimit %q, want %s...", l, tt.wantWrite)
			}
		})
	}
}
