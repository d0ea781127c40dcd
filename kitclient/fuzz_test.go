package kitclient

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzError: any answer is read without a panic; the code comes only from
// a JSON object, a path only from a validation error's message, and no
// wait or bucket value is negative.
func FuzzError(f *testing.F) {
	for _, s := range []struct {
		status                    int
		body, retry, policy, left string
	}{
		{400, `{"code":"validation_error","message":"blocks[0].text: is required","correlationId":"c"}`, "", "", ""},
		{429, `{"code":"rate_limited","message":"slow down","correlationId":"c"}`, "7", `"write";q=50;w=60`, `"write";r=0;t=60`},
		{429, `{"code":"rate_limited"}`, "9223372036854775807", `"read";q=9223372036854775807;w=1`, `"read";r=0;t=1`},
		{502, `<html>bad gateway</html>`, "-1", `"x";q=1;w=`, `"x"`},
		{200, ``, "", `"read";q=1;w=9223372036854775807`, `"read";r=0;t=9223372036854775807`},
		{400, `{"code":"validation_error","message":": x"}`, " 3 ", `""`, `"";r=1`},
	} {
		f.Add(s.status, []byte(s.body), s.retry, s.policy, s.left)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, retry, policy, left string) {
		h := http.Header{}
		h.Set("Retry-After", retry)
		h.Set("RateLimit-Policy", policy)
		h.Set("RateLimit", left)
		rl := parseRateLimit(h)
		e := newError(&http.Response{StatusCode: status, Header: h}, body, rl)
		if e.Code != "" && (!json.Valid(body) || bytes.TrimSpace(body)[0] != '{') {
			t.Fatalf("%q: code %q from an answer that is no JSON object", body, e.Code)
		}
		if e.Path != "" && (e.Code != CodeValidation || !strings.HasPrefix(e.Message, e.Path+": ")) {
			t.Fatalf("path %q of %s %q", e.Path, e.Code, e.Message)
		}
		if e.RetryAfter < 0 {
			t.Fatalf("Retry-After %q read as %v", retry, e.RetryAfter)
		}
		if rl != nil && (rl.Limit < 0 || rl.Window < 0 || rl.Remaining < 0 || rl.Reset < 0 || rl.nextToken() < 0) {
			t.Fatalf("%q %q read as %+v", policy, left, rl)
		}
		_ = e.Error()
	})
}
