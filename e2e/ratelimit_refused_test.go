package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A post refused by its conversation's post_message bucket spends none of
// the installation's write bucket (docs/decisions.md "Rate limits"): with
// one write token left, a post refused by post_message leaves it there, so
// the post_message Retry-After is long enough and another conversation
// can still be posted to.
func TestRateLimit_RefusedPostSpendsNoWriteToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "limits.json")
	// write: 2 tokens, 1 back an hour; post_message: 1 token, 1 back a
	// minute. Buckets also refill in real time, and a busy machine may
	// take a second or two between two posts: slow refills keep that from
	// deciding the test (a token a second once let the second post pass).
	limits := `{"write": {"capacity": 2, "refill": 1, "windowSeconds": 3600},
		"post_message": {"capacity": 1, "refill": 1, "windowSeconds": 60}}`
	if err := os.WriteFile(file, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerOpts(t, ServerOpts{Limits: file})
	tests := []struct {
		rule string
		// after the refusal, the post that must pass (test clock advanced
		// by the refusal's Retry-After when wait)
		wait  bool
		other bool // into another conversation
	}{
		{"the refused post's retry after its post_message Retry-After passes", true, false},
		{"a post into another conversation passes at once", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			env := newBotEnv(t, s) // an installation of its own: full buckets
			other := env.W.channel(t, "public", env.W.members()...)
			env.In.addChannel(t, other.ID)
			want(t, env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "first")), 201) // one write token left
			r := env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "refused"))
			checkRetryAfter(t, r, 60)
			if p := r.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"post_message"`) {
				t.Fatalf("refused by %q, want post_message%s", p, r)
			}
			if tt.wait {
				ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
				advance(t, s, time.Duration(ra)*time.Second)
			}
			conv := env.Chan.ID
			if tt.other {
				conv = other.ID
			}
			r = env.In.api(t, "POST", "/messages", postBody(conv, "passes"))
			want(t, r, 201)
			if l := r.Header.Get("RateLimit"); !strings.HasPrefix(l, `"write";r=0;`) {
				t.Errorf("RateLimit %q, want the last write token spent by this post", l)
			}
		})
	}
}
