package e2e

import (
	"net/http"
	"testing"
)

// docs/decisions.md "Client addresses behind proxies" (OPERATIONS.md section 8): a request whose TCP peer is
// in --trusted-proxies is the client's its X-Forwarded-For names (the
// rightmost entry not itself trusted): a storm from one forwarded client
// empties that client's per-address bucket only, and the request lines
// name it. From any other peer, and without --trusted-proxies, the header
// is ignored: a forged one escapes no bucket.
func TestTrustedProxies_PerAddressBuckets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rule    string
		args    []string
		otherOK bool   // another forwarded client is answered after the storm
		client  string // who the storm's lines name
	}{
		{"behind a trusted proxy a storm refuses its forwarded client only", []string{"--trusted-proxies", "127.0.0.1"}, true, "203.0.113.7"},
		{"without trusted proxies a forged header escapes no bucket", nil, false, "127.0.0.1"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			s := peerLimitsServer(t, 3, tc.args...)
			_, c, in := webhookEnv(t, s, 5)
			live := in.hook(t, c.ID)
			post := func(path, forwardedFor string) *Resp {
				return s.do(t, "POST", path, "", map[string]any{"text": "hello"}, map[string]string{"X-Forwarded-For": forwardedFor})
			}

			// A scanner's storm of 404s, some naming a made-up address
			// left of its own (what a proxy appends is on the right).
			for _, xff := range []string{"203.0.113.7", "198.51.100.1, 203.0.113.7", "203.0.113.7"} {
				wantError(t, post(madeUpHook(), xff), 404, "not_found")
			}
			r := post(madeUpHook(), "198.51.100.2, 203.0.113.7")
			wantPeerRefusal(t, r, "webhook_not_found")
			if line := requestLine(t, s, "correlationId", r.Str("correlationId")); line["client"] != tc.client {
				t.Errorf("the refusal's line names client %v, want %s", line["client"], tc.client)
			}

			// Another client through the same proxy.
			other := post(live.Path, "203.0.113.8")
			if tc.otherOK {
				want(t, other, 200)
				wantError(t, post(madeUpHook(), "203.0.113.8"), 404, "not_found")
			} else {
				wantPeerRefusal(t, other, "webhook_not_found")
			}

			// A peer that is no proxy is itself, whatever its header says:
			// naming the refused client changes nothing.
			if st := fromAddress(t, "127.0.0.2", s.URL+madeUpHook(), "203.0.113.7"); st != http.StatusNotFound {
				t.Fatalf("a post from 127.0.0.2 naming the refused client got %d, want 404 (its own bucket)", st)
			}
		})
	}
}
