package kitclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// kitd answers 503 `unavailable` with `Retry-After: 1` (docs/decisions.md
// "Unavailable"; internal/kiterr retryAfter). A retried read must not come
// back before the second the server asked for.
func TestA503sRetryAfterIsWaited(t *testing.T) {
	unavailable := reply{status: 503, header: map[string]string{"Retry-After": "1"},
		body: fmt.Sprintf(errorBody, "unavailable", "no leader yet; retry")}
	f := newFakeServer(t, unavailable, unavailable, okAuthTest)
	clock := newFakeClock()
	if _, err := testClient(f, clock).AuthTest(context.Background()); err != nil {
		t.Fatal(err)
	}
	waits := clock.slept()
	if len(waits) != 2 {
		t.Fatalf("waited %v, want 2 waits", waits)
	}
	for i, w := range waits {
		if w < time.Second {
			t.Errorf("wait %d = %v after a 503 with Retry-After: 1; want at least 1s", i, w)
		}
	}
}

// A context whose deadline comes before the 429's Retry-After: the client
// starts a wait it cannot finish, and the caller gets
// context.DeadlineExceeded instead of the rate_limited *Error and its
// RetryAfter.
func TestA429PastTheDeadlineIsReturnedNotWaitedFor(t *testing.T) {
	f := newFakeServer(t, rateLimited("5"), okAuthTest)
	c := New(f.URL+"/api/v1", "kbot_test")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.AuthTest(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRateLimited || e.RetryAfter != 5*time.Second {
		t.Fatalf("err = %v, want the 429 *Error with RetryAfter 5s, at once", err)
	}
}

// An answer said the read bucket was empty (a token every 15 s), and the
// next call's deadline comes in 5 s: the client sent nothing and waited
// until the deadline, then returned context.DeadlineExceeded. It sends the
// call at once instead, as it does a 429's retry it cannot wait for: the
// server answers it, or refuses it with its Retry-After.
func TestAPacedCallPastTheDeadlineIsSentNotWaitedFor(t *testing.T) {
	empty := reply{status: 200, header: map[string]string{"RateLimit-Policy": `"read";q=4;w=60`, "RateLimit": `"read";r=0;t=60`}, body: okAuthTest.body}
	f := newFakeServer(t, empty, okAuthTest)
	c := New(f.URL+"/api/v1", "kbot_test")
	if _, err := c.AuthTest(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.AuthTest(ctx); err != nil {
		t.Fatalf("err = %v, want the call sent and answered", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// A token or an Idempotency-Key that no HTTP header can carry (a token read
// from a file with its newline) fails before anything is sent, the same way
// each time: it is returned at once, like a URL that does not parse,
// never retried, and without the value (a token is a credential).
func TestAHeaderValueNoRequestCanCarryIsNotRetried(t *testing.T) {
	tests := []struct {
		name, token, value string
		call               func(*Client) error
	}{
		{"a token with a newline", "kbot_test\n", "kbot_test", func(c *Client) error {
			_, err := c.AuthTest(context.Background())
			return err
		}},
		{"an Idempotency-Key with a control character", "kbot_test", "key\x01", func(c *Client) error {
			_, err := c.PostMessage(context.Background(), PostMessage{ConversationID: "c", Text: "hi", IdempotencyKey: "key\x01"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, okAuthTest)
			clock := newFakeClock()
			c := New(f.URL+"/api/v1", tt.token, WithClock(clock.now, clock.sleep))
			err := tt.call(c)
			if err == nil || strings.Contains(err.Error(), tt.value) {
				t.Errorf("err = %v, want an error that does not show the value", err)
			}
			if w := clock.slept(); len(w) != 0 {
				t.Errorf("waited %v, want no retry", w)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests reached the server, want none", n)
			}
		})
	}
}
