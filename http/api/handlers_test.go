package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
)

func TestAuthentication(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	user := h.userToken(t, f.ws, f.inst, f.member)
	revoked := h.ops(t, "POST", "/installations/"+f.inst+"/bot-tokens", nil).str("token")
	want(t, h.ops(t, "POST", "/tokens/revoke", map[string]any{"token": revoked}), 200)

	const (
		noErrorAttr = `Bearer realm="kit"`
		withError   = `Bearer realm="kit", error="invalid_token"`
	)
	tests := []struct {
		name       string
		rq         request
		wantStatus int
		wantCode   string // "" for a success
		wantAuth   string // WWW-Authenticate
	}{
		{"a Web API request without a token is 401 without an error attribute",
			request{method: "GET", path: "/api/v1/auth/test"}, 401, "invalid_token", noErrorAttr},
		{"an operator request without a token is 401 without an error attribute",
			request{method: "POST", path: "/ops/v1/workspaces", json: map[string]any{"name": "x"}}, 401, "invalid_token", noErrorAttr},
		{"a developer request without a token is 401 without an error attribute",
			request{method: "POST", path: "/api/v1/dev/kits/versions", json: map[string]any{"manifest": "{}"}}, 401, "invalid_token", noErrorAttr},
		{"a garbage token is 401 invalid_token",
			request{method: "GET", path: "/api/v1/auth/test", token: "garbage"}, 401, "invalid_token", withError},
		{"a well-formed unknown bot token is 401 invalid_token",
			request{method: "GET", path: "/api/v1/auth/test", token: ids.NewSecret(ids.BotToken)}, 401, "invalid_token", withError},
		{"a revoked bot token is 401 invalid_token",
			request{method: "GET", path: "/api/v1/auth/test", token: revoked}, 401, "invalid_token", withError},
		{"another scheme is 401 invalid_token",
			request{method: "GET", path: "/api/v1/auth/test", auth: "Basic " + f.bot}, 401, "invalid_token", withError},
		{"Bearer without a token is 401 invalid_token",
			request{method: "GET", path: "/api/v1/auth/test", auth: "Bearer "}, 401, "invalid_token", withError},
		{"the operator token is not a Web API token",
			request{method: "GET", path: "/api/v1/auth/test", token: h.opToken}, 401, "invalid_token", withError},
		{"a bot token is not an operator token",
			request{method: "POST", path: "/ops/v1/workspaces", token: f.bot, json: map[string]any{"name": "x"}}, 401, "invalid_token", withError},
		{"the scheme is case-insensitive",
			request{method: "GET", path: "/api/v1/auth/test", auth: "bearer " + f.bot}, 200, "", ""},
		{"the scheme may be followed by more than one space (RFC 6750 2.1: 1*SP)",
			request{method: "GET", path: "/api/v1/auth/test", auth: "Bearer   " + f.bot}, 200, "", ""},
		{"a tab after the scheme is malformed (RFC 6750 2.1: SP only)",
			request{method: "GET", path: "/api/v1/auth/test", auth: "Bearer\t" + f.bot}, 401, "invalid_token", withError},
		{"two Authorization headers are malformed, even both valid",
			request{method: "GET", path: "/api/v1/auth/test", token: f.bot, auth2: "Bearer " + f.bot}, 401, "invalid_token", withError},
		{"spaces alone after the scheme are no token",
			request{method: "GET", path: "/api/v1/auth/test", auth: "Bearer    "}, 401, "invalid_token", withError},
		{"a bot token passes auth.test",
			request{method: "GET", path: "/api/v1/auth/test", token: f.bot}, 200, "", ""},
		{"a developer token cannot call the Web API",
			request{method: "GET", path: "/api/v1/users", token: f.dev}, 403, "forbidden", ""},
		{"a developer token on auth.test is not a valid token: the no-scope routes answer no 403",
			request{method: "GET", path: "/api/v1/auth/test", token: f.dev}, 401, "invalid_token", withError},
		{"a developer token on users/me is not a valid token",
			request{method: "GET", path: "/api/v1/users/me", token: f.dev}, 401, "invalid_token", withError},
		{"a developer token on installation is not a valid token",
			request{method: "GET", path: "/api/v1/installation", token: f.dev}, 401, "invalid_token", withError},
		{"a user token cannot rotate: a route that needs no scope but takes one type answers 403",
			request{method: "POST", path: "/api/v1/auth/rotate", token: user}, 403, "forbidden", ""},
		{"a bot token cannot call the developer API",
			request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.bot, json: map[string]any{"manifest": "{}"}}, 403, "forbidden", ""},
		{"a user token cannot call the developer API (403, not 401)",
			request{method: "GET", path: "/api/v1/dev/me", token: user}, 403, "forbidden", ""},
		{"a user token cannot upload to the developer API (403, not 401)",
			request{method: "POST", path: "/api/v1/dev/kits/versions", token: user, json: map[string]any{"manifest": "{}"}}, 403, "forbidden", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.rq)
			if tt.wantCode == "" {
				want(t, r, tt.wantStatus)
			} else {
				wantError(t, r, tt.wantStatus, tt.wantCode)
			}
			if got := r.hdr("WWW-Authenticate"); got != tt.wantAuth {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tt.wantAuth)
			}
		})
	}

	t.Run("auth.test shows the token's installation and effective scopes", func(t *testing.T) {
		r := h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: f.bot})
		want(t, r, 200)
		if r.field("ok") != true || r.str("tokenType") != "bot" || r.str("workspaceId") != f.ws || r.str("installationId") != f.inst ||
			r.field("userId") != nil || !ids.Valid(r.str("botId")) {
			t.Fatalf("auth.test %s", r)
		}
		var got []string
		for _, s := range r.field("scopes").([]any) {
			got = append(got, s.(string))
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(defaultBotScopes))) {
			t.Fatalf("scopes %v", got)
		}
	})
	t.Run("revoking a bot token is immediate even when cached", func(t *testing.T) {
		tok := h.ops(t, "POST", "/installations/"+f.inst+"/bot-tokens", nil).str("token")
		want(t, h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: tok}), 200)
		want(t, h.ops(t, "POST", "/tokens/revoke", map[string]any{"token": tok}), 200)
		wantError(t, h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: tok}), 401, "invalid_token")
		want(t, h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: f.bot}), 200)
	})
	t.Run("uninstall makes the bot token invalid", func(t *testing.T) {
		g := h.newFixture(t)
		want(t, h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: g.bot}), 200)
		want(t, h.ops(t, "DELETE", "/installations/"+g.inst, nil), 200)
		r := h.do(t, request{method: "GET", path: "/api/v1/auth/test", token: g.bot})
		wantError(t, r, 401, "invalid_token")
		if got := r.hdr("WWW-Authenticate"); got != `Bearer realm="kit", error="invalid_token"` {
			t.Fatalf("WWW-Authenticate %q", got)
		}
	})
	t.Run("a missing scope is 403 missing_scope naming the scope", func(t *testing.T) {
		g := h.newFixture(t, "conversations:read")
		r := h.do(t, request{method: "POST", path: "/api/v1/messages", token: g.bot, json: map[string]any{"conversationId": g.conv, "text": "hi"}})
		wantError(t, r, 403, "missing_scope")
		if got := r.hdr("X-Service-Required-Scope"); got != "messages:write" {
			t.Fatalf("X-Service-Required-Scope %q", got)
		}
	})
}

func TestBodyRules(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	post := func(path, token, ct string, body []byte) request {
		return request{method: "POST", path: path, token: token, contentType: ct, body: body}
	}
	ws := []byte(`{"name":"body rules"}`)
	msg := []byte(`{"conversationId":"` + f.conv + `","text":"hello"}`)
	padded := func(n int) []byte { // a valid workspace body of exactly n bytes
		head, tail := `{"name":"padded","pad":"`, `"}`
		return []byte(head + strings.Repeat("p", n-len(head)-len(tail)) + tail)
	}
	tests := []struct {
		name       string
		rq         request
		wantStatus int
		wantCode   string
	}{
		{"wrong content type is 415", post("/ops/v1/workspaces", h.opToken, "text/plain", ws), 415, "unsupported_media_type"},
		{"a form content type is 415", post("/ops/v1/workspaces", h.opToken, "application/x-www-form-urlencoded", ws), 415, "unsupported_media_type"},
		{"a missing content type is 415", post("/ops/v1/workspaces", h.opToken, "-", ws), 415, "unsupported_media_type"},
		{"a content type that extends application/json is 415", post("/ops/v1/workspaces", h.opToken, "application/jsonx", ws), 415, "unsupported_media_type"},
		{"a Web API write with the wrong content type is 415", post("/api/v1/messages", f.bot, "text/plain", msg), 415, "unsupported_media_type"},
		{"a developer write with the wrong content type is 415", post("/api/v1/dev/kits/versions", f.dev, "text/plain", []byte(`{"manifest":"{}"}`)), 415, "unsupported_media_type"},
		{"application/json with a charset is accepted", post("/ops/v1/workspaces", h.opToken, "application/json; charset=utf-8", ws), 201, ""},
		{"the media type is case-insensitive", post("/ops/v1/workspaces", h.opToken, "Application/JSON", ws), 201, ""},
		{"a body of exactly 1 MiB is accepted", post("/ops/v1/workspaces", h.opToken, "", padded(1<<20)), 201, ""},
		{"oversized body is 413", post("/ops/v1/workspaces", h.opToken, "", padded(1<<20+1)), 413, "payload_too_large"},
		{"an oversized Web API body is 413", post("/api/v1/messages", f.bot, "", padded(1<<20+1)), 413, "payload_too_large"},
		{"a client cannot mark its own body as too large", request{method: "POST", path: "/ops/v1/workspaces", token: h.opToken, body: ws,
			header: map[string]string{bodyTooLargeHeader: "1"}}, 201, ""},
		{"a client cannot mark its own empty body as too large", request{method: "POST", path: "/ops/v1/workspaces", token: h.opToken, contentType: "application/json",
			header: map[string]string{bodyTooLargeHeader: "1", "Content-Length": "0"}}, 400, "validation_error"},
		{"a required body may not be empty", post("/ops/v1/workspaces", h.opToken, "", []byte("  ")), 400, "validation_error"},
		{"an empty body needs no content type where none is needed", post("/ops/v1/conversations/"+f.other+"/archive", h.opToken, "-", nil), 200, ""},
		{"malformed JSON is 400", post("/ops/v1/workspaces", h.opToken, "", []byte(`{"name":`)), 400, "validation_error"},
		{"an unknown route is 404", request{method: "GET", path: "/api/v1/nothing-here", token: f.bot}, 404, "not_found"},
		{"a non-UUID path id is 404", request{method: "GET", path: "/api/v1/conversations/not-a-uuid", token: f.bot}, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.rq)
			if tt.wantCode == "" {
				want(t, r, tt.wantStatus)
				return
			}
			wantError(t, r, tt.wantStatus, tt.wantCode)
		})
	}
	t.Run("a body over the server's limit is 413", func(t *testing.T) {
		// The server refuses on the Content-Length alone; a raw connection
		// reads the answer without sending megabytes first.
		conn, err := h.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		n := maxFilesBody + 4096 + 1
		head := "POST /ops/v1/workspaces HTTP/1.1\r\nHost: kit.test\r\nAuthorization: Bearer " + h.opToken +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
		if _, err := conn.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := resp.Read(bufio.NewReader(conn)); err != nil {
			t.Fatalf("read response: %v", err)
		}
		r := &response{status: resp.StatusCode(), header: map[string]string{}, body: resp.Body()}
		for k, v := range resp.Header.All() {
			r.header[strings.ToLower(string(k))] = string(v)
		}
		wantError(t, r, 413, "payload_too_large")
	})
	t.Run("healthz answers without a token", func(t *testing.T) {
		r := h.do(t, request{method: "GET", path: "/healthz"})
		want(t, r, 200)
		if string(r.body) != `{"ok":true}` {
			t.Fatalf("body %s", r.body)
		}
	})
}

// TestNoEcho sends a sentinel in every kind of bad input and checks that no
// error body repeats it (docs/api.md "Errors": validation errors never echo values).
func TestNoEcho(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	s := sentinel
	long := strings.Repeat(s, 8001/len(s)+1)
	opsPost := func(path string, body any) request {
		return request{method: "POST", path: "/ops/v1" + path, token: h.opToken, json: body}
	}
	web := func(method, path string, body any) request {
		return request{method: method, path: "/api/v1" + path, token: f.bot, json: body}
	}
	badManifest := strings.Replace(manifestText("ok-slug", "1.0.0", nil, nil), `"ok-slug"`, `"`+s+`"`, 1)
	tests := []struct {
		name       string
		rq         request
		wantStatus int
	}{
		{"a bad role", opsPost("/workspaces/"+f.ws+"/users", map[string]any{"displayName": "x", "role": s}), 400},
		{"a bad email", opsPost("/workspaces/"+f.ws+"/users", map[string]any{"displayName": "x", "role": "member", "email": s}), 400},
		{"a too long display name", opsPost("/workspaces/"+f.ws+"/users", map[string]any{"displayName": long, "role": "member"}), 400},
		{"a bad password", opsPost("/workspaces/"+f.ws+"/users", map[string]any{"displayName": "x", "role": "member", "password": s[:5]}), 400},
		{"a wrong JSON type", opsPost("/workspaces", map[string]any{"name": []string{s}}), 400},
		{"malformed JSON", request{method: "POST", path: "/ops/v1/workspaces", token: h.opToken, body: []byte(`{"name":"` + s + `"`)}, 400},
		{"a bad conversation kind", opsPost("/workspaces/"+f.ws+"/conversations", map[string]any{"kind": s, "visibility": "public", "memberIds": []string{}}), 400},
		{"a bad member id", opsPost("/workspaces/"+f.ws+"/conversations", map[string]any{"kind": "channel", "visibility": "public", "name": "x", "memberIds": []string{s}}), 400},
		{"a bad clock advance", opsPost("/clock/advance", map[string]any{"seconds": s}), 400},
		{"an unknown token to revoke", opsPost("/tokens/revoke", map[string]any{"token": s}), 404},
		{"a bad conversationId", web("POST", "/messages", map[string]any{"conversationId": s, "text": "x"}), 400},
		{"a bad threadParentId", web("POST", "/messages", map[string]any{"conversationId": f.conv, "text": "x", "threadParentId": s}), 400},
		{"a too long text", web("POST", "/messages", map[string]any{"conversationId": f.conv, "text": long}), 400},
		{"a bad block", web("POST", "/messages", map[string]any{"conversationId": f.conv, "text": "x", "blocks": []any{map[string]any{"type": s}}}), 400},
		{"a bad block field", web("POST", "/messages", map[string]any{"conversationId": f.conv, "text": "x", "blocks": []any{map[string]any{"type": "header", "text": long}}}), 400},
		{"a bad Idempotency-Key", request{method: "POST", path: "/api/v1/messages", token: f.bot, header: map[string]string{"Idempotency-Key": s + " " + s},
			json: map[string]any{"conversationId": f.conv, "text": "x"}}, 400},
		{"a bad limit", web("GET", "/conversations/"+f.conv+"/messages?limit="+s, nil), 400},
		{"a bad cursor", web("GET", "/conversations/"+f.conv+"/messages?cursor="+s, nil), 400},
		{"a path id that is not a UUID", web("GET", "/conversations/"+s, nil), 404},
		{"a message id that is not a UUID", web("DELETE", "/messages/"+s, nil), 404},
		{"an unknown route", web("GET", "/"+s, nil), 404},
		{"a garbage token", request{method: "GET", path: "/api/v1/auth/test", token: s}, 401},
		{"a bad manifest slug", request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{"manifest": badManifest}}, 400},
		{"a manifest that is not JSON", request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{"manifest": "{" + s}}, 400},
		{"a bad version in a path", request{method: "POST", path: "/api/v1/dev/kits/" + f.kitID + "/versions/" + s + "/publish", token: f.dev}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.rq)
			want(t, r, tt.wantStatus)
			if bytes.Contains(bytes.ToLower(r.body), bytes.ToLower([]byte("SENTINEL"))) {
				t.Fatalf("the error body echoes the submitted value: %s", r.body)
			}
			for k, v := range r.header {
				if strings.Contains(strings.ToLower(v), "sentinel") {
					t.Fatalf("header %s echoes the submitted value: %s", k, v)
				}
			}
		})
	}
}

func TestMessagesOverHTTP(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	postMsg := func(t *testing.T, text, key string) *response {
		t.Helper()
		rq := request{method: "POST", path: "/api/v1/messages", token: f.bot, json: map[string]any{"conversationId": f.conv, "text": text}}
		if key != "" {
			rq.header = map[string]string{"Idempotency-Key": key}
		}
		return h.do(t, rq)
	}
	t.Run("a post is 201 and its replay is 200 with the same message", func(t *testing.T) {
		h.clk.Advance(5e9)
		first := postMsg(t, "idempotent", "k1")
		want(t, first, 201)
		again := postMsg(t, "idempotent", "k1")
		want(t, again, 200)
		if first.str("message.id") != again.str("message.id") {
			t.Fatalf("replay %s, want %s", again, first)
		}
		wantError(t, postMsg(t, "different", "k1"), 409, "idempotency_conflict")
	})
	t.Run("a cursor of one list is refused by another", func(t *testing.T) {
		h.clk.Advance(5e9)
		for i := range 3 {
			want(t, postMsg(t, "page "+strconv.Itoa(i), ""), 201)
		}
		r := h.do(t, request{method: "GET", path: "/api/v1/conversations/" + f.conv + "/messages?limit=1", token: f.bot})
		want(t, r, 200)
		cursor := r.str("nextCursor")
		if cursor == "" {
			t.Fatalf("no nextCursor: %s", r)
		}
		want(t, h.do(t, request{method: "GET", path: "/api/v1/conversations/" + f.conv + "/messages?limit=1&cursor=" + cursor, token: f.bot}), 200)
		wantError(t, h.do(t, request{method: "GET", path: "/api/v1/conversations/" + f.other + "/messages?cursor=" + cursor, token: f.bot}), 400, "validation_error")
		wantError(t, h.do(t, request{method: "GET", path: "/api/v1/users?cursor=" + cursor, token: f.bot}), 400, "validation_error")
	})
	t.Run("a bot sees only channels it was added to", func(t *testing.T) {
		r := h.do(t, request{method: "GET", path: "/api/v1/conversations", token: f.bot})
		want(t, r, 200)
		list, _ := r.field("conversations").([]any)
		if len(list) != 1 || list[0].(map[string]any)["id"] != f.conv || r.field("nextCursor") != nil {
			t.Fatalf("conversations %s", r)
		}
		wantError(t, h.do(t, request{method: "GET", path: "/api/v1/conversations/" + f.other, token: f.bot}), 404, "not_found")
	})
	t.Run("a refused post_message bucket is 429 with Retry-After", func(t *testing.T) {
		h.clk.Advance(5e9)
		var r *response
		for i := range 6 {
			r = postMsg(t, "burst "+strconv.Itoa(i), "")
			if r.status != 201 {
				break
			}
		}
		wantError(t, r, 429, "rate_limited")
		if n, err := strconv.Atoi(r.hdr("Retry-After")); err != nil || n < 1 {
			t.Fatalf("Retry-After %q", r.hdr("Retry-After"))
		}
	})
}

// TestUserTokenConversations checks GET /conversations for a user token.
// kit.access does not issue user tokens yet, so the test stores a user
// credential the way an installation stores its tokens.
func TestUserTokenConversations(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	token := h.userToken(t, f.ws, f.inst, f.member, "conversations:read", "messages:read")
	if p, err := h.auth.Authenticate([]byte(token)); err != nil || p.TokenType != actors.CallerUser {
		t.Fatalf("user token: %v", err)
	}
	// The member belongs to both channels; the outsider's group is not theirs.
	r := h.ops(t, "POST", "/workspaces/"+f.ws+"/conversations", map[string]any{"kind": "group", "visibility": "private", "memberIds": []string{f.outside}})
	want(t, r, 201)
	notMine := r.str("conversation.id")

	wantError(t, h.do(t, request{method: "GET", path: "/api/v1/conversations/" + notMine, token: token}), 404, "not_found")
	want(t, h.do(t, request{method: "GET", path: "/api/v1/conversations/" + f.other, token: token}), 200)

	r = h.do(t, request{method: "GET", path: "/api/v1/conversations", token: token})
	want(t, r, 200)
	var got []string
	list, _ := r.field("conversations").([]any)
	for _, c := range list {
		got = append(got, c.(map[string]any)["id"].(string))
	}
	wantIDs := slices.Sorted(slices.Values([]string{f.conv, f.other}))
	if !slices.Equal(slices.Sorted(slices.Values(got)), wantIDs) {
		t.Fatalf("a member sees only conversations they belong to: got %v, want %v", got, wantIDs)
	}
}

// Entries of a member's conversations that lead nowhere (a kill in the
// middle of a write leaves them, docs/cluster.md "Global indexes") are
// skipped, and paging goes past them: a page of them alone had answered
// an empty cursor with more to come, which started the listing over.
func TestConversationPagesGoPastEntriesThatLeadNowhere(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	token := h.userToken(t, f.ws, f.inst, f.member, "conversations:read")
	b := h.store.NewBatch()
	for range 2 {
		b.Set(actors.MemberConversationKey(f.member, ids.New()), nil)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		if page == 10 {
			t.Fatalf("still paging after %d pages of one: %v", page, got)
		}
		path := "/api/v1/conversations?limit=1"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := h.do(t, request{method: "GET", path: path, token: token})
		want(t, r, 200)
		list, _ := r.field("conversations").([]any)
		for _, c := range list {
			got = append(got, c.(map[string]any)["id"].(string))
		}
		next, _ := r.field("nextCursor").(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if want := slices.Sorted(slices.Values([]string{f.conv, f.other})); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("listed %v, want the member's two channels", got)
	}
}

// An entry of the workspace's Kits that leads to no Kit (an upload a
// kill parted, docs/cluster.md "Global indexes") is left out of the list
// rather than failing it.
func TestKitListsGoPastEntriesThatLeadNowhere(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	b := h.store.NewBatch()
	b.Set(actors.WorkspaceKitKey(f.ws, ids.New()), nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	r := h.do(t, request{method: "GET", path: "/api/v1/dev/kits", token: f.dev})
	want(t, r, 200)
	if kits, _ := r.field("kits").([]any); len(kits) != 1 || kits[0].(map[string]any)["kitId"] != f.kitID {
		t.Fatalf("listed %s, want the fixture's Kit alone", r)
	}
}

func TestViewsOverHTTP(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	// A second channel for the bot, so that its list has two pages of one.
	want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": f.other}), 200)
	get := func(t *testing.T, path string) *response {
		t.Helper()
		r := h.do(t, request{method: "GET", path: "/api/v1" + path, token: f.bot})
		want(t, r, 200)
		return r
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"conversations page by cursor and end with a null nextCursor", func(t *testing.T) {
			var seen []string
			path := "/conversations?limit=1"
			for range 3 {
				r := get(t, path)
				for _, c := range r.field("conversations").([]any) {
					seen = append(seen, c.(map[string]any)["id"].(string))
				}
				if r.field("nextCursor") == nil {
					break
				}
				path = "/conversations?limit=1&cursor=" + r.str("nextCursor")
			}
			if !slices.Equal(slices.Sorted(slices.Values(seen)), slices.Sorted(slices.Values([]string{f.conv, f.other}))) {
				t.Fatalf("paged conversations %v", seen)
			}
		}},
		{"nextCursor is present and null on the last page", func(t *testing.T) {
			r := get(t, "/conversations/"+f.conv+"/members")
			var body map[string]any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			if v, present := body["nextCursor"]; !present || v != nil {
				t.Fatalf("nextCursor %v (present %v)", v, present)
			}
		}},
		{"users/me of a bot names the bot and no user", func(t *testing.T) {
			r := get(t, "/users/me")
			if r.field("user") != nil || !ids.Valid(r.str("bot.id")) || r.str("bot.displayName") == "" {
				t.Fatalf("users/me %s", r)
			}
		}},
		{"the installation lists its channels and modelDataPolicy none", func(t *testing.T) {
			r := get(t, "/installation")
			chans, _ := r.field("installation.channelIds").([]any)
			if r.str("installation.id") != f.inst || len(chans) != 2 || r.str("installation.modelDataPolicy") != "none" ||
				r.str("installation.workspace.id") != f.ws || r.str("installation.kit.version") != "1.0.0" {
				t.Fatalf("installation %s", r)
			}
		}},
		{"users carry no email without users:read.email", func(t *testing.T) {
			r := h.ops(t, "POST", "/workspaces/"+f.ws+"/users", map[string]any{"displayName": "Mailer", "role": "member", "email": "mailer@example.com"})
			want(t, r, 201)
			if r.str("user.email") != "mailer@example.com" {
				t.Fatalf("the operator does not see the email: %s", r)
			}
			if bytes.Contains(get(t, "/users/"+r.str("user.id")).body, []byte("mailer@example.com")) {
				t.Fatal("a token without users:read.email sees the email")
			}
		}},
		{"a read carries the RateLimit headers of its bucket", func(t *testing.T) {
			r := get(t, "/auth/test")
			if got := r.hdr("RateLimit-Policy"); got != `"read";q=100;w=60` {
				t.Fatalf("RateLimit-Policy %q", got)
			}
			if got := r.hdr("RateLimit"); !strings.HasPrefix(got, `"read";r=`) {
				t.Fatalf("RateLimit %q", got)
			}
		}},
		{"deleting twice answers the same tombstone", func(t *testing.T) {
			h.clk.Advance(5e9)
			r := h.do(t, request{method: "POST", path: "/api/v1/messages", token: f.bot, json: map[string]any{"conversationId": f.conv, "text": "bye", "blocks": []any{map[string]any{"type": "divider"}}}})
			want(t, r, 201)
			id := r.str("message.id")
			first := h.do(t, request{method: "DELETE", path: "/api/v1/messages/" + id, token: f.bot})
			want(t, first, 200)
			second := h.do(t, request{method: "DELETE", path: "/api/v1/messages/" + id, token: f.bot})
			want(t, second, 200)
			if first.str("message.deletedAt") == "" || first.str("message.deletedAt") != second.str("message.deletedAt") ||
				first.field("message.text") != nil || first.field("message.blocks") != nil {
				t.Fatalf("tombstones %s then %s", first, second)
			}
			wantError(t, h.do(t, request{method: "PATCH", path: "/api/v1/messages/" + id, token: f.bot, json: map[string]any{"text": "again"}}), 409, "conflict")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// refusingReads is a node's ReadBarrier that can refuse every catch-up,
// as one does while its partition's lead moves.
type refusingReads struct{ refuse atomic.Bool }

func (r *refusingReads) CatchUp(partition.ID) error {
	if r.refuse.Load() {
		return kiterr.New(kiterr.Unavailable, "replication: group 0: not the leader")
	}
	return nil
}

// A request whose token's use could not be recorded (its lastUsedAt: a
// leader change under way) goes on: the bookkeeping is not the request's.
func TestATokensUseNotRecordedFailsNoRequest(t *testing.T) {
	h, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	reads := &refusingReads{}
	h.env.Reads = reads
	f := h.newFixture(t)
	reads.refuse.Store(true)
	want(t, h.do(t, request{method: "POST", path: "/api/v1/messages", token: f.bot,
		json: map[string]any{"conversationId": f.conv, "text": "hi"}}), 201)
}

// TestConversationCursorsAreBoundToTheirCaller: the conversations a token
// lists are its own list (the channels of its installation's Kit bot, or
// its member's conversations), so a cursor another caller's listing gave
// is "made for another list" (docs/decisions.md "cursor"): 400, never a
// page that silently starts at someone else's position.
func TestConversationCursorsAreBoundToTheirCaller(t *testing.T) {
	h := ts
	a, b := h.newFixture(t), h.newFixture(t)
	for _, f := range []*fixture{a, b} {
		want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": f.other}), 200)
	}
	aUser := h.userToken(t, a.ws, a.inst, a.member, "conversations:read")
	aOutsider := h.userToken(t, a.ws, a.inst, a.outside, "conversations:read")
	firstCursor := func(t *testing.T, token string) string {
		t.Helper()
		r := h.do(t, request{method: "GET", path: "/api/v1/conversations?limit=1", token: token})
		want(t, r, 200)
		c := r.str("nextCursor")
		if c == "" {
			t.Fatalf("no nextCursor: %s", r)
		}
		return c
	}
	for _, tc := range []struct {
		rule        string
		from, using string
	}{
		{"another installation's bot cursor is refused", a.bot, b.bot},
		{"a bot's cursor is refused by a user token of its installation", a.bot, aUser},
		{"a member's cursor is refused by the installation's bot", aUser, a.bot},
		{"a member's cursor is refused by another member's token", aUser, aOutsider},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			cursor := firstCursor(t, tc.from)
			want(t, h.do(t, request{method: "GET", path: "/api/v1/conversations?limit=1&cursor=" + cursor, token: tc.from}), 200)
			wantError(t, h.do(t, request{method: "GET", path: "/api/v1/conversations?limit=1&cursor=" + cursor, token: tc.using}), 400, "validation_error")
		})
	}
	t.Run("a cursor of a build before owners is still taken", func(t *testing.T) {
		r := h.do(t, request{method: "GET", path: "/api/v1/conversations?limit=1", token: a.bot})
		want(t, r, 200)
		first := r.field("conversations").([]any)[0].(map[string]any)["id"].(string)
		legacy := base64.RawURLEncoding.EncodeToString([]byte("conversations|" + first))
		r = h.do(t, request{method: "GET", path: "/api/v1/conversations?cursor=" + legacy, token: a.bot})
		want(t, r, 200)
		if list := r.field("conversations").([]any); len(list) != 1 || list[0].(map[string]any)["id"] == first {
			t.Fatalf("page after %s: %s", first, r)
		}
	})
}

// TestUserCursorsAreBoundToTheirWorkspace: GET /users lists the caller's
// workspace, so another workspace's cursor is "made for another list"
// (docs/decisions.md "cursor"): 400, never a page of this workspace that
// starts at a position of that one.
func TestUserCursorsAreBoundToTheirWorkspace(t *testing.T) {
	h := ts
	a, b := h.newFixture(t), h.newFixture(t)
	first := h.do(t, request{method: "GET", path: "/api/v1/users?limit=1", token: a.bot})
	want(t, first, 200)
	cursor := first.str("nextCursor")
	if cursor == "" {
		t.Fatalf("no nextCursor: %s", first)
	}
	firstID := first.field("users").([]any)[0].(map[string]any)["id"].(string)
	for _, tc := range []struct {
		rule, cursor, token string
		status              int
	}{
		{"the workspace's own cursor is taken", cursor, a.bot, 200},
		{"another workspace's cursor is refused", cursor, b.bot, 400},
		{"a cursor of a build before owners is still taken",
			base64.RawURLEncoding.EncodeToString([]byte("users|" + firstID)), a.bot, 200},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := h.do(t, request{method: "GET", path: "/api/v1/users?limit=1&cursor=" + tc.cursor, token: tc.token})
			if tc.status == 400 {
				wantError(t, r, 400, "validation_error")
				return
			}
			want(t, r, 200)
			if list := r.field("users").([]any); len(list) == 1 && list[0].(map[string]any)["id"] == firstID {
				t.Fatalf("the page after %s starts with it: %s", firstID, r)
			}
		})
	}
}

// TestHeadAnswersWhatGetDoes: RFC 9110 9.3.2, HEAD is GET without the
// content: the same status and headers, no body; 404 where GET is.
func TestHeadAnswersWhatGetDoes(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	for _, tc := range []struct{ rule, path string }{
		{"a route GET takes", "/api/v1/auth/test"},
		{"an absent object", "/api/v1/users/" + ids.New()},
		{"a path GET does not take", "/api/v1/messages"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			get := h.do(t, request{method: "GET", path: tc.path, token: f.bot})
			head := h.do(t, request{method: "HEAD", path: tc.path, token: f.bot})
			if head.status != get.status || head.hdr("Content-Type") != get.hdr("Content-Type") || len(head.body) != 0 {
				t.Fatalf("HEAD %s: %d %q %q; GET: %d %q", tc.path, head.status, head.hdr("Content-Type"), head.body, get.status, get.hdr("Content-Type"))
			}
		})
	}
}

// TestCursorPositionsOfIDListsAreIDs: the lists that page by id (users,
// conversations, members) hold a position kitd made, an id, as the
// history, developer log and deliveries lists check theirs. A cursor
// whose position is no id was never given out (docs/decisions.md
// "cursor"): 400 at cursor, never an empty last page that ends the walk
// early, nor the first page again.
func TestCursorPositionsOfIDListsAreIDs(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	user := h.userToken(t, f.ws, f.inst, f.member, "conversations:read")
	lists := []struct {
		name, path, list, owner, token string
	}{
		{"users", "/api/v1/users", "users", "|" + f.ws, f.bot},
		{"a bot's conversations", "/api/v1/conversations", "conversations", "|bot:" + f.inst, f.bot},
		{"a member's conversations", "/api/v1/conversations", "conversations", "|user:" + f.member, user},
		{"members", "/api/v1/conversations/" + f.conv + "/members", "members:" + f.conv, "", f.bot},
	}
	positions := []struct {
		rule     string
		position string
		status   int
	}{
		{"an id is taken", ids.New(), 200},
		{"a position that is no id is refused", "junk", 400},
		{"a position sorting before every id is refused", "!", 400},
		{"a number is refused", "17", 400},
		{"an upper-case id is refused", strings.ToUpper(ids.New()), 400},
	}
	for _, l := range lists {
		for _, p := range positions {
			t.Run(l.name+": "+p.rule, func(t *testing.T) {
				cursor := cursorOf(l.list + "|" + p.position + l.owner)
				r := h.do(t, request{method: "GET", path: l.path + "?cursor=" + cursor, token: l.token})
				if p.status == 200 {
					want(t, r, 200)
					return
				}
				wantError(t, r, 400, "validation_error")
				if m := r.str("message"); m != "cursor: is not a cursor of this list" {
					t.Fatalf("message %q", m)
				}
			})
		}
	}
}
