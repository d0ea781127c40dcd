package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docs/decisions.md "Per source address: the unauthenticated routes": the unauthenticated routes (incoming webhooks and
// kit.access) have a bucket per source address that only failures spend:
// webhook 404s (webhook_not_found) and failed kit.access attempts
// (kit_access_failure). An address whose bucket is empty is refused, 429
// with Retry-After and the RateLimit headers, whatever it sends, until a
// token is back (docs/decisions.md, "Rate limits"). Every request of these
// tests comes from 127.0.0.1, so each test has its own server.

// peerLimitsServer is a server whose per-address buckets hold burst
// failures and give one back a minute, started with args besides.
func peerLimitsServer(t *testing.T, burst int, args ...string) *Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "limits.json")
	rows := `{"webhook_not_found": {"capacity": ` + strconv.Itoa(burst) + `, "refill": 1, "windowSeconds": 60},
	          "kit_access_failure": {"capacity": ` + strconv.Itoa(burst) + `, "refill": 1, "windowSeconds": 60}}`
	if err := os.WriteFile(file, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerOpts(t, ServerOpts{Limits: file, Args: args})
}

// madeUpHook is a webhook URL of nothing.
func madeUpHook() string { return "/hooks/v1/" + newUUID() + "/" + newUUID() + "/" + randToken() }

func wantPeerRefusal(t *testing.T, r *Resp, policy string) {
	t.Helper()
	checkRetryAfter(t, r, 60)
	if p := r.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"`+policy+`";q=`) {
		t.Errorf("RateLimit-Policy %q, want the %s row%s", p, policy, r)
	}
	if l := r.Header.Get("RateLimit"); !strings.HasPrefix(l, `"`+policy+`";r=0`) {
		t.Errorf("RateLimit %q, want %s with none left%s", l, policy, r)
	}
}

func TestPeerLimit_WebhookNotFound(t *testing.T) {
	t.Parallel()
	s := peerLimitsServer(t, 3)
	_, c, in := webhookEnv(t, s, 5)
	live := in.hook(t, c.ID)
	post := func(path string, hdr map[string]string) *Resp {
		return s.do(t, "POST", path, "", map[string]any{"text": "hello"}, hdr)
	}

	// Posts that succeed take no token: three of them, then the whole
	// burst of 404s is still there.
	for range 3 {
		want(t, live.post(t, map[string]any{"text": "fine"}), 200)
	}
	for i := range 3 {
		// Any URL that is not a live webhook's fails alike, and the
		// address is the TCP peer's whatever X-Forwarded-For says.
		path := []string{madeUpHook(), "/hooks/v1/x/y/z", live.Path + "x"}[i]
		wantError(t, post(path, map[string]string{"X-Forwarded-For": "203.0.113." + strconv.Itoa(i+1)}), 404, "not_found")
	}
	r := post(madeUpHook(), map[string]string{"X-Forwarded-For": "203.0.113.9"})
	wantPeerRefusal(t, r, "webhook_not_found")
	// Refused means refused: the live webhook's own URL too, until a
	// token is back (a scanner could otherwise go on with valid URLs).
	wantPeerRefusal(t, live.post(t, map[string]any{"text": "refused"}), "webhook_not_found")

	// kit.access counts in its own bucket.
	r = s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
		"grantType": "refresh_token", "clientId": newUUID(), "clientSecret": "kcs_" + randToken(), "refreshToken": "kref_" + randToken(),
	}, nil)
	if r.Status == 429 {
		t.Fatalf("kit.access refused for webhook failures%s", r)
	}

	// Another source address is not refused (the whole of 127/8 is
	// loopback on Linux).
	if other := fromAddress(t, "127.0.0.2", s.URL+madeUpHook()); other != http.StatusNotFound {
		t.Fatalf("another source address got %d, want 404", other)
	}

	// A minute gives one token back: one more 404, then refused again.
	want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 60}), 200)
	wantError(t, post(madeUpHook(), nil), 404, "not_found")
	wantPeerRefusal(t, post(madeUpHook(), nil), "webhook_not_found")
}

func TestPeerLimit_KitAccessFailure(t *testing.T) {
	t.Parallel()
	s := peerLimitsServer(t, 2)
	env := newBotEnv(t, s)
	in := env.In
	secret := in.prepareOAuth(t)
	cookie, _ := webSession(t, s, env.W.Mem.ID)
	bad := func() *Resp {
		return s.api(t, "", "POST", "/oauth/kit.access", map[string]any{
			"grantType": "authorization_code", "clientId": in.Kit.ID, "clientSecret": secret,
			"code": "kcode_" + randToken(), "redirectUri": e2eRedirect,
		}, nil)
	}
	fail := func() {
		t.Helper()
		if r := bad(); r.Status < 400 || r.Status > 499 || r.Status == 429 {
			t.Fatalf("want a failed kit.access%s", r)
		}
	}

	fail()
	// A successful exchange takes no token: the second failure is still
	// answered, and the third is refused.
	verifier, challenge := pkce()
	want(t, exchange(t, in, secret, approveCode(t, in, cookie, "user", challenge), verifier), 200)
	fail()
	wantPeerRefusal(t, bad(), "kit_access_failure")

	// A valid exchange from the refused address is refused too, and works
	// once a token is back.
	verifier, challenge = pkce()
	code := approveCode(t, in, cookie, "user", challenge)
	wantPeerRefusal(t, exchange(t, in, secret, code, verifier), "kit_access_failure")
	want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 60}), 200)
	want(t, exchange(t, in, secret, code, verifier), 200)

	// Webhooks count in their own bucket.
	wantError(t, s.do(t, "POST", madeUpHook(), "", map[string]any{"text": "x"}, nil), 404, "not_found")
}

// With `--limits off` there is no per-address bucket either.
func TestPeerLimit_OffWithLimitsOff(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	for range 60 { // twice the default burst
		wantError(t, s.do(t, "POST", madeUpHook(), "", map[string]any{"text": "x"}, nil), 404, "not_found")
	}
}

// fromAddress posts to url from the local address ip, with an
// X-Forwarded-For header of each forwardedFor, and returns the status.
func fromAddress(t *testing.T, ip, url string, forwardedFor ...string) int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest("POST", url, bytes.NewReader([]byte(`{"text":"x"}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, v := range forwardedFor {
		req.Header.Add("X-Forwarded-For", v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST from %s: %v", ip, err)
	}
	res.Body.Close()
	return res.StatusCode
}
