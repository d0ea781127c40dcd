package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHeadLimits: docs/decisions.md "Request heads".
func TestHeadLimits(t *testing.T) {
	long := func(n int) string { return "/api/v1/auth/test?q=" + strings.Repeat("a", n-len("/api/v1/auth/test?q=")) }
	tests := []struct {
		name   string
		target string
		header string
		status int
		code   string
	}{
		{"a URL of 8 KiB is routed", long(maxURL), "", 401, "invalid_token"},
		{"a URL over 8 KiB is 414 uri_too_long", long(maxURL + 1), "", 414, "uri_too_long"},
		{"a head of 15 KiB is read", "/api/v1/auth/test", strings.Repeat("b", 15<<10), 401, "invalid_token"},
		{"a head over 16 KiB is 431 header_too_large", "/api/v1/auth/test", strings.Repeat("b", maxHead), 431, "header_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ts.ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go io.WriteString(c, "GET "+tt.target+" HTTP/1.1\r\nHost: x\r\nX-Pad: "+tt.header+"\r\n\r\n")
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer res.Body.Close()
			var body struct{ Code, Message, CorrelationID string }
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if res.StatusCode != tt.status || body.Code != tt.code || body.CorrelationID == "" {
				t.Fatalf("got %d %+v, want %d %s with a correlationId", res.StatusCode, body, tt.status, tt.code)
			}
		})
	}
}
