package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Reactions and files: docs/api.md "Reactions", "Files" and "Limits", and
// docs/files.md. Rows that need a user token go through userToken, which
// skips until the authorization flow issues user tokens.

var fileScopes = []string{"conversations:read", "messages:read", "messages:write", "files:read", "files:write", "reactions:write"}

// filesEnv is a workspace with two channels (the member and the owner are in
// both, the guest in neither) and a Kit asking for the file and reaction
// scopes, whose bot is in the first channel only.
type filesEnv struct {
	W            *Workspace
	Chan, Other  Conv
	In           *Install
	NoFilesScope *Install // a Kit without any file or reaction scope, bot in Chan
}

func newFilesEnv(t testing.TB, s *Server) *filesEnv {
	t.Helper()
	w := newWorkspace(t, s)
	e := &filesEnv{W: w}
	e.Chan = w.channel(t, "public", w.Owner.ID, w.Mem.ID)
	e.Other = w.channel(t, "public", w.Owner.ID, w.Mem.ID)
	// userToken asks for the Kit's scopes as user scopes too.
	e.In = w.install(t, w.kit(t, fileScopes...), e.Chan.ID)
	e.NoFilesScope = w.install(t, w.kit(t, baseScopes...), e.Chan.ID)
	return e
}

func uploadBody(conv, mimeType string, content []byte) map[string]any {
	return map[string]any{"conversationId": conv, "name": "report.bin", "mimeType": mimeType, "contentBase64": base64.StdEncoding.EncodeToString(content)}
}

func withField(body map[string]any, key string, v any) map[string]any {
	out := map[string]any{}
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

var pngBytes = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'}

func TestBotTokensCannotReactOrUpload(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newFilesEnv(t, s)
	msg := e.In.post(t, e.Chan.ID, "react to me")
	id := jstr(msg, "id")
	tests := []struct {
		name   string
		token  string
		method string
		path   string
		body   any
	}{
		{"a bot token with files:write cannot upload", e.In.Token, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", []byte("hi"))},
		{"a bot token without files:write cannot upload either (forbidden, not missing_scope)", e.NoFilesScope.Token, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", []byte("hi"))},
		{"a bot token with reactions:write cannot add a reaction", e.In.Token, "POST", "/reactions", map[string]any{"messageId": id, "reaction": "heart"}},
		{"a bot token cannot remove a reaction", e.In.Token, "DELETE", "/reactions?messageId=" + id + "&reaction=heart", nil},
		{"a bot token without reactions:write cannot add a reaction either", e.NoFilesScope.Token, "POST", "/reactions", map[string]any{"messageId": id, "reaction": "heart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, s.api(t, tt.token, tt.method, tt.path, tt.body, nil), 403, "forbidden")
		})
	}
	t.Run("messages carry an empty reactions list", func(t *testing.T) {
		r := e.In.api(t, "GET", "/messages/"+id, nil)
		want(t, r, 200)
		if arr, ok := r.Get("message.reactions").([]any); !ok || len(arr) != 0 {
			t.Fatalf("message.reactions must be [] (docs/decisions.md)%s", r)
		}
	})
	t.Run("a bot reading an unknown file gets not found", func(t *testing.T) {
		wantError(t, e.In.api(t, "GET", "/files/"+newUUID(), nil), 404, "not_found")
		wantError(t, e.In.api(t, "GET", "/files/"+newUUID()+"/content", nil), 404, "not_found")
	})
	t.Run("a bot without files:read gets missing_scope", func(t *testing.T) {
		r := s.api(t, e.NoFilesScope.Token, "GET", "/files/"+newUUID(), nil, nil)
		wantError(t, r, 403, "missing_scope")
		if got := r.Header.Get("X-Service-Required-Scope"); got != "files:read" {
			t.Fatalf("X-Service-Required-Scope %q%s", got, r)
		}
	})
}

func TestUploadRulesE2E(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	text := uploadBody(e.Chan.ID, "text/plain", []byte("hello"))
	tests := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		path   string
	}{
		{"a member uploads into their channel", text, 201, "", ""},
		{"every one of the six types is accepted", uploadBody(e.Chan.ID, "text/markdown", []byte("# hi")), 201, "", ""},
		{"a type outside the six is refused", withField(text, "mimeType", "image/gif"), 400, "validation_error", "mimeType"},
		{"a name of 121 characters is refused", withField(text, "name", strings.Repeat("n", 121)), 400, "validation_error", "name"},
		{"contentBase64 of 3 characters is refused", withField(text, "contentBase64", "aGk"), 400, "validation_error", "contentBase64"},
		{"contentBase64 outside the pattern is refused", withField(text, "contentBase64", "aGk-aGk_"), 400, "validation_error", "contentBase64"},
		{"contentBase64 with bad padding is refused", withField(text, "contentBase64", "aGVsbG8"), 400, "validation_error", "contentBase64"},
		{"contentBase64 with non-zero padding bits is refused", withField(text, "contentBase64", "aGVsbG9="), 400, "validation_error", "contentBase64"},
		{"5000000 decoded bytes pass", uploadBody(e.Chan.ID, "application/json", make([]byte, 5_000_000)), 201, "", ""},
		{"5000001 decoded bytes are payload_too_large", uploadBody(e.Chan.ID, "application/json", make([]byte, 5_000_001)), 413, "payload_too_large", ""},
		{"a png with the PNG signature passes", uploadBody(e.Chan.ID, "image/png", pngBytes), 201, "", ""},
		{"a png without it is refused and not stored", uploadBody(e.Chan.ID, "image/png", []byte("not a png")), 400, "validation_error", "contentBase64"},
		{"a jpeg without FFD8FF is refused", uploadBody(e.Chan.ID, "image/jpeg", pngBytes), 400, "validation_error", "contentBase64"},
		{"a pdf without %PDF- is refused", uploadBody(e.Chan.ID, "application/pdf", []byte("hello")), 400, "validation_error", "contentBase64"},
		{"a conversation the member is not in is not found", uploadBody(e.W.channel(t, "public", e.W.Owner.ID).ID, "text/plain", []byte("x")), 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.api(t, member, "POST", "/files", tt.body, nil)
			if tt.code == "" {
				want(t, r, tt.status)
				return
			}
			if tt.path != "" {
				wantValidation(t, r, tt.path)
				return
			}
			wantError(t, r, tt.status, tt.code)
		})
	}
}

func TestFileVisibilityE2E(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	guest := userToken(t, e.In, e.W.Guest.ID)
	content := bytes.Repeat([]byte("0123456789abcdef"), 60_000) // 960000 bytes: two chunks
	r := s.api(t, member, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", content), nil)
	want(t, r, 201)
	here := r.Str("file.id")
	r = s.api(t, member, "POST", "/files", uploadBody(e.Other.ID, "text/plain", []byte("other")), nil)
	want(t, r, 201)
	there := r.Str("file.id")

	tests := []struct {
		name   string
		token  string
		path   string
		status int
	}{
		{"the member reads a file of their channel", member, "/files/" + here, 200},
		{"the bot of the channel reads it", e.In.Token, "/files/" + here, 200},
		{"the bot of the channel reads its content", e.In.Token, "/files/" + here + "/content", 200},
		{"the bot does not see a file of a channel it is not in", e.In.Token, "/files/" + there, 404},
		{"nor its content", e.In.Token, "/files/" + there + "/content", 404},
		{"a member outside the channel does not see the file", guest, "/files/" + here, 404},
		{"nor its content", guest, "/files/" + here + "/content", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.api(t, tt.token, "GET", tt.path, nil, nil)
			if tt.status == 200 {
				want(t, r, 200)
			} else {
				wantError(t, r, tt.status, "not_found")
			}
		})
	}
	t.Run("content is the bytes with the download headers", func(t *testing.T) {
		r := s.api(t, member, "GET", "/files/"+here+"/content", nil, nil)
		want(t, r, 200)
		if !bytes.Equal(r.Body, content) {
			t.Fatalf("content: %d bytes, want %d identical", len(r.Body), len(content))
		}
		h := r.Header
		if h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Service-Content-Type") != "text/plain" ||
			h.Get("Content-Length") != strconv.Itoa(len(content)) || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
			t.Fatalf("headers %v", h)
		}
	})
	t.Run("an image block resolves only a file of its own conversation", func(t *testing.T) {
		img := func(id string) map[string]any {
			return map[string]any{"conversationId": e.Chan.ID, "text": "img", "blocks": []any{map[string]any{"type": "image", "fileId": id, "alt": "x"}}}
		}
		want(t, s.api(t, member, "POST", "/messages", img(here), nil), 201)
		wantValidation(t, s.api(t, member, "POST", "/messages", img(there), nil), "blocks[0].fileId")
	})
}

func TestReactionsE2E(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	owner := userToken(t, e.In, e.W.Owner.ID)
	guest := userToken(t, e.In, e.W.Guest.ID)
	id := jstr(e.In.post(t, e.Chan.ID, "react"), "id")
	gone := jstr(e.In.post(t, e.Chan.ID, "gone"), "id")
	want(t, e.In.api(t, "DELETE", "/messages/"+gone, nil), 200)
	add := func(token, msg, reaction string) *Resp {
		return s.api(t, token, "POST", "/reactions", map[string]any{"messageId": msg, "reaction": reaction}, nil)
	}
	remove := func(token, msg, reaction string) *Resp {
		return s.api(t, token, "DELETE", "/reactions?messageId="+msg+"&reaction="+reaction, nil, nil)
	}
	for _, reaction := range []string{"thumbs_up", "heart", "laugh", "celebrate", "eyes", "thinking", "thanks", "check"} {
		t.Run("the reaction "+reaction+" is accepted and idempotent", func(t *testing.T) {
			want(t, add(member, id, reaction), 200)
			want(t, add(member, id, reaction), 200)
			want(t, remove(member, id, reaction), 200)
			want(t, remove(member, id, reaction), 200)
		})
	}
	t.Run("a value outside the eight is refused", func(t *testing.T) {
		wantValidation(t, add(member, id, "thumbsup"), "reaction")
		wantValidation(t, remove(member, id, "+1"), "reaction")
	})
	t.Run("a member outside the channel, an unknown or a deleted message: not found", func(t *testing.T) {
		wantError(t, add(guest, id, "heart"), 404, "not_found")
		wantError(t, add(member, newUUID(), "heart"), 404, "not_found")
		wantError(t, add(member, gone, "heart"), 404, "not_found")
	})
	t.Run("the message shows each reaction with count and userIds", func(t *testing.T) {
		want(t, add(member, id, "eyes"), 200)
		want(t, add(owner, id, "eyes"), 200)
		want(t, add(owner, id, "check"), 200)
		r := e.In.api(t, "GET", "/messages/"+id, nil)
		want(t, r, 200)
		rs := jarr(r.JSON, "message.reactions")
		if len(rs) != 2 || jstr(rs[0], "reaction") != "eyes" || jget(rs[0], "count") != float64(2) ||
			!sameSet(strs(jarr(rs[0], "userIds")), []string{e.W.Mem.ID, e.W.Owner.ID}) || jstr(rs[1], "reaction") != "check" {
			t.Fatalf("reactions%s", r)
		}
	})
}

// TestFileSurvivesSIGKILL: an upload answered 201 is on disk, bytes and all.
func TestFileSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off"}
	s := startServerOpts(t, opts)
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	content := make([]byte, 2_000_000)
	for i := range content {
		content[i] = byte(i * 31 >> 3)
	}
	content = append(pngBytes, content...)
	r := s.api(t, member, "POST", "/files", uploadBody(e.Chan.ID, "image/png", content), nil)
	want(t, r, 201)
	id := r.Str("file.id")
	s.kill()

	s2 := startServerOpts(t, opts)
	r = s2.api(t, member, "GET", "/files/"+id+"/content", nil, nil)
	want(t, r, 200)
	if !bytes.Equal(r.Body, content) || r.Header.Get("X-Service-Content-Type") != "image/png" {
		t.Fatalf("after SIGKILL: %d bytes (want %d identical), type %q", len(r.Body), len(content), r.Header.Get("X-Service-Content-Type"))
	}
}

// TestFilesFamilyLimit: POST /files and GET /files/{id}/content share one
// bucket of 20 a minute per installation; GET /files/{id} is a read.
func TestFilesFamilyLimit(t *testing.T) {
	s := startServerOpts(t, ServerOpts{Limits: "spec"})
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	r := s.api(t, member, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", []byte("x")), nil)
	want(t, r, 201)
	id := r.Str("file.id")
	ok, limited, _, elapsed := burst(t, 80, func(i int) *Resp {
		if i%2 == 0 {
			return s.api(t, e.In.Token, "GET", "/files/"+id+"/content", nil, nil)
		}
		return s.api(t, member, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", []byte("x")), nil)
	})
	// The bucket refills in real time too (20 a minute): a slow machine
	// may earn a few more (ratelimit_test.go).
	if limited == nil || ok < 19 || ok > allowed(19, 20.0/60, elapsed) {
		t.Fatalf("%d files requests passed after the first upload in %v, want 19 (plus 20 a minute) then a 429", ok, elapsed)
	}
	checkRetryAfter(t, limited, 60)
	want(t, s.api(t, member, "GET", "/files/"+id, nil, nil), 200)
}

// TestUploadBodiesE2E: uploads are read from the connection as they arrive
// (docs/files.md, "Files: memory"), and the connection stays as usable as
// when bodies were read whole first.
func TestUploadBodiesE2E(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	content := make([]byte, 2_000_000)
	for i := range content {
		content[i] = byte(i*7 + i>>13)
	}
	body, err := json.Marshal(uploadBody(e.Chan.ID, "text/plain", content))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.URL, "http://")
	head := func(token string, length int) string {
		h := "POST /api/v1/files HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\n"
		if length < 0 {
			return h + "Transfer-Encoding: chunked\r\n\r\n"
		}
		return h + "Content-Length: " + strconv.Itoa(length) + "\r\n\r\n"
	}
	const healthz = "GET /healthz HTTP/1.1\r\nHost: kitd\r\n\r\n"
	// exchange sends the pieces (pausing between them) on one connection
	// and reads one response per status in want.
	exchange := func(t *testing.T, pieces [][]byte, want ...int) []*fasthttp.Response {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go func() {
			for i, p := range pieces {
				if i > 0 {
					time.Sleep(30 * time.Millisecond)
				}
				if _, err := conn.Write(p); err != nil {
					return
				}
			}
		}()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(conn)
		var out []*fasthttp.Response
		for i, status := range want {
			resp := &fasthttp.Response{}
			if err := resp.Read(br); err != nil {
				t.Fatalf("response %d: %v", i+1, err)
			}
			if resp.StatusCode() != status {
				t.Fatalf("response %d: status %d, want %d: %s", i+1, resp.StatusCode(), status, resp.Body())
			}
			out = append(out, resp)
		}
		return out
	}
	stored := func(t *testing.T, resp *fasthttp.Response) {
		var created struct{ File struct{ ID string } }
		if err := json.Unmarshal(resp.Body(), &created); err != nil {
			t.Fatal(err)
		}
		r := s.api(t, member, "GET", "/files/"+created.File.ID+"/content", nil, nil)
		want(t, r, 200)
		if !bytes.Equal(r.Body, content) {
			t.Fatalf("stored %d bytes, want the %d uploaded", len(r.Body), len(content))
		}
	}
	t.Run("a body arriving in pieces is decoded as it comes and stored whole", func(t *testing.T) {
		third := len(body) / 3
		r := exchange(t, [][]byte{[]byte(head(member, len(body))), body[:third], body[third : 2*third], body[2*third:]}, 201)
		stored(t, r[0])
	})
	t.Run("a chunked upload is stored", func(t *testing.T) {
		var b bytes.Buffer
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 1<<20)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		b.WriteString("0\r\n\r\n")
		r := exchange(t, [][]byte{[]byte(head(member, -1)), b.Bytes()}, 201)
		stored(t, r[0])
	})
	t.Run("an upload refused before its body is read leaves the connection usable", func(t *testing.T) {
		r := exchange(t, [][]byte{[]byte(head("nope", len(body))), body, []byte(healthz)}, 401, 200)
		if string(r[1].Body()) != `{"ok":true}` {
			t.Fatalf("the next request read %s", r[1].Body())
		}
	})
	t.Run("an upload over 8 MiB is refused on its Content-Length, before its body is sent", func(t *testing.T) {
		r := exchange(t, [][]byte{[]byte(head(member, 8<<20+4097))}, 413)
		if !r[0].ConnectionClose() {
			t.Fatal("the connection stays open with the body unread")
		}
	})
}
