package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// docs/api.md "Token type per method": a token type that cannot call a method
// gets 403 forbidden, the user token on the developer API included.
func TestStrict_DevAPITokenTypes(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	userTok := userToken(t, env.In, env.W.Owner.ID)
	for _, tc := range []struct{ name, method, path string }{
		{"a user token on GET /dev/me is 403 forbidden", "GET", "/dev/me"},
		{"a user token on GET /dev/kits is 403 forbidden", "GET", "/dev/kits"},
		{"a user token on GET /dev/kits/{kitId} is 403 forbidden", "GET", "/dev/kits/" + env.Kit.ID},
		{"a user token on POST /dev/kits/validate is 403 forbidden", "POST", "/dev/kits/validate"},
		{"a user token on POST /dev/sandbox/dev-install is 403 forbidden", "POST", "/dev/sandbox/dev-install"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, s.api(t, userTok, tc.method, tc.path, nil, nil), 403, "forbidden")
		})
	}
}

// rawExchange sends req byte for byte on a new connection, half-closes
// it and reads the whole answer: a reset instead of an answer fails.
func rawExchange(t *testing.T, s *Server, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The server may answer before it read everything: write in the
	// background so that the answer is read while the request is sent.
	go func() {
		io.WriteString(c, req)
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v (want an HTTP answer, not a reset)", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v (want the whole body, not a reset)", err)
	}
	return res, body
}

// docs/decisions.md "Request heads": a head over 16 KiB answers 431, a
// request URL over 8 KiB 414, each with the error body, never a reset.
func TestStrict_HeadLimits(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	sentinel := "zzSENTINEL" + randHex(4)
	for _, tc := range []struct {
		name   string
		req    string
		status int
		code   string
	}{
		{"a header of 20 KiB is 431 header_too_large",
			"GET /api/v1/auth/test HTTP/1.1\r\nHost: x\r\nX-Big: " + sentinel + strings.Repeat("a", 20<<10) + "\r\n\r\n", 431, "header_too_large"},
		{"a header of 1 MiB is 431 header_too_large, not a reset",
			"POST /hooks/v1/a/b/c HTTP/1.1\r\nHost: x\r\nX-Big: " + sentinel + strings.Repeat("a", 1<<20) + "\r\n\r\n", 431, "header_too_large"},
		{"a head of 200 small headers over 16 KiB is 431 header_too_large",
			"GET /api/v1/auth/test HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Many: "+sentinel+strings.Repeat("b", 80)+"\r\n", 200) + "\r\n", 431, "header_too_large"},
		{"a URL of 9 KiB is 414 uri_too_long",
			"GET /api/v1/auth/test?q=" + sentinel + strings.Repeat("c", 9<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := rawExchange(t, s, tc.req)
			r := &Resp{Status: res.StatusCode, Header: res.Header, Body: body}
			if json.Unmarshal(body, &r.JSON) != nil {
				t.Fatalf("want a JSON error body, got %d %q", res.StatusCode, clip(string(body), 200))
			}
			wantError(t, r, tc.status, tc.code)
			noEcho(t, r, sentinel)
		})
	}
	t.Run("a URL of 8 KiB and a head of 15 KiB are answered as usual", func(t *testing.T) {
		r := s.do(t, "GET", "/api/v1/auth/test?q="+strings.Repeat("d", 8<<10-len("/api/v1/auth/test?q=")), "", nil,
			map[string]string{"X-Pad": strings.Repeat("e", 6<<10)})
		wantError(t, r, 401, "invalid_token")
	})
}

// docs/decisions.md "Request bodies": keys are case-sensitive (a key that
// is no field is ignored, however it folds), a key given twice in one object
// is refused at its path, at any depth, and no error names a submitted key.
// Nothing is posted by a refused body.
func TestStrict_BodyKeys(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	_, c, in := webhookEnv(t, s, 5)
	h := in.hook(t, c.ID)
	sentinel := "zzSentinel" + randHex(4)
	conv := fmt.Sprintf("%q", c.ID)
	text := func(s string) string { return fmt.Sprintf("%q", s) }
	divider := `[{"type":"divider"}]`

	for _, tc := range []struct {
		name, method, path, token, body, wantPath string
	}{
		{"POST /messages: keys in another case are not fields", "POST", "/api/v1/messages", in.Token,
			`{"ConversationID":` + conv + `,"TEXT":` + text(sentinel) + `}`, "conversationId"},
		{"POST /messages: a case variant of text does not post", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"Text":` + text(sentinel) + `}`, "text"},
		{"POST /messages: a repeated text is refused", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":"a","text":` + text(sentinel) + `}`, "text"},
		{"POST /messages with blocks: a repeated text is refused", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"blocks":` + divider + `,"text":"a","text":` + text(sentinel) + `}`, "text"},
		{"POST /messages: a repeated conversationId is refused", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":` + text(sentinel) + `,"conversationId":` + conv + `}`, "conversationId"},
		{"POST /messages: a repeated key inside blocks is refused at its path", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":` + text(sentinel) + `,"blocks":[{"type":"header","text":"a","text":"b"}]}`, "blocks[0].text"},
		{"POST /messages: a repeated unknown key is refused, unnamed", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":"x","` + sentinel + `":1,"` + sentinel + `":2}`, ""},
		{"POST /messages: a repeated key in an unknown key's object is refused", "POST", "/api/v1/messages", in.Token,
			`{"conversationId":` + conv + `,"text":"x","extra":{"` + sentinel + `":1,"` + sentinel + `":2}}`, ""},
		{"webhook: a repeated text is refused", "POST", h.Path, "",
			`{"text":"a","text":` + text(sentinel) + `}`, "text"},
		{"webhook: TEXT is not text", "POST", h.Path, "",
			`{"TEXT":` + text(sentinel) + `}`, "text"},
		{"webhook: a repeated ignored key is refused, unnamed", "POST", h.Path, "",
			`{"text":"x","` + sentinel + `":1,"` + sentinel + `":2}`, ""},
		{"developer API: a repeated manifest is refused", "POST", "/api/v1/dev/kits/validate", in.W.Dev,
			`{"manifest":"{}","manifest":` + text(sentinel) + `}`, "manifest"},
		{"developer API: Manifest is not manifest", "POST", "/api/v1/dev/kits/validate", in.W.Dev,
			`{"Manifest":` + text(sentinel) + `}`, "manifest"},
		{"operator API: a repeated name is refused", "POST", "/ops/v1/workspaces", s.OpToken,
			`{"name":"a","name":` + text(sentinel) + `}`, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, tc.token, raw(tc.body), nil)
			wantValidation(t, r, tc.wantPath, sentinel)
		})
	}
	t.Run("nothing was posted", func(t *testing.T) {
		for _, m := range history(t, in, c.ID) {
			if strings.Contains(fmt.Sprint(m), sentinel) {
				t.Fatalf("a refused body was posted: %v", m)
			}
		}
	})
}
