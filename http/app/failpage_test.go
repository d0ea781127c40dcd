package app

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
)

// An error page answers an error as the API answers it: the status of
// kiterr's table, the code, and the Retry-After. The statuses are written
// out here, as docs/api.md "Errors" and docs/decisions.md give them, so that
// the pages cannot drift from the API's error bodies.
func TestErrorPagesAnswerAsTheAPI(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       kiterr.Code
		retryAfter string
	}{
		{"an unavailable partition (an election) is a 503 unavailable page with Retry-After 1",
			kiterr.New(kiterr.Unavailable, "no leader of the partition is known"), 503, kiterr.Unavailable, "1"},
		{"an unavailable answer with its cause wrapped around it is the same 503",
			fmt.Errorf("forward to node-2: %w", kiterr.New(kiterr.Unavailable, "no leader")), 503, kiterr.Unavailable, "1"},
		{"a refusing bucket is a 429 rate_limited page with its wait",
			kiterr.OverLimit(limits.Decision{RetryAfter: 7, Policy: limits.Write}), 429, kiterr.RateLimited, "7"},
		{"a validation error is a 400 page", kiterr.Invalid("channel", "must be a channel id"), 400, kiterr.Validation, ""},
		{"a missing thing is a 404 page", kiterr.Absent("installation"), 404, kiterr.NotFound, ""},
		{"a forbidden action is a 403 page", kiterr.New(kiterr.Forbidden, "not an admin"), 403, kiterr.Forbidden, ""},
		{"a missing scope is a 403 page", kiterr.New(kiterr.MissingScope, "the Kit lacks a scope"), 403, kiterr.MissingScope, ""},
		{"a conflict is a 409 page", kiterr.New(kiterr.Conflict, "the channel is archived"), 409, kiterr.Conflict, ""},
		{"a gone thing is a 410 page", kiterr.New(kiterr.Gone, "the link expired"), 410, kiterr.Gone, ""},
		{"a Kit that did not answer is a 502 page", kiterr.New(kiterr.KitUnavailable, "the Kit did not answer"), 502, kiterr.KitUnavailable, ""},
		{"an internal error is a 500 page", kiterr.New(kiterr.Internal, "disk on fire"), 500, kiterr.Internal, ""},
		{"an error that is not a domain error is a 500 page", errors.New("disk on fire"), 500, kiterr.Internal, ""},
		{"a code of no known status is a 500 page", kiterr.New("made_up", "x"), 500, kiterr.Internal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI("/app/")
			s.failPage(&ctx, tc.err)
			body := string(ctx.Response.Body())
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Fatalf("status %d, want %d: %s", got, tc.status, body)
			}
			if !strings.Contains(body, "<code>"+string(tc.code)+"</code>") {
				t.Fatalf("the page does not name %s: %s", tc.code, body)
			}
			if got := string(ctx.Response.Header.Peek("Retry-After")); got != tc.retryAfter {
				t.Fatalf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if strings.Contains(body, "disk on fire") {
				t.Fatalf("an internal error's detail is shown: %s", body)
			}
		})
	}
}

// OPERATIONS.md section 3: on the authorize pages an unknown Kit is a bad
// request (a 400 page), while elsewhere a missing thing is a 404.
func TestAuthorizePageUnknownKitIsABadRequest(t *testing.T) {
	s := newTestServer(t) // an empty store: every Kit is unknown
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/app/kits/authorize?workspace=0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c&kit=no-such-kit" +
		"&token_type=bot&redirect_uri=https%3A%2F%2Fk.example%2Fcb")
	s.AuthorizePage(&ctx)
	if got := ctx.Response.StatusCode(); got != 400 {
		t.Fatalf("status %d, want 400: %s", got, ctx.Response.Body())
	}
	if body := string(ctx.Response.Body()); !strings.Contains(body, "<code>validation_error</code>") {
		t.Fatalf("want a validation_error page: %s", body)
	}
}
