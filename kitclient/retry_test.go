package kitclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func rateLimited(retryAfter string) reply {
	h := map[string]string{"RateLimit-Policy": `"write";q=50;w=60`, "RateLimit": `"write";r=0;t=60`}
	if retryAfter != "" {
		h["Retry-After"] = retryAfter
	}
	return reply{status: 429, header: h, body: fmt.Sprintf(errorBody, "rate_limited", "rate limit write exceeded")}
}

func failing(status int) reply {
	return reply{status: status, body: fmt.Sprintf(errorBody, "internal_error", "internal error")}
}

var (
	okAuthTest = reply{status: 200, body: `{"ok":true,"tokenType":"bot","workspaceId":"w","installationId":"i","kitSlug":"s","botId":"b","userId":null,"scopes":[]}`}
	okRotate   = reply{status: 200, body: `{"token":"kbot_new","previousTokenExpiresAt":"2026-05-02T09:00:00Z"}`}
	okMessage  = reply{status: 201, body: `{"message":{"id":"m"}}`}
	okEmpty    = reply{status: 200, body: `{"ok":true}`}
)

// Each rule of the package comment's "Retries", one row each.
func TestRetryRules(t *testing.T) {
	authTest := func(c *Client) error { _, err := c.AuthTest(context.Background()); return err }
	rotate := func(c *Client) error { _, err := c.RotateToken(context.Background()); return err }
	post := func(c *Client) error {
		_, err := c.PostMessage(context.Background(), PostMessage{ConversationID: "c", Text: "hi"})
		return err
	}
	edit := func(c *Client) error {
		_, err := c.EditMessage(context.Background(), "m", EditMessage{Text: "hi"})
		return err
	}
	hook := func(c *Client) error {
		return (&Webhook{url: c.base + "/hooks/v1/i/w/secret", c: c}).Post(context.Background(), WebhookMessage{Text: "hi"})
	}
	tests := []struct {
		name     string
		replies  []reply
		call     func(*Client) error
		attempts int
		waits    []time.Duration // exact; nil with backoff set
		backoff  []time.Duration // each wait between half of it and it
		wantCode string          // "" = success
	}{
		{"429 with Retry-After waits that long, then retries",
			[]reply{rateLimited("7"), okAuthTest}, authTest, 2, []time.Duration{7 * time.Second}, nil, ""},
		{"429 of a write without a key is retried: the server did nothing",
			[]reply{rateLimited("2"), okRotate}, rotate, 2, []time.Duration{2 * time.Second}, nil, ""},
		{"429 of a webhook post is retried after its Retry-After",
			[]reply{rateLimited("1"), okEmpty}, hook, 2, []time.Duration{time.Second}, nil, ""},
		{"429 without Retry-After waits for one token of its RateLimit-Policy",
			[]reply{rateLimited(""), okAuthTest}, authTest, 2, []time.Duration{1200 * time.Millisecond}, nil, ""},
		{"429 whose Retry-After is over MaxWait is returned at once",
			[]reply{rateLimited("31"), okAuthTest}, authTest, 1, []time.Duration{}, nil, CodeRateLimited},
		{"503 of a read is retried with backoff",
			[]reply{failing(503), failing(503), okAuthTest}, authTest, 3, nil,
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond}, ""},
		{"500 of a read is retried",
			[]reply{failing(500), okAuthTest}, authTest, 2, nil, []time.Duration{250 * time.Millisecond}, ""},
		{"a network failure of a read is retried",
			[]reply{{hangUp: true}, okAuthTest}, authTest, 2, nil, []time.Duration{250 * time.Millisecond}, ""},
		{"503 of a write without a key is not retried",
			[]reply{failing(503), okRotate}, rotate, 1, []time.Duration{}, nil, CodeInternal},
		{"500 of an edit (no key) is not retried",
			[]reply{failing(500), okMessage}, edit, 1, []time.Duration{}, nil, CodeInternal},
		{"500 of a webhook post is not retried: it may have posted",
			[]reply{failing(500), okEmpty}, hook, 1, []time.Duration{}, nil, CodeInternal},
		{"a network failure of a write without a key is not retried",
			[]reply{{hangUp: true}, okRotate}, rotate, 1, []time.Duration{}, nil, "network"},
		{"503 of POST /messages is retried: it carries an Idempotency-Key",
			[]reply{failing(503), okMessage}, post, 2, nil, []time.Duration{250 * time.Millisecond}, ""},
		{"a network failure of POST /messages is retried",
			[]reply{{hangUp: true}, okMessage}, post, 2, nil, []time.Duration{250 * time.Millisecond}, ""},
		{"a 4xx other than 429 is not retried",
			[]reply{{status: 404, body: fmt.Sprintf(errorBody, "not_found", "not found")}, okAuthTest}, authTest, 1, []time.Duration{}, nil, CodeNotFound},
		{"attempts are bounded by MaxAttempts",
			[]reply{failing(503)}, authTest, 4, nil,
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}, CodeInternal},
		{"an answer saying the bucket is empty makes the next call of its family wait one token",
			[]reply{{status: 200, header: map[string]string{"RateLimit-Policy": `"read";q=100;w=60`, "RateLimit": `"read";r=0;t=60`}, body: okAuthTest.body}, okAuthTest},
			func(c *Client) error { authTest(c); return authTest(c) }, 2, []time.Duration{600 * time.Millisecond}, nil, ""},
		{"an empty bucket of another family does not hold a call back",
			[]reply{{status: 200, header: map[string]string{"RateLimit-Policy": `"write";q=50;w=60`, "RateLimit": `"write";r=0;t=60`}, body: okRotate.body}, okAuthTest},
			func(c *Client) error { rotate(c); return authTest(c) }, 2, []time.Duration{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.replies...)
			clock := newFakeClock()
			err := tt.call(testClient(f, clock))
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.wantCode == "network":
				var e *Error
				if err == nil || errors.As(err, &e) {
					t.Fatalf("err = %v, want a network error", err)
				}
			case tt.wantCode != "":
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.wantCode {
					t.Fatalf("err = %v, want an *Error %s", err, tt.wantCode)
				}
			}
			if got := len(f.requests()); got != tt.attempts {
				t.Errorf("%d attempts, want %d", got, tt.attempts)
			}
			waits := clock.slept()
			if tt.waits != nil {
				if fmt.Sprint(waits) != fmt.Sprint(tt.waits) {
					t.Errorf("waited %v, want %v", waits, tt.waits)
				}
				return
			}
			if len(waits) != len(tt.backoff) {
				t.Fatalf("waited %v, want %d backoffs of %v", waits, len(tt.backoff), tt.backoff)
			}
			for i, w := range waits {
				if w < tt.backoff[i]/2 || w > tt.backoff[i] {
					t.Errorf("wait %d = %v, want between %v and %v", i, w, tt.backoff[i]/2, tt.backoff[i])
				}
			}
		})
	}
}

func TestPostMessageSendsOneKeyPerCall(t *testing.T) {
	f := newFakeServer(t, failing(503), failing(502), okMessage)
	c := testClient(f, newFakeClock())
	ctx := context.Background()
	if _, err := c.PostMessage(ctx, PostMessage{ConversationID: "c", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, PostMessage{ConversationID: "c", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, PostMessage{ConversationID: "c", Text: "hi", IdempotencyKey: "mine-1"}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range f.requests() {
		keys = append(keys, r.header.Get("Idempotency-Key"))
	}
	if len(keys) != 5 {
		t.Fatalf("%d requests, want 5 (3 attempts, then 1, then 1): keys %q", len(keys), keys)
	}
	if keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Errorf("the retries of one call sent keys %q, want one generated key", keys[:3])
	}
	if keys[3] == "" || keys[3] == keys[0] {
		t.Errorf("a second call sent key %q, want a new one (first call: %q)", keys[3], keys[0])
	}
	if keys[4] != "mine-1" {
		t.Errorf("a call with IdempotencyKey sent %q", keys[4])
	}
	for _, k := range keys[:4] {
		if len(k) < 1 || len(k) > 255 {
			t.Errorf("key %q: the API allows 1-255 printable ASCII", k)
		}
		for _, r := range k {
			if r < 0x21 || r > 0x7e {
				t.Errorf("key %q: the API allows 1-255 printable ASCII", k)
			}
		}
	}
}

func TestOtherWritesSendNoKey(t *testing.T) {
	f := newFakeServer(t, okRotate)
	c := testClient(f, newFakeClock())
	if _, err := c.RotateToken(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := f.requests()[0].header.Get("Idempotency-Key"); k != "" {
		t.Errorf("rotate sent Idempotency-Key %q; only POST /messages takes one", k)
	}
}

// A cancelled context ends a wait at once, on the real timer: the 429 asks
// for 30 s, and the context is cancelled as soon as the client waits.
func TestContextCancelEndsTheWait(t *testing.T) {
	f := newFakeServer(t, rateLimited("30"))
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan time.Duration, 1)
	sleep := func(ctx context.Context, d time.Duration) error {
		waiting <- d
		return sleepCtx(ctx, d)
	}
	go func() {
		<-waiting
		cancel()
	}()
	c := New(f.URL+"/api/v1", "kbot_test", WithClock(time.Now, sleep))
	start := time.Now()
	_, err := c.AuthTest(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Generous: the wait it must not make is 30 s.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("returned after %v: the cancel did not end the 30 s wait", d)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// A context cancelled while the request is in flight ends the call with
// the context's error, and it is not retried.
func TestContextCancelEndsTheRequest(t *testing.T) {
	release := make(chan struct{})
	f := newFakeServer(t, okAuthTest)
	f.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		f.serve(w, r)
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	clock := newFakeClock()
	c := testClient(f, clock)
	done := make(chan error, 1)
	go func() { _, err := c.AuthTest(ctx); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if w := clock.slept(); len(w) != 0 {
		t.Errorf("waited %v after the cancel, want no retry", w)
	}
}
