package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// jsonOfSize is {"<key>":"aaa...",<fixed>} padded to exactly n bytes.
func jsonOfSize(n int, fixed, key string) raw {
	head := "{" + fixed + `"` + key + `":"`
	tail := `"}`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		panic("too small")
	}
	return raw(head + strings.Repeat("a", pad) + tail)
}

// docs/decisions.md and docs/api.md "Errors": malformed bodies, media types,
// body limits, unknown ids, and the error body shape.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	m := env.In.post(t, env.Chan.ID, "target")
	msgPath := "/api/v1/messages/" + jstr(m, "id")
	convField := fmt.Sprintf(`"conversationId":%q,`, env.Chan.ID)

	type call struct {
		name, method, path, token string
	}
	web := call{"web POST /messages", "POST", "/api/v1/messages", env.In.Token}
	patch := call{"web PATCH /messages/{id}", "PATCH", msgPath, env.In.Token}
	opsCall := call{"operator POST /workspaces", "POST", "/ops/v1/workspaces", s.OpToken}
	dev := call{"developer POST /dev/kits/versions", "POST", "/api/v1/dev/kits/versions", env.W.Dev}

	for _, c := range []call{web, patch, opsCall, dev} {
		t.Run("malformed JSON is 400 on "+c.name, func(t *testing.T) {
			for _, body := range []string{`{"text": "x",`, `{"text": }`, `not json at all`, `{"text":"x"} trailing`} {
				r := s.do(t, c.method, c.path, c.token, raw(body), nil)
				wantError(t, r, 400, "validation_error")
			}
		})
		t.Run("wrong Content-Type is 415 on "+c.name, func(t *testing.T) {
			for _, tc := range []struct{ ct, body string }{
				{"text/plain", `{"text":"x","name":"x"}`},
				{"application/x-www-form-urlencoded", "text=x&name=x"},
				{"multipart/form-data; boundary=xyz", "--xyz\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nx\r\n--xyz--\r\n"},
				{"application/xml", `<text>x</text>`},
			} {
				r := s.do(t, c.method, c.path, c.token, raw(tc.body), map[string]string{"Content-Type": tc.ct})
				wantError(t, r, 415, "unsupported_media_type")
			}
		})
		t.Run("body over 1 MiB is 413 on "+c.name, func(t *testing.T) {
			body := jsonOfSize(1<<20+1, convField, "text")
			var r *Resp
			var err error
			for try := 0; try < 3; try++ {
				if r, err = s.request(c.method, c.path, c.token, body, nil); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("%s %s with a body of 1 MiB + 1 byte: no answer (%v); want 413 payload_too_large", c.method, c.path, err)
			}
			wantError(t, r, 413, "payload_too_large")
		})
	}

	t.Run("a POST that takes no body refuses a malformed one, as every route", func(t *testing.T) {
		// docs/decisions.md "Request bodies": an empty body or an object
		// is taken, anything else is 400, and nothing is made.
		for _, c := range []call{
			{"operator POST /users/{userId}/sessions", "POST", "/ops/v1/users/" + env.W.Mem.ID + "/sessions", s.OpToken},
			{"operator POST /installations/{id}/bot-tokens", "POST", "/ops/v1/installations/" + env.In.ID + "/bot-tokens", s.OpToken},
			{"operator POST /conversations/{id}/archive", "POST", "/ops/v1/conversations/" + env.Chan.ID + "/archive", s.OpToken},
			{"operator POST /kits/{kitId}/client-secret", "POST", "/ops/v1/kits/" + env.Kit.ID + "/client-secret", s.OpToken},
			{"developer POST /dev/kits/{kitId}/versions/{version}/publish", "POST", "/api/v1/dev/kits/" + env.Kit.ID + "/versions/" + env.Kit.Version + "/publish", env.W.Dev},
			{"web POST /auth/rotate", "POST", "/api/v1/auth/rotate", env.In.Token},
		} {
			wantError(t, s.do(t, c.method, c.path, c.token, raw(`not json`), nil), 400, "validation_error")
		}
		want(t, env.In.api(t, "GET", "/auth/test", nil), 200) // the bot token was not rotated
	})

	t.Run("a DELETE refuses a malformed body, and deletes nothing", func(t *testing.T) {
		m := env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": "kept"})
		want(t, m, 201)
		id := m.Str("message.id")
		for _, body := range []string{`[1]`, `not json`, `"x"`} {
			wantError(t, s.do(t, "DELETE", "/api/v1/messages/"+id, env.In.Token, raw(body), nil), 400, "validation_error")
		}
		if g := env.In.api(t, "GET", "/messages/"+id, nil); g.Status != 200 || g.Str("message.text") != "kept" {
			t.Fatalf("the message after refused deletions: %d %s", g.Status, clip(string(g.Body), 300))
		}
		want(t, s.do(t, "DELETE", "/api/v1/messages/"+id, env.In.Token, raw(`{}`), nil), 200) // an object is taken
	})

	t.Run("charset parameter on application/json is accepted", func(t *testing.T) {
		r := s.do(t, "POST", "/api/v1/messages", env.In.Token, raw(`{`+convField+`"text":"utf8"}`),
			map[string]string{"Content-Type": "application/json; charset=utf-8"})
		want(t, r, 201)
	})

	t.Run("body of exactly 1 MiB is read", func(t *testing.T) {
		r := s.do(t, "POST", "/api/v1/messages", env.In.Token, jsonOfSize(1<<20, convField, "text"), nil)
		// The text is far over 8000 characters: the body was read and validated.
		wantValidation(t, r, "text")
	})

	t.Run("wrong JSON type is 400 naming the path", func(t *testing.T) {
		r := env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": []any{"x"}})
		wantValidation(t, r, "text")
		r = env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": []any{"x", "y", 3}})
		wantValidation(t, r, "blocks[0]")
	})

	unknown := newUUID()
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"GET unknown message", "GET", "/api/v1/messages/" + unknown, nil},
		{"PATCH unknown message", "PATCH", "/api/v1/messages/" + unknown, map[string]any{"text": "x"}},
		{"DELETE unknown message", "DELETE", "/api/v1/messages/" + unknown, nil},
		{"GET unknown conversation", "GET", "/api/v1/conversations/" + unknown, nil},
		{"GET unknown conversation messages", "GET", "/api/v1/conversations/" + unknown + "/messages", nil},
		{"GET unknown user", "GET", "/api/v1/users/" + unknown, nil},
		{"GET non-UUID message id", "GET", "/api/v1/messages/12345", nil},
		{"unknown route", "GET", "/api/v1/no-such-route", nil},
	} {
		t.Run(tc.name+" is 404", func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, env.In.Token, tc.body, nil)
			wantError(t, r, 404, "not_found")
		})
	}

	t.Run("every error has its own correlationId", func(t *testing.T) {
		seen := map[string]bool{}
		for i := 0; i < 5; i++ {
			r := env.In.api(t, "GET", "/messages/"+unknown, nil)
			wantError(t, r, 404, "not_found")
			id := r.Str("correlationId")
			if seen[id] {
				t.Errorf("correlationId %q repeated", id)
			}
			seen[id] = true
		}
	})
}
