package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

// TestNotFoundIsOneAnswerPerRoute: docs/api.md "Surfaces and conventions", a 404 never tells
// absent from not visible. For every route with an id in its path or body,
// a made-up id, an id of another workspace and (where there is one) an id
// of this workspace the caller cannot see get the same answer: status, code,
// message and headers (but Date, and RateLimit, whose remaining count goes
// down between the calls).
func TestNotFoundIsOneAnswerPerRoute(t *testing.T) {
	h := ts
	f := h.newFilesFixture(t) // the caller's workspace
	g := h.newFilesFixture(t) // another workspace

	// What each workspace holds: a message and a file in the channel its
	// bot is in (conv), and in the one it is not in (other).
	fOtherMsg := h.postAs(t, f.member, f.other)
	gMsg := h.postAs(t, g.member, g.conv)
	file := func(x *filesFixture, conv string) string {
		r := h.upload(t, x.member, fileUpload(conv, "text/plain", []byte("x")))
		want(t, r, 201)
		return r.str("file.id")
	}
	fOtherFile, gFile := file(f, f.other), file(g, g.conv)
	made := ids.New()

	type call struct {
		token, method, path string
		body                any
	}
	get := func(token, path string) call { return call{token, "GET", path, nil} }
	tests := []struct {
		name                    string
		madeUp, foreign, hidden call // hidden: zero when no such id exists
	}{
		{"GET /conversations/{id}", get(f.bot, "/conversations/"+made), get(f.bot, "/conversations/"+g.conv), get(f.bot, "/conversations/"+f.other)},
		{"GET /conversations/{id}/members", get(f.bot, "/conversations/"+made+"/members"), get(f.bot, "/conversations/"+g.conv+"/members"), get(f.bot, "/conversations/"+f.other+"/members")},
		{"GET /conversations/{id}/messages", get(f.bot, "/conversations/"+made+"/messages"), get(f.bot, "/conversations/"+g.conv+"/messages"), get(f.bot, "/conversations/"+f.other+"/messages")},
		{"POST /messages conversationId",
			call{f.bot, "POST", "/messages", map[string]any{"conversationId": made, "text": "x"}},
			call{f.bot, "POST", "/messages", map[string]any{"conversationId": g.conv, "text": "x"}},
			call{f.bot, "POST", "/messages", map[string]any{"conversationId": f.other, "text": "x"}}},
		{"GET /messages/{id}", get(f.bot, "/messages/"+made), get(f.bot, "/messages/"+gMsg), get(f.bot, "/messages/"+fOtherMsg)},
		{"PATCH /messages/{id}",
			call{f.bot, "PATCH", "/messages/" + made, map[string]any{"text": "y"}},
			call{f.bot, "PATCH", "/messages/" + gMsg, map[string]any{"text": "y"}},
			call{f.bot, "PATCH", "/messages/" + fOtherMsg, map[string]any{"text": "y"}}},
		{"DELETE /messages/{id}",
			call{f.bot, "DELETE", "/messages/" + made, nil},
			call{f.bot, "DELETE", "/messages/" + gMsg, nil},
			call{f.bot, "DELETE", "/messages/" + fOtherMsg, nil}},
		{"GET /messages/{id}/replies", get(f.bot, "/messages/"+made+"/replies"), get(f.bot, "/messages/"+gMsg+"/replies"), get(f.bot, "/messages/"+fOtherMsg+"/replies")},
		{"POST /reactions messageId",
			call{f.outsider, "POST", "/reactions", map[string]any{"messageId": made, "reaction": "heart"}},
			call{f.outsider, "POST", "/reactions", map[string]any{"messageId": gMsg, "reaction": "heart"}},
			call{f.outsider, "POST", "/reactions", map[string]any{"messageId": fOtherMsg, "reaction": "heart"}}},
		{"DELETE /reactions messageId",
			call{f.outsider, "DELETE", "/reactions?reaction=heart&messageId=" + made, nil},
			call{f.outsider, "DELETE", "/reactions?reaction=heart&messageId=" + gMsg, nil},
			call{f.outsider, "DELETE", "/reactions?reaction=heart&messageId=" + fOtherMsg, nil}},
		{"POST /files conversationId",
			call{f.outsider, "POST", "/files", fileUpload(made, "text/plain", []byte("x"))},
			call{f.outsider, "POST", "/files", fileUpload(g.conv, "text/plain", []byte("x"))},
			call{f.outsider, "POST", "/files", fileUpload(f.other, "text/plain", []byte("x"))}},
		{"GET /files/{id}", get(f.bot, "/files/"+made), get(f.bot, "/files/"+gFile), get(f.bot, "/files/"+fOtherFile)},
		{"GET /files/{id}/content", get(f.bot, "/files/"+made+"/content"), get(f.bot, "/files/"+gFile+"/content"), get(f.bot, "/files/"+fOtherFile+"/content")},
		{"GET /users/{id}", get(f.fixture.bot, "/users/"+made), get(f.fixture.bot, "/users/"+g.fixture.member), call{}},
		{"GET /dev/kits/{kitId}", get(f.dev, "/dev/kits/"+made), get(f.dev, "/dev/kits/"+g.kitID), call{}},
		{"GET /dev/kits/{kitId}/logs", get(f.dev, "/dev/kits/"+made+"/logs"), get(f.dev, "/dev/kits/"+g.kitID+"/logs"), call{}},
		{"POST /dev/kits/{kitId}/versions/{version}/publish",
			call{f.dev, "POST", "/dev/kits/" + made + "/versions/1.0.0/publish", nil},
			call{f.dev, "POST", "/dev/kits/" + g.kitID + "/versions/1.0.0/publish", nil}, call{}},
		{"POST /dev/kits/{kitId}/domains",
			call{f.dev, "POST", "/dev/kits/" + made + "/domains", map[string]any{"domain": "example.com"}},
			call{f.dev, "POST", "/dev/kits/" + g.kitID + "/domains", map[string]any{"domain": "example.com"}}, call{}},
		{"POST /dev/kits/{kitId}/domains/{domain}/verify",
			call{f.dev, "POST", "/dev/kits/" + made + "/domains/example.com/verify", map[string]any{}},
			call{f.dev, "POST", "/dev/kits/" + g.kitID + "/domains/example.com/verify", map[string]any{}},
			call{f.dev, "POST", "/dev/kits/" + f.kitID + "/domains/example.com/verify", map[string]any{}}},
		{"DELETE /dev/kits/{kitId}/domains/{domain}",
			call{f.dev, "DELETE", "/dev/kits/" + made + "/domains/example.com", nil},
			call{f.dev, "DELETE", "/dev/kits/" + g.kitID + "/domains/example.com", nil},
			call{f.dev, "DELETE", "/dev/kits/" + f.kitID + "/domains/example.com", nil}},
		{"POST /dev/kits/{kitId}/install-link",
			call{f.dev, "POST", "/dev/kits/" + made + "/install-link", nil},
			call{f.dev, "POST", "/dev/kits/" + g.kitID + "/install-link", nil}, call{}},
		{"DELETE /dev/kits/{kitId}/install-link",
			call{f.dev, "DELETE", "/dev/kits/" + made + "/install-link", nil},
			call{f.dev, "DELETE", "/dev/kits/" + g.kitID + "/install-link", nil},
			call{f.dev, "DELETE", "/dev/kits/" + f.kitID + "/install-link", nil}},
	}
	do := func(t *testing.T, c call) *response {
		h.clk.Advance(3 * time.Second) // every bucket full again
		rq := request{method: c.method, path: "/api/v1" + c.path, token: c.token}
		if c.body != nil {
			rq.json = c.body
		}
		r := h.do(t, rq)
		wantError(t, r, 404, "not_found")
		return r
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := do(t, tt.madeUp)
			for _, c := range []call{tt.foreign, tt.hidden} {
				if c.method == "" {
					continue
				}
				if got := do(t, c); !sameNotFound(base, got) {
					t.Fatalf("a made-up id answered\n%v %v\nbut %s %s answered\n%v %v", base, base.header, c.method, c.path, got, got.header)
				}
			}
		})
	}
}

// sameNotFound reports whether two 404s read the same: status, code,
// message and headers but those that differ by nature.
func sameNotFound(a, b *response) bool {
	type body struct{ Code, Message string }
	var x, y body
	if json.Unmarshal(a.body, &x) != nil || json.Unmarshal(b.body, &y) != nil {
		return bytes.Equal(a.body, b.body)
	}
	strip := func(h map[string]string) map[string]string {
		h = maps.Clone(h)
		delete(h, "date")
		delete(h, "content-length") // the correlation id's length
		if _, ok := h["ratelimit"]; ok {
			h["ratelimit"] = "present"
		}
		return h
	}
	return a.status == b.status && x == y && maps.Equal(strip(a.header), strip(b.header)) &&
		slices.Equal(slices.Sorted(maps.Keys(a.header)), slices.Sorted(maps.Keys(b.header)))
}
