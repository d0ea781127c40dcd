package api

import "testing"

// OPERATIONS.md sections 1 and 8: the probes answer without a token, and
// the root sends a browser to the app.
func TestProbesAndRoot(t *testing.T) {
	h := ts
	for _, tt := range []struct {
		rule         string
		method, path string
		status       int
		body         string
		location     string
	}{
		{"livez answers without a token", "GET", "/livez", 200, `{"ok":true}`, ""},
		{"readyz answers without a token", "GET", "/readyz", 200, `{"ok":true}`, ""},
		{"healthz stays", "GET", "/healthz", 200, `{"ok":true}`, ""},
		{"a probe takes any method", "HEAD", "/readyz", 200, "", ""},
		{"the root redirects to the app's home", "GET", "/", 302, "", "http://kit.test/app/"},
		{"the root takes GET only", "POST", "/", 404, "", ""},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			r := h.do(t, request{method: tt.method, path: tt.path})
			want(t, r, tt.status)
			if tt.body != "" && string(r.body) != tt.body {
				t.Fatalf("body %s, want %s", r.body, tt.body)
			}
			if got := r.hdr("Location"); got != tt.location {
				t.Fatalf("Location %q, want %q", got, tt.location)
			}
		})
	}
}
