package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// docs/api.md "Surfaces and conventions" (One 404): a 404 means "does not exist or is not visible to this
// token", and the two are never distinguished. For every route with an id
// in its path or body, a made-up id, an id of another workspace and (where
// one exists) an id of the same workspace the caller cannot see get the
// same answer: status, code, message and headers (but Date and the body's
// length, which follows the correlation id).
func TestNotFound_AbsentAndInvisibleReadTheSame(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	a, b := newFilesEnv(t, s), newFilesEnv(t, s) // the caller's workspace, another one
	member := userToken(t, a.In, a.W.Mem.ID)     // in Chan and Other
	guest := userToken(t, a.In, a.W.Guest.ID)    // in neither
	bMember := userToken(t, b.In, b.W.Mem.ID)
	bot, dev := a.In.Token, a.W.Dev

	post := func(token, conv string) string {
		r := s.api(t, token, "POST", "/messages", map[string]any{"conversationId": conv, "text": "hi"}, nil)
		want(t, r, 201)
		return r.Str("message.id")
	}
	upload := func(token, conv string) string {
		r := s.api(t, token, "POST", "/files", uploadBody(conv, "text/plain", []byte("x")), nil)
		want(t, r, 201)
		return r.Str("file.id")
	}
	hiddenMsg, foreignMsg := post(member, a.Other.ID), post(bMember, b.Chan.ID)
	hiddenFile, foreignFile := upload(member, a.Other.ID), upload(bMember, b.Chan.ID)
	made := newUUID()

	type call struct {
		token, method, path string
		body                any
	}
	get := func(token, path string) call { return call{token, "GET", path, nil} }
	none := call{}
	tests := []struct {
		name                    string
		madeUp, foreign, hidden call
	}{
		{"GET /conversations/{id}", get(bot, "/conversations/"+made), get(bot, "/conversations/"+b.Chan.ID), get(bot, "/conversations/"+a.Other.ID)},
		{"GET /conversations/{id}/members", get(bot, "/conversations/"+made+"/members"), get(bot, "/conversations/"+b.Chan.ID+"/members"), get(guest, "/conversations/"+a.Other.ID+"/members")},
		{"GET /conversations/{id}/messages", get(bot, "/conversations/"+made+"/messages"), get(bot, "/conversations/"+b.Chan.ID+"/messages"), get(guest, "/conversations/"+a.Other.ID+"/messages")},
		{"POST /messages conversationId",
			call{bot, "POST", "/messages", map[string]any{"conversationId": made, "text": "x"}},
			call{bot, "POST", "/messages", map[string]any{"conversationId": b.Chan.ID, "text": "x"}},
			call{bot, "POST", "/messages", map[string]any{"conversationId": a.Other.ID, "text": "x"}}},
		{"GET /messages/{id}", get(bot, "/messages/"+made), get(bot, "/messages/"+foreignMsg), get(guest, "/messages/"+hiddenMsg)},
		{"PATCH /messages/{id}",
			call{bot, "PATCH", "/messages/" + made, map[string]any{"text": "y"}},
			call{bot, "PATCH", "/messages/" + foreignMsg, map[string]any{"text": "y"}},
			call{bot, "PATCH", "/messages/" + hiddenMsg, map[string]any{"text": "y"}}},
		{"DELETE /messages/{id}", call{bot, "DELETE", "/messages/" + made, nil}, call{bot, "DELETE", "/messages/" + foreignMsg, nil}, call{bot, "DELETE", "/messages/" + hiddenMsg, nil}},
		{"GET /messages/{id}/replies", get(bot, "/messages/"+made+"/replies"), get(bot, "/messages/"+foreignMsg+"/replies"), get(bot, "/messages/"+hiddenMsg+"/replies")},
		{"POST /reactions messageId",
			call{guest, "POST", "/reactions", map[string]any{"messageId": made, "reaction": "heart"}},
			call{guest, "POST", "/reactions", map[string]any{"messageId": foreignMsg, "reaction": "heart"}},
			call{guest, "POST", "/reactions", map[string]any{"messageId": hiddenMsg, "reaction": "heart"}}},
		{"DELETE /reactions messageId",
			call{guest, "DELETE", "/reactions?reaction=heart&messageId=" + made, nil},
			call{guest, "DELETE", "/reactions?reaction=heart&messageId=" + foreignMsg, nil},
			call{guest, "DELETE", "/reactions?reaction=heart&messageId=" + hiddenMsg, nil}},
		{"POST /files conversationId",
			call{guest, "POST", "/files", uploadBody(made, "text/plain", []byte("x"))},
			call{guest, "POST", "/files", uploadBody(b.Chan.ID, "text/plain", []byte("x"))},
			call{guest, "POST", "/files", uploadBody(a.Other.ID, "text/plain", []byte("x"))}},
		{"GET /files/{id}", get(bot, "/files/"+made), get(bot, "/files/"+foreignFile), get(bot, "/files/"+hiddenFile)},
		{"GET /files/{id}/content", get(bot, "/files/"+made+"/content"), get(bot, "/files/"+foreignFile+"/content"), get(guest, "/files/"+hiddenFile+"/content")},
		{"GET /users/{id}", get(a.NoFilesScope.Token, "/users/"+made), get(a.NoFilesScope.Token, "/users/"+b.W.Mem.ID), none},
		{"GET /dev/kits/{kitId}", get(dev, "/dev/kits/"+made), get(dev, "/dev/kits/"+b.In.Kit.ID), none},
		{"GET /dev/kits/{kitId}/logs", get(dev, "/dev/kits/"+made+"/logs"), get(dev, "/dev/kits/"+b.In.Kit.ID+"/logs"), none},
		{"POST /dev/kits/{kitId}/versions/{version}/publish",
			call{dev, "POST", "/dev/kits/" + made + "/versions/1.0.0/publish", nil},
			call{dev, "POST", "/dev/kits/" + b.In.Kit.ID + "/versions/1.0.0/publish", nil},
			call{dev, "POST", "/dev/kits/" + a.In.Kit.ID + "/versions/9.9.9/publish", nil}},
		{"POST /dev/kits/{kitId}/domains",
			call{dev, "POST", "/dev/kits/" + made + "/domains", map[string]any{"domain": "example.com"}},
			call{dev, "POST", "/dev/kits/" + b.In.Kit.ID + "/domains", map[string]any{"domain": "example.com"}}, none},
		{"POST /dev/kits/{kitId}/domains/{domain}/verify",
			call{dev, "POST", "/dev/kits/" + made + "/domains/example.com/verify", map[string]any{}},
			call{dev, "POST", "/dev/kits/" + b.In.Kit.ID + "/domains/example.com/verify", map[string]any{}},
			call{dev, "POST", "/dev/kits/" + a.In.Kit.ID + "/domains/example.com/verify", map[string]any{}}},
		{"DELETE /dev/kits/{kitId}/domains/{domain}",
			call{dev, "DELETE", "/dev/kits/" + made + "/domains/example.com", nil},
			call{dev, "DELETE", "/dev/kits/" + b.In.Kit.ID + "/domains/example.com", nil},
			call{dev, "DELETE", "/dev/kits/" + a.In.Kit.ID + "/domains/example.com", nil}},
		{"POST /dev/kits/{kitId}/install-link",
			call{dev, "POST", "/dev/kits/" + made + "/install-link", nil},
			call{dev, "POST", "/dev/kits/" + b.In.Kit.ID + "/install-link", nil}, none},
		{"DELETE /dev/kits/{kitId}/install-link",
			call{dev, "DELETE", "/dev/kits/" + made + "/install-link", nil},
			call{dev, "DELETE", "/dev/kits/" + b.In.Kit.ID + "/install-link", nil},
			call{dev, "DELETE", "/dev/kits/" + a.In.Kit.ID + "/install-link", nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			do := func(c call) *Resp {
				t.Helper()
				r := s.api(t, c.token, c.method, c.path, c.body, nil)
				wantError(t, r, 404, "not_found")
				return r
			}
			base := do(tt.madeUp)
			for _, c := range []call{tt.foreign, tt.hidden} {
				if c.method != "" {
					sameNotFound(t, base, do(c))
				}
			}
		})
	}

	t.Run("POST /hooks/v1/{installationId}/{webhookId}/{secret}", func(t *testing.T) {
		_, ac, ain := webhookEnv(t, s, 5)
		_, bc, bin := webhookEnv(t, s, 5)
		live, foreign := ain.hook(t, ac.ID), bin.hook(t, bc.ID)
		seg := strings.Split(live.Path, "/") // "", hooks, v1, inst, hook, secret
		body := map[string]any{"text": "hi"}
		base := s.do(t, "POST", "/hooks/v1/"+newUUID()+"/"+newUUID()+"/"+randToken(), "", body, nil)
		wantError(t, base, 404, "not_found")
		for _, path := range []string{
			"/hooks/v1/" + ain.ID + "/" + live.ID + "/" + randToken(), // a wrong secret
			"/hooks/v1/" + bin.ID + "/" + live.ID + "/" + seg[5],      // another workspace's installation
			strings.Replace(foreign.Path, bin.ID, ain.ID, 1),          // another workspace's webhook
		} {
			r := s.do(t, "POST", path, "", body, nil)
			wantError(t, r, 404, "not_found")
			sameNotFound(t, base, r)
		}
	})
}

// sameNotFound fails t unless two 404s read the same: status, code,
// message and headers, but Date and Content-Length (the correlation id's
// length).
func sameNotFound(t *testing.T, a, b *Resp) {
	t.Helper()
	if a.Status != b.Status || a.Str("code") != b.Str("code") || a.Str("message") != b.Str("message") {
		t.Fatalf("a made-up id answered%s\nbut another id answered%s", a, b)
	}
	strip := func(h http.Header) http.Header {
		h = h.Clone()
		h.Del("Date")
		h.Del("Content-Length")
		return h
	}
	ha, hb := strip(a.Header), strip(b.Header)
	if headerNames(ha) != headerNames(hb) {
		t.Fatalf("headers %s, want %s%s", headerNames(hb), headerNames(ha), b)
	}
	for k := range ha {
		if ha.Get(k) != hb.Get(k) {
			t.Fatalf("header %s: %q, want %q%s", k, hb.Get(k), ha.Get(k), b)
		}
	}
}
