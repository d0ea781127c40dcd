package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

// TestVisibilityMatrix: SPEC.md 7 and docs/api.md "Surfaces and
// conventions": a bot token sees the channels its Kit bot was added to, a
// user token its member's conversations, and a 404 never tells absent from
// not visible. For every kind of conversation (public and private channel,
// group, dm; live and archived), every caller (the bot in it, a bot of the
// workspace not in it, a member, a guest, a member of the workspace not in
// it, a deactivated member, another workspace's bot and member) and every
// Web API route that names it or an object in it, the answer is the
// documented one; and every 404 reads as the one of a made-up id
// (sameNotFound), asked with the same token and query.
func TestVisibilityMatrix(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t) // the bot of f.inst is in the channels below
	g := h.newFilesFixture(t) // another workspace
	botOut := h.filesBot(t, f.fixture)

	user := func(role string) string {
		r := h.ops(t, "POST", "/workspaces/"+f.ws+"/users", map[string]any{"displayName": "Person", "role": role})
		want(t, r, 201)
		return r.str("user.id")
	}
	memberID, guestID, goneID := user("member"), user("guest"), user("member")
	member := h.userToken(t, f.ws, f.inst, memberID, filesUserScopes...)
	guest := h.userToken(t, f.ws, f.inst, guestID, filesUserScopes...)
	gone := h.userToken(t, f.ws, f.inst, goneID, filesUserScopes...)

	type conv struct {
		name, id, msg, file string
		bot, archived       bool // the bot of f.inst is in it
	}
	var convs []*conv
	for _, archived := range []bool{false, true} {
		for _, k := range []struct{ kind, visibility string }{{"channel", "public"}, {"channel", "private"}, {"group", "private"}, {"dm", "private"}} {
			members := []string{memberID, guestID, goneID}
			body := map[string]any{"kind": k.kind, "visibility": k.visibility}
			if k.kind == "channel" {
				body["name"] = "c"
			}
			if k.kind == "dm" {
				members = members[:2]
			}
			body["memberIds"] = members
			r := h.ops(t, "POST", "/workspaces/"+f.ws+"/conversations", body)
			want(t, r, 201)
			c := &conv{name: k.visibility + " " + k.kind, id: r.str("conversation.id"), bot: k.kind == "channel", archived: archived}
			if archived {
				c.name += " archived"
			}
			if c.bot {
				want(t, h.ops(t, "POST", "/installations/"+f.inst+"/channels", map[string]any{"conversationId": c.id}), 200)
			}
			c.msg = h.postAs(t, member, c.id)
			r = h.upload(t, member, fileUpload(c.id, "text/plain", []byte("x")))
			want(t, r, 201)
			c.file = r.str("file.id")
			if archived {
				want(t, h.ops(t, "POST", "/conversations/"+c.id+"/archive", nil), 200)
			}
			convs = append(convs, c)
		}
	}
	want(t, h.ops(t, "DELETE", "/users/"+goneID, nil), 200)

	type caller struct {
		name, token string
		bot         bool
		sees        func(*conv) bool
		author      bool // wrote every conversation's message
		deactivated bool
	}
	never := func(*conv) bool { return false }
	always := func(*conv) bool { return true }
	callers := []caller{
		{name: "bot in the channels", token: f.bot, bot: true, sees: func(c *conv) bool { return c.bot }},
		{name: "bot of the workspace in none", token: botOut, bot: true, sees: never},
		{name: "guest", token: guest, sees: always},
		{name: "member not in them", token: f.outsider, sees: never},
		{name: "deactivated member", token: gone, deactivated: true},
		{name: "another workspace's bot", token: g.bot, bot: true, sees: never},
		{name: "another workspace's member", token: g.member, sees: never},
		// Last: the author's DELETE deletes.
		{name: "member", token: member, sees: always, author: true},
	}

	// A route's request for a conversation; conv nil: with made-up ids.
	type route struct {
		name  string
		files bool // counted in the files bucket
		req   func(c *conv) request
		// answer is the status and code for a caller who sees c.
		answer func(cl caller, c *conv) (int, string)
	}
	made := &conv{id: ids.New(), msg: ids.New(), file: ids.New()}
	get := func(path func(*conv) string) func(*conv) request {
		return func(c *conv) request { return request{method: "GET", path: path(c)} }
	}
	ok := func(caller, *conv) (int, string) { return 200, "" }
	invalid := func(caller, *conv) (int, string) { return 400, "validation_error" }
	write := func(status int) func(cl caller, c *conv) (int, string) {
		return func(cl caller, c *conv) (int, string) {
			if c.archived {
				return 409, "conflict"
			}
			return status, ""
		}
	}
	byAuthor := func(cl caller, c *conv) (int, string) {
		if !cl.author {
			return 403, "forbidden"
		}
		return write(200)(cl, c)
	}
	userOnly := func(status int) func(cl caller, c *conv) (int, string) {
		return func(cl caller, c *conv) (int, string) {
			if cl.bot {
				return 403, "forbidden"
			}
			return write(status)(cl, c)
		}
	}
	routes := []route{
		{"GET /conversations/{id}", false, get(func(c *conv) string { return "/conversations/" + c.id }), ok},
		{"GET /conversations/{id}/members", false, get(func(c *conv) string { return "/conversations/" + c.id + "/members" }), ok},
		{"GET /conversations/{id}/members?limit=0", false, get(func(c *conv) string { return "/conversations/" + c.id + "/members?limit=0" }), invalid},
		{"GET /conversations/{id}/messages", false, get(func(c *conv) string { return "/conversations/" + c.id + "/messages" }), ok},
		{"GET /conversations/{id}/messages?limit=0", false, get(func(c *conv) string { return "/conversations/" + c.id + "/messages?limit=0" }), invalid},
		{"GET /messages/{id}", false, get(func(c *conv) string { return "/messages/" + c.msg }), ok},
		{"GET /messages/{id}/replies", false, get(func(c *conv) string { return "/messages/" + c.msg + "/replies" }), ok},
		{"GET /messages/{id}/replies?limit=0", false, get(func(c *conv) string { return "/messages/" + c.msg + "/replies?limit=0" }), invalid},
		{"GET /messages/{id}/replies?cursor=bad", false, get(func(c *conv) string { return "/messages/" + c.msg + "/replies?cursor=%21" }), invalid},
		{"GET /files/{id}", false, get(func(c *conv) string { return "/files/" + c.file }), ok},
		{"GET /files/{id}/content", true, get(func(c *conv) string { return "/files/" + c.file + "/content" }), ok},
		{"POST /messages", false, func(c *conv) request {
			return request{method: "POST", path: "/messages", json: map[string]any{"conversationId": c.id, "text": "x"}}
		}, write(201)},
		{"POST /messages threadParentId", false, func(c *conv) request {
			return request{method: "POST", path: "/messages", json: map[string]any{"conversationId": c.id, "text": "x", "threadParentId": c.msg}}
		}, write(201)},
		{"PATCH /messages/{id}", false, func(c *conv) request {
			return request{method: "PATCH", path: "/messages/" + c.msg, json: map[string]any{"text": "y"}}
		}, byAuthor},
		{"POST /reactions", false, func(c *conv) request {
			return request{method: "POST", path: "/reactions", json: map[string]any{"messageId": c.msg, "reaction": "heart"}}
		}, userOnly(200)},
		{"DELETE /reactions", false, func(c *conv) request {
			return request{method: "DELETE", path: "/reactions?reaction=heart&messageId=" + c.msg}
		}, userOnly(200)},
		{"POST /files", true, func(c *conv) request {
			return request{method: "POST", path: "/files", json: fileUpload(c.id, "text/plain", []byte("x"))}
		}, userOnly(201)},
		// Last: it deletes the message of the conversation.
		{"DELETE /messages/{id}", false, func(c *conv) request { return request{method: "DELETE", path: "/messages/" + c.msg} }, byAuthor},
	}

	do := func(t *testing.T, cl caller, rt route, c *conv) *response {
		t.Helper()
		// Every bucket ready again: files 20/minute, posts 1/second.
		if rt.files {
			h.clk.Advance(3 * time.Second)
		} else {
			h.clk.Advance(1200 * time.Millisecond)
		}
		rq := rt.req(c)
		rq.path, rq.token = "/api/v1"+rq.path, cl.token
		return h.do(t, rq)
	}
	for _, c := range convs {
		for _, cl := range callers {
			for _, rt := range routes {
				t.Run(fmt.Sprintf("%s/%s/%s", c.name, cl.name, rt.name), func(t *testing.T) {
					got := do(t, cl, rt, c)
					switch {
					case cl.deactivated:
						wantError(t, got, 401, "invalid_token")
					case cl.sees(c):
						status, code := rt.answer(cl, c)
						if code == "" {
							want(t, got, status)
						} else {
							wantError(t, got, status, code)
						}
					default:
						base := do(t, cl, rt, made)
						if !sameNotFound(base, got) {
							t.Fatalf("a made-up id answered\n%v %v\nbut one not visible\n%v %v", base, base.header, got, got.header)
						}
						if base.status == http.StatusNotFound {
							wantError(t, got, 404, "not_found")
						}
					}
				})
			}
		}
	}
}

// filesBot installs another Kit with the files scopes in f's workspace and
// answers its bot token; its bot is in no channel.
func (h *testServer) filesBot(t *testing.T, f *fixture) string {
	t.Helper()
	slug := "b" + strings.ReplaceAll(ids.New()[24:], "-", "")
	r := h.do(t, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": manifestText(slug, "1.0.0", filesBotScopes, nil),
	}})
	want(t, r, 201)
	r = h.ops(t, "POST", "/workspaces/"+f.ws+"/installations", map[string]any{"kitId": r.str("kitId")})
	want(t, r, 201)
	r = h.ops(t, "POST", "/installations/"+r.str("installation.id")+"/bot-tokens", nil)
	want(t, r, 201)
	return r.str("token")
}
