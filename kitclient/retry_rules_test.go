package kitclient

import (
	"context"
	"errors"
	"fmt"
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
