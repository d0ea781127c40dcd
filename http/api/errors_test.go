package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/kiterr/kiterrtest"
)

// sentinel is a value that must never come back in an error body.
const sentinel = "SENTINEL-7f3a9c"

func TestDecodeJSON(t *testing.T) {
	type nested struct {
		Inner struct {
			Count *int `json:"count"`
		} `json:"inner"`
	}
	tests := []struct {
		name     string
		body     string
		into     func() any
		wantPath string // "-": no error
		wantMsg  string
	}{
		{"a valid body decodes", `{"text":"hi","conversationId":"x"}`, func() any { return &postBody{} }, "-", ""},
		{"unknown keys are ignored", `{"text":"hi","extra":{"a":[1,2]}}`, func() any { return &postBody{} }, "-", ""},
		{"a number where a string belongs names the field", `{"text":5}`, func() any { return &postBody{} }, "text", "must be of type string"},
		{"an object where a string belongs names the field", `{"conversationId":{"id":"` + sentinel + `"}}`, func() any { return &postBody{} }, "conversationId", "must be of type string"},
		{"a string where a boolean belongs names the field", `{"publish":"` + sentinel + `"}`, func() any {
			return &struct {
				Publish *bool `json:"publish"`
			}{}
		}, "publish", "must be of type boolean"},
		{"a string where a number belongs names the field", `{"seconds":"` + sentinel + `"}`, func() any {
			return &struct {
				Seconds *float64 `json:"seconds"`
			}{}
		}, "seconds", "must be of type number"},
		{"a string where an array belongs names the field", `{"memberIds":"` + sentinel + `"}`, func() any {
			return &struct {
				MemberIDs *[]string `json:"memberIds"`
			}{}
		}, "memberIds", "must be of type array"},
		{"a wrong array item names the array", `{"memberIds":["a",7]}`, func() any {
			return &struct {
				MemberIDs *[]string `json:"memberIds"`
			}{}
		}, "memberIds", "must be of type string"},
		{"a nested type error names the full path", `{"inner":{"count":"` + sentinel + `"}}`, func() any { return &nested{} }, "inner.count", "must be of type number"},
		{"a fraction where an integer belongs says so", `{"inner":{"count":1.7357}}`, func() any { return &nested{} }, "inner.count", "must be an integer"},
		{"an exponent where an integer belongs says so", `{"inner":{"count":7357e3}}`, func() any { return &nested{} }, "inner.count", "must be an integer"},
		{"an integer past the field's range is out of range", `{"inner":{"count":73579999999999999999}}`, func() any { return &nested{} }, "inner.count", "is out of range"},
		{"a number past float64 is out of range", `{"seconds":7357e700}`, func() any {
			return &struct {
				Seconds *float64 `json:"seconds"`
			}{}
		}, "seconds", "is out of range"},
		{"a negative number where a count belongs says so", `{"n":-7357}`, func() any {
			return &struct {
				N *uint32 `json:"n"`
			}{}
		}, "n", "must not be negative"},
		{"an array body is not an object", `["` + sentinel + `"]`, func() any { return &postBody{} }, "", "must be a JSON object"},
		{"a string body is not an object", `"` + sentinel + `"`, func() any { return &postBody{} }, "", "must be a JSON object"},
		{"a number body is not an object", `42`, func() any { return &postBody{} }, "", "must be a JSON object"},
		{"a syntax error gives the offset only", `{"text":"` + sentinel + `",}`, func() any { return &postBody{} }, "", "malformed JSON at byte"},
		{"an unterminated body is malformed", `{"text":"` + sentinel, func() any { return &postBody{} }, "", "malformed JSON"},
		{"trailing data is malformed", `{"text":"a"} {"text":"` + sentinel + `"}`, func() any { return &postBody{} }, "", "malformed JSON"},
		{"invalid UTF-8 inside a string is replaced, not refused", "{\"text\":\"\xff\"}", func() any { return &postBody{} }, "-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := input.DecodeJSON([]byte(tt.body), tt.into())
			kiterrtest.WantPath(t, err, tt.wantPath)
			if err == nil {
				return
			}
			msg := err.(*kiterr.Error).Message
			if !strings.Contains(msg, tt.wantMsg) {
				t.Fatalf("message %q, want it to contain %q", msg, tt.wantMsg)
			}
			if strings.Contains(err.Error(), sentinel) || strings.Contains(err.Error(), "SENTINEL") || strings.Contains(err.Error(), "7357") {
				t.Fatalf("error echoes the input: %q", err.Error())
			}
		})
	}
}

func TestFailWritesTheErrorBody(t *testing.T) {
	s := New(Config{Logger: discardLogger()})
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   kiterr.Code
		wantAuth   string
	}{
		{"a validation error is 400", kiterr.Invalid("text", "must not be empty"), 400, kiterr.Validation, ""},
		{"an invalid token is 401 with the error attribute", kiterr.New(kiterr.InvalidToken, "bad"), 401, kiterr.InvalidToken, `Bearer realm="kit", error="invalid_token"`},
		{"a code without a status is 500", kiterr.New("no_such_code", "x"), 500, "no_such_code", ""},
		{"an error that is not a domain error is a 500 without detail", os.ErrPermission, 500, kiterr.Internal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			s.fail(ctx, tt.err)
			if got := ctx.Response.StatusCode(); got != tt.wantStatus {
				t.Fatalf("status %d, want %d", got, tt.wantStatus)
			}
			if got := string(ctx.Response.Header.Peek("WWW-Authenticate")); got != tt.wantAuth {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tt.wantAuth)
			}
			var body map[string]any
			if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
				t.Fatalf("body %q: %v", ctx.Response.Body(), err)
			}
			if body["code"] != string(tt.wantCode) || body["message"] == "" || body["correlationId"] == "" || len(body) != 3 {
				t.Fatalf("body %v", body)
			}
			if strings.Contains(string(ctx.Response.Body()), os.ErrPermission.Error()) {
				t.Fatalf("an internal error leaks its detail: %s", ctx.Response.Body())
			}
		})
	}
	t.Run("correlation ids differ per error", func(t *testing.T) {
		seen := map[string]bool{}
		for range 100 {
			id := s.correlationID()
			if seen[id] {
				t.Fatalf("correlation id %q repeats", id)
			}
			seen[id] = true
		}
	})
}

// An answer that asks for a retry says when (docs/decisions.md
// "Unavailable"): Retry-After comes from the code's entry in kiterr's table,
// or from the refusing bucket.
func TestFailSaysWhenToRetry(t *testing.T) {
	s := New(Config{Logger: discardLogger()})
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantRetry  string
	}{
		{"unavailable is 503 with Retry-After 1", kiterr.New(kiterr.Unavailable, "no leader"), 503, "1"},
		{"a wrapped unavailable is the same answer", fmt.Errorf("request x/y: %w", kiterr.New(kiterr.Unavailable, "no leader")), 503, "1"},
		{"a conflict has no Retry-After", kiterr.New(kiterr.Conflict, "no"), 409, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			s.fail(ctx, tt.err)
			if got := ctx.Response.StatusCode(); got != tt.wantStatus {
				t.Fatalf("status %d, want %d", got, tt.wantStatus)
			}
			if got := string(ctx.Response.Header.Peek("Retry-After")); got != tt.wantRetry {
				t.Fatalf("Retry-After %q, want %q", got, tt.wantRetry)
			}
		})
	}
}

// An internal error is logged by its route's pattern: the path as sent is
// never in the log (a webhook URL's last segment is its secret).
func TestFailLogsNoPath(t *testing.T) {
	const secret = "SECRETSEGMENT0123456789abcdefghijklmnopqrstu"
	hook := ids.New() + "/" + ids.New() + "/" + secret
	var hookRoute *route
	for i := range routes {
		if routes[i].host == hostHooks {
			hookRoute = &routes[i]
		}
	}
	tests := []struct {
		name, path string
		rt         *route
		wantRoute  string
	}{
		{"a webhook post is logged by its pattern", "/hooks/v1/" + hook, hookRoute, "POST /hooks/v1/{installationId}/{webhookId}/{secret}"},
		{"a request without its route is logged as none", "/hooks/v1/" + hook, nil, "no route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged bytes.Buffer
			s := New(Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI(tt.path)
			s.failRoute(ctx, tt.rt, os.ErrPermission)
			if strings.Contains(logged.String(), secret) {
				t.Fatalf("the log has the path as sent: %s", logged.String())
			}
			if !strings.Contains(logged.String(), "route="+strconv.Quote(tt.wantRoute)) {
				t.Fatalf("the log does not name %q: %s", tt.wantRoute, logged.String())
			}
		})
	}
}
