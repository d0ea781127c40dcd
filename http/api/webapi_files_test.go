package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// filesFixture is a fixture whose Kit asks for the file and reaction scopes,
// with user tokens stored directly (kit.access does not issue them yet).
type filesFixture struct {
	*fixture
	inst     string // the installation of the files Kit
	bot      string // its bot token; the bot is in conv only
	member   string // user token of the member (in conv and other), every scope
	outsider string // user token of a member of neither channel, every scope
	noWrite  string // user token of the member without files:write and reactions:write
}

var (
	filesBotScopes  = []string{"conversations:read", "messages:read", "messages:write", "files:read", "files:write", "reactions:write"}
	filesUserScopes = []string{"conversations:read", "messages:read", "messages:write", "files:read", "files:write", "reactions:write"}
)

func (h *testServer) newFilesFixture(t *testing.T) *filesFixture {
	t.Helper()
	f := &filesFixture{fixture: h.newFixture(t)}
	slug := "f" + strings.ReplaceAll(ids.New()[24:], "-", "")
	r := h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": manifestText(slug, "1.0.0", filesBotScopes, filesUserScopes),
	}})
	want(t, r, 201)
	r = h.ops(t, "POST", "/workspaces/"+f.ws+"/installations", map[string]any{"kitId": r.str("kitId")})
	want(t, r, 201)
	f.inst = r.str("installation.id")
	want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": f.conv}), 200)
	r = h.ops(t, "POST", "/installations/"+f.inst+"/bot-tokens", nil)
	want(t, r, 201)
	f.bot = r.str("token")
	f.member = h.userToken(t, f.ws, f.inst, f.fixture.member, filesUserScopes...)
	f.outsider = h.userToken(t, f.ws, f.inst, f.fixture.outside, filesUserScopes...)
	f.noWrite = h.userToken(t, f.ws, f.inst, f.fixture.member, "conversations:read", "messages:read", "files:read")
	return f
}

// userToken stores a user credential the way an installation stores its
// tokens (authorized in a fresh web session of the member), so that these
// tests choose the scopes freely.
func (h *testServer) userToken(t *testing.T, ws, inst, userID string, scopes ...string) string {
	t.Helper()
	r := h.ops(t, "POST", "/users/"+userID+"/sessions", nil)
	want(t, r, 201)
	token := ids.NewSecret(ids.UserToken)
	hash := sha256.Sum256([]byte(token))
	cred, err := proto.Marshal(&kitpb.Credential{
		Kind: actors.CallerUser, WorkspaceId: ws, InstallationId: inst, UserId: userID, Scopes: scopes,
		SessionId: r.str("sessionId"),
	})
	if err != nil {
		t.Fatal(err)
	}
	b := h.store.NewBatch()
	b.Set(actors.CredentialKey(hash[:]), cred)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return token
}

// upload posts a file; every call first lets 3 s pass, so that the files
// bucket (20/minute) never refuses a test that is not about it.
func (h *testServer) upload(t *testing.T, token string, body map[string]any) *response {
	t.Helper()
	h.clk.Advance(3 * time.Second)
	return h.do(t, request{method: "POST", path: "/api/v1/files", token: token, json: body})
}

func fileUpload(conv, mimeType string, content []byte) map[string]any {
	return map[string]any{"conversationId": conv, "name": "notes.txt", "mimeType": mimeType, "contentBase64": base64.StdEncoding.EncodeToString(content)}
}

func with(body map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(body))
	for k, x := range body {
		out[k] = x
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

var pngHeader = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13}

func TestUploadRules(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	text := fileUpload(f.conv, "text/plain", []byte("hello"))
	tests := []struct {
		name     string
		token    string
		body     map[string]any
		status   int
		code     string
		path     string // of a validation error
		rawB64   string // contentBase64 as sent, instead of body's
		rawBody  []byte
		scopeHdr string
	}{
		{name: "a member uploads a text file", token: f.member, body: text, status: 201},
		{name: "a bot token cannot upload (forbidden)", token: f.bot, body: text, status: 403, code: "forbidden"},
		{name: "a user token without files:write gets missing_scope", token: f.noWrite, body: text, status: 403, code: "missing_scope", scopeHdr: "files:write"},
		{name: "a member outside the conversation gets not found", token: f.outsider, body: text, status: 404, code: "not_found"},
		{name: "an unknown conversation is not found", token: f.member, body: with(text, "conversationId", ids.New()), status: 404, code: "not_found"},
		{name: "conversationId is required", token: f.member, body: with(text, "conversationId", nil), status: 400, code: "validation_error", path: "conversationId"},
		{name: "name is required", token: f.member, body: with(text, "name", nil), status: 400, code: "validation_error", path: "name"},
		{name: "an empty name is refused", token: f.member, body: with(text, "name", ""), status: 400, code: "validation_error", path: "name"},
		{name: "a name of 120 characters passes", token: f.member, body: with(text, "name", strings.Repeat("é", 120)), status: 201},
		{name: "a name of 121 characters is refused", token: f.member, body: with(text, "name", strings.Repeat("n", 121)), status: 400, code: "validation_error", path: "name"},
		{name: "a name with a control character is refused", token: f.member, body: with(text, "name", "a\r\nb"), status: 400, code: "validation_error", path: "name"},
		{name: "mimeType outside the six is refused", token: f.member, body: with(text, "mimeType", "text/html"), status: 400, code: "validation_error", path: "mimeType"},
		{name: "mimeType is required", token: f.member, body: with(text, "mimeType", nil), status: 400, code: "validation_error", path: "mimeType"},
		{name: "contentBase64 is required", token: f.member, body: with(text, "contentBase64", nil), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 must be a string", token: f.member, body: with(text, "contentBase64", 12345678), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 of 4 characters passes", token: f.member, body: text, rawB64: "aGk=", status: 201},
		{name: "contentBase64 of 3 characters is refused", token: f.member, body: text, rawB64: "aGk", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 of 7000001 characters is refused", token: f.member, body: text, rawB64: strings.Repeat("A", 7_000_001), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 outside the alphabet is refused (base64url)", token: f.member, body: text, rawB64: "aGk-aGk_", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 with padding inside is refused", token: f.member, body: text, rawB64: "aG==aGk=", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 with three padding characters is refused", token: f.member, body: text, rawB64: "aG===", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 without its padding is refused", token: f.member, body: text, rawB64: "aGVsbG8", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 with non-zero padding bits is refused", token: f.member, body: text, rawB64: "aGVsbG9=", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 of padding only is refused", token: f.member, body: text, rawB64: "====", status: 400, code: "validation_error", path: "contentBase64"},
		{name: "contentBase64 with an escaped slash decodes", token: f.member, rawBody: []byte(`{"conversationId":"` + f.conv + `","name":"s","mimeType":"text/plain","contentBase64":"\/\/8="}`), status: 201},
		{name: "a decoded size of 5000000 bytes passes", token: f.member, body: fileUpload(f.conv, "application/json", make([]byte, 5_000_000)), status: 201},
		{name: "a decoded size of 5000001 bytes is payload_too_large", token: f.member, body: fileUpload(f.conv, "application/json", make([]byte, 5_000_001)), status: 413, code: "payload_too_large"},
		{name: "a png starting with the PNG signature passes", token: f.member, body: fileUpload(f.conv, "image/png", pngHeader), status: 201},
		{name: "a png without the PNG signature is refused", token: f.member, body: fileUpload(f.conv, "image/png", []byte("GIF89a......")), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "a jpeg starting with FFD8FF passes", token: f.member, body: fileUpload(f.conv, "image/jpeg", []byte{0xff, 0xd8, 0xff, 0xe0}), status: 201},
		{name: "a jpeg with PNG bytes is refused", token: f.member, body: fileUpload(f.conv, "image/jpeg", pngHeader), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "a pdf starting with %PDF- passes", token: f.member, body: fileUpload(f.conv, "application/pdf", []byte("%PDF-1.7\n")), status: 201},
		{name: "a pdf that is text is refused", token: f.member, body: fileUpload(f.conv, "application/pdf", []byte("hello")), status: 400, code: "validation_error", path: "contentBase64"},
		{name: "a body over 8 MiB is payload_too_large", token: f.member, rawBody: bytes.Repeat([]byte(" "), 8<<20+1), status: 413, code: "payload_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.rawB64 != "" {
				body = with(body, "contentBase64", tt.rawB64)
			}
			var r *response
			if tt.rawBody != nil {
				h.clk.Advance(3 * time.Second)
				r = h.do(t, request{method: "POST", path: "/api/v1/files", token: tt.token, body: tt.rawBody})
			} else {
				r = h.upload(t, tt.token, body)
			}
			if tt.code == "" {
				want(t, r, tt.status)
			} else {
				wantError(t, r, tt.status, tt.code)
			}
			if tt.path != "" && !strings.HasPrefix(r.str("message"), tt.path+":") {
				t.Fatalf("message does not name %s: %s", tt.path, r)
			}
			if tt.scopeHdr != "" && r.hdr("X-Service-Required-Scope") != tt.scopeHdr {
				t.Fatalf("X-Service-Required-Scope %q", r.hdr("X-Service-Required-Scope"))
			}
			if len(r.body) < 4096 && tt.rawB64 != "" && strings.Contains(string(r.body), tt.rawB64) {
				t.Fatalf("the answer echoes the content: %s", r)
			}
		})
	}
	t.Run("201 answers the File", func(t *testing.T) {
		r := h.upload(t, f.member, with(text, "name", "greeting.txt"))
		want(t, r, 201)
		if !ids.Valid(r.str("file.id")) || r.str("file.conversationId") != f.conv || r.str("file.name") != "greeting.txt" ||
			r.str("file.mimeType") != "text/plain" || r.field("file.sizeBytes") != float64(5) ||
			r.str("file.uploadedByUserId") != f.fixture.member || r.str("file.createdAt") == "" {
			t.Fatalf("file %s", r)
		}
		if got := r.hdr("RateLimit-Policy"); got != `"files";q=20;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	})
}

func TestFileReads(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	content := make([]byte, actors.FileChunkSize+100) // two chunks
	for i := range content {
		content[i] = byte(i % 251)
	}
	r := h.upload(t, f.member, with(fileUpload(f.conv, "text/plain", content), "name", "résumé \"v2\".txt"))
	want(t, r, 201)
	id := r.str("file.id")
	r = h.upload(t, f.member, fileUpload(f.other, "text/plain", []byte("elsewhere")))
	want(t, r, 201)
	elsewhere := r.str("file.id")
	noRead := h.userToken(t, f.ws, f.inst, f.fixture.member, "conversations:read")
	get := func(token, path string) *response {
		h.clk.Advance(3 * time.Second)
		return h.do(t, request{method: "GET", path: "/api/v1" + path, token: token})
	}
	tests := []struct {
		name   string
		token  string
		path   string
		status int
		code   string
	}{
		{"the uploader reads the file", f.member, "/files/" + id, 200, ""},
		{"the bot of the conversation reads the file with files:read", f.bot, "/files/" + id, 200, ""},
		{"the bot of the conversation reads the content with files:read", f.bot, "/files/" + id + "/content", 200, ""},
		{"a member outside the conversation gets not found", f.outsider, "/files/" + id, 404, "not_found"},
		{"a member outside the conversation gets not found for the content", f.outsider, "/files/" + id + "/content", 404, "not_found"},
		{"a bot not in the file's conversation gets not found", f.bot, "/files/" + elsewhere, 404, "not_found"},
		{"a bot without files:read gets missing_scope", f.fixture.bot, "/files/" + id, 403, "missing_scope"},
		{"a user token without files:read gets missing_scope for the content", noRead, "/files/" + id + "/content", 403, "missing_scope"},
		{"an unknown file is not found", f.member, "/files/" + ids.New(), 404, "not_found"},
		{"a file id that is not a UUID is not found", f.member, "/files/nope/content", 404, "not_found"},
		{"a message id is not a file id", f.member, "/files/" + h.postAs(t, f.member, f.conv), 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(tt.token, tt.path)
			if tt.code == "" {
				want(t, r, tt.status)
			} else {
				wantError(t, r, tt.status, tt.code)
			}
		})
	}
	t.Run("content is the uploaded bytes as an attachment of type application/octet-stream", func(t *testing.T) {
		r := get(f.member, "/files/"+id+"/content")
		want(t, r, 200)
		if !bytes.Equal(r.body, content) {
			t.Fatalf("content differs: %d bytes, want %d", len(r.body), len(content))
		}
		checks := map[string]string{
			"Content-Type":           "application/octet-stream",
			"X-Service-Content-Type": "text/plain",
			"Content-Length":         strconv.Itoa(len(content)),
			"X-Content-Type-Options": "nosniff",
			"RateLimit-Policy":       `"files";q=20;w=60`,
			"Content-Disposition":    `attachment; filename="r_sum_ _v2_.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22v2%22.txt`,
		}
		for k, v := range checks {
			if got := r.hdr(k); got != v {
				t.Errorf("%s %q, want %q", k, got, v)
			}
		}
	})
	t.Run("file metadata is a read, not a files request", func(t *testing.T) {
		r := get(f.member, "/files/"+id)
		if got := r.hdr("RateLimit-Policy"); got != `"read";q=100;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h *testServer) postAs(t *testing.T, token, conv string) string {
	t.Helper()
	h.clk.Advance(2 * time.Second)
	r := h.do(t, request{method: "POST", path: "/api/v1/messages", token: token, json: map[string]any{"conversationId": conv, "text": "hi"}})
	want(t, r, 201)
	return r.str("message.id")
}

func TestFilesBucket(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	r := h.upload(t, f.member, fileUpload(f.conv, "text/plain", []byte("x")))
	want(t, r, 201)
	id := r.str("file.id")
	h.clk.Advance(time.Minute) // a full bucket
	var last *response
	for i := range 21 {
		path := "/api/v1/files/" + id + "/content"
		if i%2 == 0 {
			last = h.do(t, request{method: "POST", path: "/api/v1/files", token: f.member, json: fileUpload(f.conv, "text/plain", []byte("x"))})
		} else {
			last = h.do(t, request{method: "GET", path: path, token: f.bot})
		}
		if i < 20 && last.status >= 300 {
			t.Fatalf("request %d of 20: %s", i+1, last)
		}
	}
	wantError(t, last, 429, "rate_limited")
	if n, err := strconv.Atoi(last.hdr("Retry-After")); err != nil || n < 1 {
		t.Fatalf("Retry-After %q", last.hdr("Retry-After"))
	}
	// Metadata reads are not files requests.
	want(t, h.do(t, request{method: "GET", path: "/api/v1/files/" + id, token: f.member}), 200)
}

func TestReactionsOverHTTP(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	msg := h.postAs(t, f.member, f.conv)
	react := func(method, token string, body map[string]any, query string) *response {
		h.clk.Advance(2 * time.Second)
		rq := request{method: method, path: "/api/v1/reactions" + query, token: token}
		if body != nil {
			rq.json = body
		}
		return h.do(t, rq)
	}
	add := func(token, id, reaction string) *response {
		return react("POST", token, map[string]any{"messageId": id, "reaction": reaction}, "")
	}
	remove := func(token, id, reaction string) *response {
		return react("DELETE", token, nil, "?messageId="+id+"&reaction="+reaction)
	}
	deleted := h.postAs(t, f.member, f.conv)
	want(t, h.do(t, request{method: "DELETE", path: "/api/v1/messages/" + deleted, token: f.member}), 200)

	tests := []struct {
		name   string
		r      func() *response
		status int
		code   string
		path   string
	}{
		{"a member adds a reaction", func() *response { return add(f.member, msg, "thumbs_up") }, 200, "", ""},
		{"adding it again is ok", func() *response { return add(f.member, msg, "thumbs_up") }, 200, "", ""},
		{"a member removes a reaction", func() *response { return remove(f.member, msg, "heart") }, 200, "", ""},
		{"a bot token cannot add reactions (forbidden)", func() *response { return add(f.bot, msg, "heart") }, 403, "forbidden", ""},
		{"a bot token cannot remove reactions (forbidden)", func() *response { return remove(f.bot, msg, "heart") }, 403, "forbidden", ""},
		{"a user token without reactions:write gets missing_scope", func() *response { return add(f.noWrite, msg, "heart") }, 403, "missing_scope", ""},
		{"a reaction outside the eight is refused", func() *response { return add(f.member, msg, "thumbsup") }, 400, "validation_error", "reaction"},
		{"a reaction outside the eight is refused on removal", func() *response { return remove(f.member, msg, "smile") }, 400, "validation_error", "reaction"},
		{"reaction is required", func() *response {
			return react("POST", f.member, map[string]any{"messageId": msg}, "")
		}, 400, "validation_error", "reaction"},
		{"messageId is required on removal", func() *response { return react("DELETE", f.member, nil, "?reaction=heart") }, 400, "validation_error", "messageId"},
		{"messageId must be a UUID", func() *response { return add(f.member, "m-1", "heart") }, 400, "validation_error", "messageId"},
		// The thumbs_up removal refused here stays (the reactions subtest below counts it).
		{"a reaction given twice on removal is refused", func() *response {
			return react("DELETE", f.member, nil, "?messageId="+msg+"&reaction=thumbs_up&reaction=heart")
		}, 400, "validation_error", "reaction"},
		{"a messageId given twice on removal is refused", func() *response {
			return react("DELETE", f.member, nil, "?messageId="+msg+"&messageId="+deleted+"&reaction=thumbs_up")
		}, 400, "validation_error", "messageId"},
		{"an unknown message is not found", func() *response { return add(f.member, ids.New(), "heart") }, 404, "not_found", ""},
		{"a member outside the conversation gets not found", func() *response { return add(f.outsider, msg, "heart") }, 404, "not_found", ""},
		{"a deleted message is not found", func() *response { return add(f.member, deleted, "heart") }, 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r()
			if tt.code == "" {
				want(t, r, tt.status)
				if r.field("ok") != true {
					t.Fatalf("body %s", r)
				}
			} else {
				wantError(t, r, tt.status, tt.code)
			}
			if tt.path != "" && !strings.HasPrefix(r.str("message"), tt.path+":") {
				t.Fatalf("message does not name %s: %s", tt.path, r)
			}
			if got := r.hdr("RateLimit-Policy"); tt.status < 300 && got != `"write";q=50;w=60` {
				t.Fatalf("RateLimit-Policy %q", got)
			}
		})
	}
	t.Run("messages show reactions with count and userIds", func(t *testing.T) {
		other := h.userToken(t, f.ws, f.inst, f.fixture.outside, filesUserScopes...)
		want(t, h.ops(t, "POST", "/conversations/"+f.conv+"/members", map[string]any{"userId": f.fixture.outside}), 200)
		want(t, add(other, msg, "thumbs_up"), 200)
		want(t, add(other, msg, "eyes"), 200)
		r := h.do(t, request{method: "GET", path: "/api/v1/messages/" + msg, token: f.bot})
		want(t, r, 200)
		got := string(mustJSON(t, r.field("message.reactions")))
		wantJSON := `[{"count":2,"reaction":"thumbs_up","userIds":["` + f.fixture.member + `","` + f.fixture.outside + `"]},{"count":1,"reaction":"eyes","userIds":["` + f.fixture.outside + `"]}]`
		if got != wantJSON {
			t.Fatalf("reactions %s, want %s", got, wantJSON)
		}
		want(t, remove(other, msg, "eyes"), 200)
		want(t, remove(other, msg, "eyes"), 200)
		r = h.do(t, request{method: "GET", path: "/api/v1/messages/" + msg, token: f.bot})
		if got := string(mustJSON(t, r.field("message.reactions"))); !strings.Contains(got, `"count":2`) || strings.Contains(got, "eyes") {
			t.Fatalf("reactions after removal %s", got)
		}
	})
	t.Run("a message without reactions shows an empty list", func(t *testing.T) {
		r := h.do(t, request{method: "GET", path: "/api/v1/messages/" + deleted, token: f.bot})
		want(t, r, 200)
		if got := string(mustJSON(t, r.field("message.reactions"))); got != "[]" {
			t.Fatalf("reactions %s", got)
		}
	})
}

func TestImageBlocksOverHTTP(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	r := h.upload(t, f.member, fileUpload(f.conv, "image/png", pngHeader))
	want(t, r, 201)
	here := r.str("file.id")
	r = h.upload(t, f.member, fileUpload(f.other, "image/png", pngHeader))
	want(t, r, 201)
	there := r.str("file.id")
	post := func(token, fileID string) *response {
		h.clk.Advance(2 * time.Second)
		return h.do(t, request{method: "POST", path: "/api/v1/messages", token: token, json: map[string]any{
			"conversationId": f.conv, "text": "look",
			"blocks": []any{map[string]any{"type": "image", "fileId": fileID, "alt": "a picture"}},
		}})
	}
	want(t, post(f.member, here), 201)
	want(t, post(f.bot, here), 201)
	r = post(f.member, there)
	wantError(t, r, 400, "validation_error")
	if !strings.HasPrefix(r.str("message"), "blocks[0].fileId:") {
		t.Fatalf("message %s", r)
	}
}

// fileTestBytes is n bytes that are not all alike.
func fileTestBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>11)
	}
	return b
}

// rawExchange writes req on a fresh connection and reads as many responses
// as want has statuses, failing unless they match in order.
func (h *testServer) rawExchange(t *testing.T, req []byte, want ...int) []*fasthttp.Response {
	t.Helper()
	conn, err := h.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go conn.Write(req) // the server answers while it reads: do not wait for the write
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	var out []*fasthttp.Response
	for i, status := range want {
		resp := &fasthttp.Response{}
		if err := resp.Read(br); err != nil {
			t.Fatalf("response %d of %d: %v", i+1, len(want), err)
		}
		if resp.StatusCode() != status {
			t.Fatalf("response %d: status %d, want %d: %s", i+1, resp.StatusCode(), status, resp.Body())
		}
		out = append(out, resp)
	}
	return out
}

func uploadHead(token string, contentLength int) string {
	head := "POST /api/v1/files HTTP/1.1\r\nHost: kit.test\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\n"
	if contentLength < 0 {
		return head + "Transfer-Encoding: chunked\r\n\r\n"
	}
	return head + "Content-Length: " + strconv.Itoa(contentLength) + "\r\n\r\n"
}

const healthz = "GET /healthz HTTP/1.1\r\nHost: kit.test\r\n\r\n"

// chunkedBody is body in HTTP/1.1 chunked transfer coding, in pieces of
// 64 KiB.
func chunkedBody(body []byte) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := min(len(body), 64<<10)
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(body[:n])
		b.WriteString("\r\n")
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

func TestUploadBodies(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t)
	content := fileTestBytes(actors.FileChunkSize + 1000)
	body := mustJSON(t, fileUpload(f.conv, "text/plain", content))
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an upload over the body limit is refused on its Content-Length alone", func(t *testing.T) {
			r := h.rawExchange(t, []byte(uploadHead(f.member, maxFilesBody+4096+1)), 413)
			if !r[0].ConnectionClose() {
				t.Fatal("the connection stays open with the body unread")
			}
		}},
		{"an upload refused before its body is read leaves the connection usable", func(t *testing.T) {
			req := append([]byte(uploadHead("nope", len(body))), body...)
			r := h.rawExchange(t, append(req, healthz...), 401, 200)
			if string(r[1].Body()) != `{"ok":true}` {
				t.Fatalf("the next request read %s", r[1].Body())
			}
		}},
		{"content broken early is answered at once, and the connection goes on", func(t *testing.T) {
			h.clk.Advance(3 * time.Second)
			broken := bytes.Replace(body, []byte(`"contentBase64":"`), []byte("\"contentBase64\":\"\x01"), 1)
			req := append([]byte(uploadHead(f.member, len(broken))), broken...)
			r := h.rawExchange(t, append(req, healthz...), 400, 200)
			if !strings.Contains(string(r[0].Body()), "malformed JSON at byte") {
				t.Fatalf("answer %s", r[0].Body())
			}
		}},
		{"a chunked upload is read whole and stored", func(t *testing.T) {
			h.clk.Advance(3 * time.Second)
			r := h.rawExchange(t, append([]byte(uploadHead(f.member, -1)), chunkedBody(body)...), 201)
			var created struct{ File struct{ ID string } }
			if err := json.Unmarshal(r[0].Body(), &created); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(3 * time.Second)
			got := h.do(t, request{method: "GET", path: "/api/v1/files/" + created.File.ID + "/content", token: f.member})
			want(t, got, 200)
			if !bytes.Equal(got.body, content) {
				t.Fatal("content differs from the upload")
			}
		}},
		{"a chunked body over the limit is refused", func(t *testing.T) {
			h.clk.Advance(3 * time.Second)
			r := h.rawExchange(t, append([]byte(uploadHead(f.member, -1)), chunkedBody(make([]byte, maxFilesBody+4097))...), 413)
			if !r[0].ConnectionClose() {
				t.Fatal("the connection stays open with the body unread")
			}
		}},
		{"the body of another route is read whole before its handler", func(t *testing.T) {
			post := mustJSON(t, map[string]any{"conversationId": f.conv, "text": strings.Repeat("x", 20_000)})
			req := "POST /api/v1/messages HTTP/1.1\r\nHost: kit.test\r\nAuthorization: Bearer " + f.member +
				"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
			h.clk.Advance(3 * time.Second)
			r := h.rawExchange(t, append([]byte(req), chunkedBody(post)...), 400)
			if !strings.Contains(string(r[0].Body()), "text") {
				t.Fatalf("answer %s, want a text length error", r[0].Body())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestByteBudget(t *testing.T) {
	// done reports whether ch closes within a moment.
	done := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}
	acquire := func(b *byteBudget, n int) chan struct{} {
		ch := make(chan struct{})
		go func() { b.acquire(n); close(ch) }()
		return ch
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a request for more than the budget takes the whole budget", func(t *testing.T) {
			b := newByteBudget(10)
			if got := b.acquire(25); got != 10 {
				t.Fatalf("took %d", got)
			}
		}},
		{"a request waits until enough is given back", func(t *testing.T) {
			b := newByteBudget(10)
			first := b.acquire(6)
			second := acquire(b, 6)
			if done(second) {
				t.Fatal("12 of 10 bytes taken")
			}
			b.release(first)
			if !done(second) {
				t.Fatal("still waiting after the release")
			}
		}},
		{"waiters are served in order: a small one does not pass a large one", func(t *testing.T) {
			b := newByteBudget(10)
			all := b.acquire(10)
			large := acquire(b, 8)
			eventually.True(t, "the large waiter in line", func() bool { // large queues first
				b.mu.Lock()
				defer b.mu.Unlock()
				return len(b.waiting) == 1
			})
			small := acquire(b, 1)
			b.release(2)
			if done(small) || done(large) {
				t.Fatal("a waiter went ahead of the first in line")
			}
			b.release(all - 2)
			if !done(large) || !done(small) {
				t.Fatal("still waiting with the budget free")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
