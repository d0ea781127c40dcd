package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
			res, err := http.ReadResponse(sendRaw(t, "GET "+tt.target+" HTTP/1.1\r\nHost: x\r\nX-Pad: "+tt.header+"\r\n\r\n"), nil)
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

// TestRequestFraming: a request must have one body length. RFC 9112 6.1: a
// request with both Transfer-Encoding and Content-Length may be read by
// its Transfer-Encoding alone or refused, and the connection must be
// closed after the answer either way: a proxy in front that framed it by
// its Content-Length would take the rest of the body for a request of its
// own (request smuggling). kitd refuses it, as it does two Content-Lengths.
func TestRequestFraming(t *testing.T) {
	const next = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	chunked := "0\r\n\r\n"
	tests := []struct {
		name   string
		head   string
		body   string
		status int
		code   string
		closed bool // the connection closes after the answer
	}{
		{"Content-Length alone frames the body", "Content-Length: 5\r\n", "hello", 200, "", false},
		{"Transfer-Encoding alone frames the body", "Transfer-Encoding: chunked\r\n", chunked, 200, "", false},
		{"Content-Length with Transfer-Encoding is refused and closes",
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", chunked, 400, "validation_error", true},
		{"Transfer-Encoding with Content-Length is refused and closes",
			"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", chunked, 400, "validation_error", true},
		{"a lower-case content-length with Transfer-Encoding is refused and closes",
			"transfer-encoding: chunked\r\ncontent-length: 5\r\n", chunked, 400, "validation_error", true},
		{"Transfer-Encoding identity with Content-Length is refused and closes",
			"Transfer-Encoding: identity\r\nContent-Length: 5\r\n", "hello", 400, "validation_error", true},
		{"two Content-Lengths are refused and close", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello", 400, "validation_error", true},
		// RFC 9112 6.3: a Transfer-Encoding whose final coding is not
		// chunked leaves the length unknown: 400, and the connection
		// closes. Read as bodiless, "hello" began the next request.
		{"Transfer-Encoding identity alone is refused and closes", "Transfer-Encoding: identity\r\n", "hello", 400, "validation_error", true},
		{"Transfer-Encoding identity alone with an empty body is refused and closes", "Transfer-Encoding: identity\r\n", "", 400, "validation_error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := sendRaw(t, "POST /healthz HTTP/1.1\r\nHost: x\r\n"+tt.head+"\r\n"+tt.body+next)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", res.StatusCode, body, tt.status)
			}
			if tt.code != "" {
				var e struct{ Code string }
				if json.Unmarshal(body, &e) != nil || e.Code != tt.code {
					t.Fatalf("got %s, want code %s", body, tt.code)
				}
			}
			second, err := http.ReadResponse(br, nil)
			switch {
			case tt.closed && err == nil:
				t.Fatalf("the connection stayed open: the bytes after the body were answered as a request (%d)", second.StatusCode)
			case tt.closed && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("after the answer: %v, want the connection closed", err)
			case !tt.closed && err != nil:
				t.Fatalf("the next request on the connection: %v", err)
			}
		})
	}
}

// sendRaw writes raw to a new connection to the test server and returns
// a reader of what it answers; the connection closes with the test.
func sendRaw(t *testing.T, raw string) *bufio.Reader {
	t.Helper()
	c, err := ts.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, raw)
	return bufio.NewReader(c)
}

// TestExpectContinue: RFC 9110 10.1.1, a client that sends "Expect:
// 100-continue" waits for the 100 before it sends the body, so that a
// request refused on its head costs no body. A body kitd refuses on its
// head alone (docs/decisions.md "Request heads", "Web API" request body
// limits) is answered with its final status instead of the 100, the
// connection closing; any other body is invited.
func TestExpectContinue(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		body   string // sent with the head: the expectation is not one
		status int
		code   string
	}{
		{"a body within the limit is invited with 100 Continue",
			"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n", "", 100, ""},
		// RFC 9110 10.1.1: the value is case-insensitive.
		{"100-Continue in capitals is invited with 100 Continue",
			"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n", "", 100, ""},
		{"100-continue in a list is invited with 100 Continue",
			"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: foo, 100-CONTINUE\r\nContent-Length: 5\r\n", "", 100, ""},
		{"100-continue in a second Expect line is invited with 100 Continue",
			"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nExpect: 100-continue\r\nContent-Length: 5\r\n", "", 100, ""},
		{"a body over the server's limit is 413 before the body is sent",
			"POST /api/v1/files HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 20000000\r\n", "", 413, "payload_too_large"},
		{"a webhook body over its limit is 413 before the body is sent",
			"POST /hooks/v1/a/b/c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 300000\r\n", "", 413, "payload_too_large"},
		{"a body length said twice is 400 before the body is sent",
			"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n", "", 400, "validation_error"},
		// RFC 9110 10.1.1 and 15.2: an HTTP/1.0 request's expectation is
		// ignored, and an HTTP/1.0 client is never sent a 1xx.
		{"an HTTP/1.0 request's 100-continue is ignored: no 100, the body is read",
			"POST /healthz HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n", "hello", 200, ""},
		{"an upper-case 100-Continue over the limit is 413 before the body is sent",
			"POST /api/v1/files HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 20000000\r\n", "", 413, "payload_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The head alone: the body waits for the 100.
			res, err := http.ReadResponse(sendRaw(t, tt.head+"\r\n"+tt.body), nil)
			if err != nil {
				t.Fatalf("no answer to the head: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("got %d before the body, want %d", res.StatusCode, tt.status)
			}
			if tt.code == "" {
				return
			}
			var e struct{ Code, CorrelationID string }
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil || e.Code != tt.code || e.CorrelationID == "" {
				t.Fatalf("got %+v (%v), want code %s with a correlationId", e, err, tt.code)
			}
			if !res.Close {
				t.Fatal("the connection stays open: the body the client may send would be read as a request")
			}
		})
	}
}

// TestBareLF: RFC 9112 2.2 lets a server take a bare LF for a line's end or
// refuse the message; fasthttp finds a head's end only at CRLFCRLF, so a
// head ended by bare LFs was neither: the connection waited for the read
// timeout. kitd refuses a bare LF in a head at once, 400 and closed, as a
// proxy in front may end the lines otherwise (docs/decisions.md "Request
// heads"); one in a body is the body's.
func TestBareLF(t *testing.T) {
	const next = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name   string
		raw    string
		first  int // the status of the first answer; 0: none before the 400
		status int
		closed bool
	}{
		{"a head whose lines all end with a bare LF is refused at once", "GET /healthz HTTP/1.1\nHost: x\n\n", 0, 400, true},
		{"a head whose last line ends with a bare LF is refused at once", "GET /healthz HTTP/1.1\r\nHost: x\n\r\n", 0, 400, true},
		{"a head whose blank line is a bare LF is refused at once", "GET /healthz HTTP/1.1\r\nHost: x\r\n\n", 0, 400, true},
		{"a request line ended by a bare LF is refused", "GET /healthz HTTP/1.1\nHost: x\r\n\r\n", 0, 400, true},
		{"a header line ended by a bare LF is refused", "GET /healthz HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", 0, 400, true},
		{"a bare-LF head followed by a request is refused, not served", "GET /healthz HTTP/1.1\nHost: x\n\n" + next, 0, 400, true},
		{"a later request's header line ended by a bare LF is refused", next + "GET /healthz HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", 200, 400, true},
		{"a bare LF in a body is the body's", "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\na\n\nb" + next, 200, 200, false},
		{"empty lines before the request line are skipped", "\r\n" + next, 0, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := sendRaw(t, tt.raw)
			if tt.first != 0 {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("no first answer: %v", err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != tt.first {
					t.Fatalf("first answer %d, want %d", res.StatusCode, tt.first)
				}
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", res.StatusCode, body, tt.status)
			}
			if tt.status == 400 {
				var e struct{ Code, CorrelationID string }
				if json.Unmarshal(body, &e) != nil || e.Code != "validation_error" || e.CorrelationID == "" {
					t.Fatalf("got %s, want validation_error with a correlationId", body)
				}
			}
			if !tt.closed {
				return
			}
			if _, err := http.ReadResponse(br, nil); err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("after the answer: %v, want the connection closed", err)
			}
		})
	}
}
