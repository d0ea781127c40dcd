package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// RFC 9112 7.1 and 8: a chunked body ends with its zero-size last chunk
// and the blank line after its trailers; a connection that ends before them
// ended the request before its body did, as one that ends before
// Content-Length bytes. Such a request is not served: 400 "malformed HTTP
// request" (docs/decisions.md "Request heads"), and nothing is made.
func TestStrict_BodyCutByTheConnection(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	body := `{"name":"cut-` + randHex(4) + `"}`
	chunk := strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n"
	head := "POST /ops/v1/workspaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.OpToken + "\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct {
		name   string
		req    string
		status int
	}{
		{"a whole chunked body, then the end of the connection, is served", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk + "0\r\n\r\n", 201},
		{"a Content-Length body cut short is 400", head + "Content-Length: " + strconv.Itoa(len(body)+5) + "\r\n\r\n" + body, 400},
		{"a chunked body cut inside a chunk is 400", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk[:len(chunk)-4], 400},
		{"a chunked body cut before its last chunk is 400", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk, 400},
		{"a chunked body cut after its last chunk's size line is 400", head + "Transfer-Encoding: chunked\r\n\r\n" + chunk + "0\r\n", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			// The client is done sending: the server reads the end of the
			// connection where the rest of the body was due.
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", res.StatusCode, got, tc.status)
			}
		})
	}
}

// docs/decisions.md "Request heads": a head line ended by a bare LF is
// refused at once, 400 and closed, however its bytes are split over TCP
// segments; a CRLF split between two segments is a CRLF. A refused head's
// bare LF is in its last part: a write after the refusal would meet the
// closed connection, whose reset may discard the answer before it is read.
func TestStrict_BareLFInAHead(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, tc := range []struct {
		name   string
		parts  []string // written one by one
		status int
	}{
		{"a request line ended by a bare LF is 400 at once", []string{"GET /healthz HTTP/1.1\n"}, 400},
		{"a header line ended by a bare LF in a later segment is 400 at once", []string{"GET /healthz HTTP/1.1\r\n", "Host: x\n"}, 400},
		{"a CRLF split over two writes is a CRLF", []string{"GET /healthz HTTP/1.1\r", "\nHost: x\r", "\n\r", "\n"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			c.(*net.TCPConn).SetNoDelay(true)
			for _, p := range tc.parts {
				if _, err := io.WriteString(c, p); err != nil {
					t.Fatal(err)
				}
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", res.StatusCode, got, tc.status)
			}
		})
	}
}
