package kitclient

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestErrorFromAnswer(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  Error
	}{
		{"the error body gives code, message and correlation id",
			reply{status: 404, body: fmt.Sprintf(errorBody, "not_found", "not found: it does not exist or this token cannot see it")},
			Error{Status: 404, Code: "not_found", Message: "not found: it does not exist or this token cannot see it", CorrelationID: "c-1"}},
		{"a validation error's message gives its path",
			reply{status: 400, body: fmt.Sprintf(errorBody, "validation_error", "blocks[3].fields[0].label: must be at most 60 characters")},
			Error{Status: 400, Code: "validation_error", Message: "blocks[3].fields[0].label: must be at most 60 characters", CorrelationID: "c-1", Path: "blocks[3].fields[0].label"}},
		{"a validation message that starts with a sentence has no path",
			reply{status: 400, body: fmt.Sprintf(errorBody, "validation_error", "malformed JSON at byte 3: unexpected end")},
			Error{Status: 400, Code: "validation_error", Message: "malformed JSON at byte 3: unexpected end", CorrelationID: "c-1"}},
		{"only a validation error has a path",
			reply{status: 409, body: fmt.Sprintf(errorBody, "conflict", "conversation: is archived")},
			Error{Status: 409, Code: "conflict", Message: "conversation: is archived", CorrelationID: "c-1"}},
		{"missing_scope names the scope from X-Service-Required-Scope",
			reply{status: 403, header: map[string]string{"X-Service-Required-Scope": "files:read"}, body: fmt.Sprintf(errorBody, "missing_scope", "missing scope")},
			Error{Status: 403, Code: "missing_scope", Message: "missing scope", CorrelationID: "c-1", RequiredScope: "files:read"}},
		{"a 429 carries Retry-After and the bucket",
			rateLimited("31"),
			Error{Status: 429, Code: "rate_limited", Message: "rate limit write exceeded", CorrelationID: "c-1", RetryAfter: 31 * time.Second,
				RateLimit: &RateLimit{Policy: "write", Limit: 50, Window: time.Minute, Remaining: 0, Reset: time.Minute}}},
		{"a body that is not kitd's leaves the code empty",
			reply{status: 502, header: map[string]string{"Content-Type": "text/html"}, body: "<html>bad gateway</html>"},
			Error{Status: 502}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.reply)
			_, err := testClient(f, newFakeClock(), WithRetry(RetryPolicy{MaxAttempts: 1})).AuthTest(context.Background())
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if !reflect.DeepEqual(*e, tt.want) {
				t.Errorf("got  %+v %+v\nwant %+v %+v", *e, e.RateLimit, tt.want, tt.want.RateLimit)
			}
		})
	}
}

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name          string
		policy, limit string
		want          *RateLimit
	}{
		{"both headers", `"post_message";q=5;w=5`, `"post_message";r=4;t=1`, &RateLimit{Policy: "post_message", Limit: 5, Window: 5 * time.Second, Remaining: 4, Reset: time.Second}},
		{"no headers", "", "", nil},
		{"the two name different buckets", `"read";q=1;w=1`, `"write";r=0;t=1`, nil},
		{"a name that is not quoted", `read;q=1;w=1`, `read;r=0;t=1`, nil},
		{"a parameter that is not a number", `"read";q=x;w=1`, `"read";r=0;t=1`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string][]string{}
			if tt.policy != "" {
				h["Ratelimit-Policy"] = []string{tt.policy}
				h["Ratelimit"] = []string{tt.limit}
			}
			got := parseRateLimit(h)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A webhook URL is a credential: no error may show it.
func TestWebhookErrorsHideTheURL(t *testing.T) {
	const secret = "s3cr3t-of-the-hook"
	for _, rp := range []reply{{status: 404, body: fmt.Sprintf(errorBody, "not_found", "not found")}, {hangUp: true}} {
		f := newFakeServer(t, rp)
		err := NewWebhook(f.URL+"/hooks/v1/i/w/"+secret).Post(context.Background(), WebhookMessage{Text: "hi"})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("err = %v: must be an error without the secret", err)
		}
	}
}

func TestWebhookPost(t *testing.T) {
	f := newFakeServer(t, okEmpty)
	hook := NewWebhook(f.URL+"/hooks/v1/i/w/secret", WithHTTPClient(f.Client()))
	if err := hook.Post(context.Background(), WebhookMessage{Text: "Deploy finished", Blocks: []Block{{"type": "divider"}}}); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if r.method != "POST" || r.uri != "/hooks/v1/i/w/secret" || r.header.Get("Authorization") != "" ||
		r.body != `{"text":"Deploy finished","blocks":[{"type":"divider"}]}` {
		t.Errorf("sent %s %s %q %s", r.method, r.uri, r.header.Get("Authorization"), r.body)
	}
}

// A URL that does not parse is not a failure that passes: it is returned
// at once, without an attempt or a wait, and without the URL.
func TestBadURLIsNotRetried(t *testing.T) {
	clock := newFakeClock()
	c := New("http://kitd.example/api/v1\x7f", "kbot_test", WithClock(clock.now, clock.sleep))
	if _, err := c.AuthTest(context.Background()); err == nil || strings.Contains(err.Error(), "kitd.example") {
		t.Errorf("err = %v, want an error that does not show the URL", err)
	}
	if w := clock.slept(); len(w) != 0 {
		t.Errorf("waited %v, want no retry", w)
	}
}
