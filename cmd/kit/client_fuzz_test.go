package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzAPIError: the CLI reads any error answer without panicking; it takes
// a code only from a JSON object, a
// Retry-After only when it is a positive number of seconds, and words an
// answer that is not a kitd error body without repeating it (a proxy's
// page is not dumped into the terminal).
func FuzzAPIError(f *testing.F) {
	const secret = "zqSECRETqz"
	for _, s := range []struct {
		status      int
		body, retry string
	}{
		{404, `{"code":"not_found","message":"kit not found","correlationId":"c-1"}`, ""},
		{429, `{"code":"rate_limited","message":"slow down","correlationId":"c-2"}`, "7"},
		{502, `<html>` + secret + `</html>`, ""},
		{400, `{"code":"","message":"` + secret + `"}`, " 3 "},
		{400, `{"code":1,"message":"` + secret + `"}`, "-1"},
		{500, `["code"]`, "999999999999999999999"},
		{503, `{"code":"x","code":null}`, "Wed, 21 Oct 2026 07:28:00 GMT"},
		{400, `{"code":"x","message":1}`, ""},
		{400, `{"CODE":"x"}`, ""},
	} {
		f.Add(s.status, []byte(s.body), s.retry)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, retry string) {
		res := &http.Response{StatusCode: status, Header: http.Header{}}
		res.Header.Set("Retry-After", retry)
		e := apiError(res, body)
		if e.Status != status {
			t.Fatalf("status %d, want %d", e.Status, status)
		}
		if trimmed := bytes.TrimSpace(body); e.Code != "" && (!json.Valid(body) || trimmed[0] != '{') {
			t.Fatalf("%q: code %q from an answer that is no JSON object", body, e.Code)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(res.Header.Get("Retry-After"))); err == nil && n > 0 {
			if e.RetryAfter != n {
				t.Fatalf("Retry-After %q read as %d", retry, e.RetryAfter)
			}
		} else if e.RetryAfter != 0 {
			t.Fatalf("Retry-After %q read as %d", retry, e.RetryAfter)
		}
		if e.Code == "" && strings.Contains(string(body), secret) && strings.Contains(e.Error(), secret) {
			t.Fatalf("%q: %q repeats an answer that is no error body", body, e.Error())
		}
	})
}
