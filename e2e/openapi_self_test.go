package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestOpenAPICheckerCatchesDrift feeds the conformance check made-up
// exchanges, no server involved, so that a check that accepts everything
// cannot pass for a document that matches everything.
func TestOpenAPICheckerCatchesDrift(t *testing.T) {
	if err := conformance.load(); err != nil {
		t.Fatal(err)
	}
	jsonHdr := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	id := newUUID()
	authTest := `{"ok":true,"tokenType":"bot","workspaceId":"` + id + `","installationId":"` + id + `","kitSlug":"k1","botId":"` + id + `","userId":null,"scopes":[]}`
	notFound := `{"code":"not_found","message":"route not found","correlationId":"c-1"}`
	cases := []struct {
		name string
		r    Resp
		want string // "" = conforms; else a substring of the failure
	}{
		{"a documented answer conforms",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 200, Header: jsonHdr(), Body: []byte(authTest)}, ""},
		{"rate-limit headers are checked",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 200, Header: jsonHdr("RateLimit-Policy", "read;q=100;w=60"), Body: []byte(authTest)}, "RateLimit-Policy"},
		{"a missing required field fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 200, Header: jsonHdr(), Body: []byte(strings.Replace(authTest, `"kitSlug":"k1",`, "", 1))}, "does not match"},
		{"a field the document lacks fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 200, Header: jsonHdr(), Body: []byte(strings.Replace(authTest, `"ok":true`, `"ok":true,"extra":1`, 1))}, "does not match"},
		{"an undocumented status fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 418, Header: jsonHdr(), Body: []byte(notFound)}, "status is not supported"},
		{"an error code outside the answer's codes fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 400, Header: jsonHdr(), Body: []byte(notFound)}, "does not match"},
		{"a 401 without WWW-Authenticate fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 401, Header: jsonHdr(), Body: []byte(`{"code":"invalid_token","message":"m","correlationId":"c"}`)}, "WWW-Authenticate"},
		{"a 429 without Retry-After fails",
			Resp{Method: "GET", Path: "/api/v1/users", Status: 429, Header: jsonHdr(), Body: []byte(`{"code":"rate_limited","message":"m","correlationId":"c"}`)}, "Retry-After"},
		{"a 403 missing_scope without X-Service-Required-Scope fails",
			Resp{Method: "GET", Path: "/api/v1/users", Status: 403, Header: jsonHdr(), Body: []byte(`{"code":"missing_scope","message":"m","correlationId":"c"}`)}, "X-Service-Required-Scope"},
		{"an unknown route's generic 404 conforms",
			Resp{Method: "GET", Path: "/api/v1/nothing/here", Status: 404, Header: jsonHdr(), Body: []byte(notFound)}, ""},
		{"an undocumented route that answers 200 fails",
			Resp{Method: "GET", Path: "/api/v1/nothing/here", Status: 200, Header: jsonHdr(), Body: []byte(`{}`)}, "documents no operation"},
		{"an undocumented method fails unless 404",
			Resp{Method: "PUT", Path: "/api/v1/messages/" + id, Status: 200, Header: jsonHdr(), Body: []byte(`{}`)}, "documents no operation"},
		{"a refused request answered with its documented error conforms",
			Resp{Method: "POST", Path: "/api/v1/messages", ReqHeader: jsonHdr(), ReqBody: []byte(`{"text":5}`), Status: 400, Header: jsonHdr(),
				Body: []byte(`{"code":"validation_error","message":"text: must be of type string","correlationId":"c"}`)}, ""},
		{"a refused request answered 2xx fails",
			Resp{Method: "POST", Path: "/api/v1/reactions", ReqHeader: jsonHdr(), ReqBody: []byte(`{"messageId":"` + id + `","reaction":"sad"}`), Status: 200, Header: jsonHdr(),
				Body: []byte(`{"ok":true}`)}, "refuses"},
		{"the developer API is checked against devapi.json",
			Resp{Method: "GET", Path: "/api/v1/dev/kits", Status: 200, Header: jsonHdr(), Body: []byte(`{"kits":[{"kitId":"` + id + `"}]}`)}, "devapi.json"},
		{"a message's blocks are checked",
			Resp{Method: "GET", Path: "/api/v1/messages/" + id, Status: 200, Header: jsonHdr(), Body: []byte(`{"message":{"id":"` + id + `","conversationId":"` + id +
				`","author":{"kind":"bot","id":"` + id + `"},"text":"t","blocks":[{"type":"marquee"}],"threadParentId":null,"createdAt":"2026-01-01T00:00:00.000Z","editedAt":null,"deletedAt":null,"reactions":[]}}`)}, "does not match"},
		{"a JSON answer that does not parse fails",
			Resp{Method: "GET", Path: "/api/v1/auth/test", Status: 200, Header: jsonHdr(), Body: []byte(`{"ok":`)}, "not JSON"},
		{"a date-time that is not one fails",
			Resp{Method: "GET", Path: "/api/v1/messages/" + id, Status: 200, Header: jsonHdr(), Body: []byte(`{"message":{"id":"` + id + `","conversationId":"` + id +
				`","author":{"kind":"bot","id":"` + id + `"},"text":"t","threadParentId":null,"createdAt":"yesterday","editedAt":null,"deletedAt":null,"reactions":[]}}`)}, "does not match"},
		{"a required request body left out, answered 2xx, fails",
			Resp{Method: "POST", Path: "/api/v1/reactions", ReqHeader: jsonHdr(), Status: 200, Header: jsonHdr(), Body: []byte(`{"ok":true}`)}, "refuses"},
		{"a webhook post is JSON whatever its Content-Type",
			Resp{Method: "POST", Path: "/hooks/v1/" + id + "/" + id + "/s3cret", ReqHeader: http.Header{"Content-Type": {"text/plain"}}, ReqBody: []byte(`{"text":"hi"}`),
				Status: 200, Header: jsonHdr(), Body: []byte(`{"ok":true}`)}, ""},
		{"file content is checked with its headers",
			Resp{Method: "GET", Path: "/api/v1/files/" + id + "/content", Status: 200,
				Header: http.Header{"Content-Type": {"application/octet-stream"}, "Content-Disposition": {`attachment; filename="a"`}, "X-Content-Type-Options": {"nosniff"}},
				Body:   []byte("hi")}, "X-Service-Content-Type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			if r.ReqHeader == nil {
				r.ReqHeader = http.Header{}
			}
			got := conformance.validate(&r)
			switch {
			case c.want == "" && got != "":
				t.Errorf("want it to conform; got %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("want a failure naming %q; got %q", c.want, got)
			}
		})
	}
}
