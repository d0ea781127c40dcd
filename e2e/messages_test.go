package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// checkMessage checks the Message shape of docs/api.md "Message" for a message
// the bot posted.
func checkMessage(t testing.TB, m map[string]any, convID, botID, text string) {
	t.Helper()
	b, _ := json.Marshal(m)
	if !isUUID(jstr(m, "id")) {
		t.Errorf("message.id is not a UUID: %s", b)
	}
	if jstr(m, "conversationId") != convID {
		t.Errorf("message.conversationId = %q, want %s: %s", jstr(m, "conversationId"), convID, b)
	}
	if jstr(m, "author.kind") != "bot" || jstr(m, "author.id") != botID {
		t.Errorf("message.author = %v, want {kind: bot, id: %s}: %s", m["author"], botID, b)
	}
	if text != "" && jstr(m, "text") != text {
		t.Errorf("message.text = %q, want %q", clip(jstr(m, "text"), 80), clip(text, 80))
	}
	parseTime(t, "createdAt", jstr(m, "createdAt"))
	for _, k := range []string{"editedAt", "deletedAt"} {
		if m[k] != nil {
			t.Errorf("a new message has %s = %v: %s", k, m[k], b)
		}
	}
}

func postBody(conv, text string) map[string]any {
	return map[string]any{"conversationId": conv, "text": text}
}

func dividers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"type": "divider"}
	}
	return out
}

// docs/api.md "Messages" POST /messages.
func TestMessages_Post(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	notAdded := env.W.channel(t, "public", env.W.Owner.ID)

	t.Run("post answers 201 message authored by the bot", func(t *testing.T) {
		r := env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "hello world"))
		want(t, r, 201)
		m := jobj(r.JSON, "message")
		checkMessage(t, m, env.Chan.ID, env.In.BotID, "hello world")
		if m["threadParentId"] != nil {
			t.Errorf("a top-level message has threadParentId%s", r)
		}
		g := env.In.api(t, "GET", "/messages/"+jstr(m, "id"), nil)
		want(t, g, 200)
		if !reflect.DeepEqual(jobj(g.JSON, "message"), m) {
			t.Errorf("GET returns a different message than POST did:%s%s", r, g)
		}
	})

	ok := []struct {
		name string
		body map[string]any
	}{
		{"text of 8000 characters is accepted", postBody(env.Chan.ID, strings.Repeat("a", 8000))},
		{"text of 8000 two-byte characters is accepted", postBody(env.Chan.ID, strings.Repeat("é", 8000))},
		{"text with a mention is accepted", postBody(env.Chan.ID, "hi <@user:"+env.W.Mem.ID+">")},
		{"unknown body keys are ignored", map[string]any{"conversationId": env.Chan.ID, "text": "x", "colour": "red", "username": "evil"}},
		{"50 blocks are accepted", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": dividers(50)}},
		{"header and section blocks are accepted", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": []any{
			map[string]any{"type": "header", "text": "Title"},
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*bold*"}},
		}}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			r := env.In.api(t, "POST", "/messages", tc.body)
			want(t, r, 201)
			m := jobj(r.JSON, "message")
			checkMessage(t, m, env.Chan.ID, env.In.BotID, tc.body["text"].(string))
			if bl, ok := tc.body["blocks"]; ok {
				got, _ := json.Marshal(m["blocks"])
				wantB, _ := json.Marshal(bl)
				var a, b any
				_ = json.Unmarshal(got, &a)
				_ = json.Unmarshal(wantB, &b)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("blocks = %s, want %s", clip(string(got), 300), clip(string(wantB), 300))
				}
			}
		})
	}

	bad := []struct {
		name  string
		body  any
		path  string
		echo  string
		extra func(*Resp)
	}{
		{"text is required", map[string]any{"conversationId": env.Chan.ID}, "text", "", nil},
		{"text must be a string", map[string]any{"conversationId": env.Chan.ID, "text": 42}, "text", "", nil},
		{"text of 8001 characters is rejected", postBody(env.Chan.ID, sentinel+strings.Repeat("a", 8001-len(sentinel))), "text", sentinel, nil},
		{"text of 8001 two-byte characters is rejected", postBody(env.Chan.ID, strings.Repeat("é", 8001)), "text", "", nil},
		{"conversationId is required", map[string]any{"text": "x"}, "conversationId", "", nil},
		{"conversationId must be a UUID", postBody(sentinel, "x"), "conversationId", sentinel, nil},
		{"conversationId must be a string", map[string]any{"conversationId": 12, "text": "x"}, "conversationId", "", nil},
		{"conversationId is in lower case, as the API gives it", postBody(strings.ToUpper(env.Chan.ID), "x"), "conversationId", "", nil},
		{"51 blocks are rejected", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": dividers(51)}, "blocks", "", nil},
		{"blocks must be an array", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": map[string]any{"type": sentinel}}, "blocks", sentinel, nil},
		{"threadParentId must be a UUID", map[string]any{"conversationId": env.Chan.ID, "text": "x", "threadParentId": sentinel}, "threadParentId", sentinel, nil},
		{"body must be an object", []any{"x"}, "", "", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := env.In.api(t, "POST", "/messages", tc.body)
			wantValidation(t, r, tc.path, tc.echo)
		})
	}

	t.Run("unknown conversation is 404", func(t *testing.T) {
		r := env.In.api(t, "POST", "/messages", postBody(newUUID(), "x"))
		wantError(t, r, 404, "not_found")
	})
	t.Run("channel the bot was not added to is 404", func(t *testing.T) {
		r := env.In.api(t, "POST", "/messages", postBody(notAdded.ID, "x"))
		wantError(t, r, 404, "not_found")
	})
}

// docs/api.md "Messages": lists are newest first; GET /messages/{id}.
func TestMessages_ListAndGet(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	var posted []map[string]any
	for i := 0; i < 55; i++ {
		posted = append(posted, env.In.post(t, env.Chan.ID, fmt.Sprintf("message %02d", i)))
	}

	t.Run("list is newest first with default limit 50", func(t *testing.T) {
		r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages", nil)
		want(t, r, 200)
		got := jarr(r.JSON, "messages")
		if len(got) != 50 {
			t.Fatalf("default page has %d messages, want 50%s", len(got), r)
		}
		for i, m := range got {
			if wantText := fmt.Sprintf("message %02d", 54-i); jstr(m, "text") != wantText {
				t.Fatalf("item %d is %q, want %q (newest first)", i, jstr(m, "text"), wantText)
			}
		}
		if !reflect.DeepEqual(got[0], posted[54]) {
			t.Errorf("listed message differs from the posted one: %v vs %v", got[0], posted[54])
		}
		next := r.Str("nextCursor")
		if next == "" {
			t.Fatalf("55 messages, page of 50: want a nextCursor%s", r)
		}
		r = env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?cursor="+queryEscape(next), nil)
		want(t, r, 200)
		if n := len(jarr(r.JSON, "messages")); n != 5 || r.Get("nextCursor") != nil || !has(r.JSON, "", "nextCursor") {
			t.Errorf("last page: want 5 messages and nextCursor null%s", r)
		}
		if jstr(jget(r.JSON, "messages.4"), "text") != "message 00" {
			t.Errorf("the oldest message is last%s", r)
		}
	})

	t.Run("walking pages of 7 returns every message once in order", func(t *testing.T) {
		got := walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 7)
		if len(got) != 55 {
			t.Fatalf("%d messages, want 55", len(got))
		}
		for i, m := range got {
			if jstr(m, "id") != jstr(posted[54-i], "id") {
				t.Fatalf("position %d: %s, want %s", i, jstr(m, "id"), jstr(posted[54-i], "id"))
			}
		}
	})

	t.Run("message list limits are checked", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=201", "limit=abc"} {
			r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?"+q, nil)
			wantValidation(t, r, "limit")
		}
		r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?cursor="+strings.Repeat("A", 513), nil)
		wantValidation(t, r, "cursor")
		r = env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?cursor=%25%25garbage", nil)
		wantValidation(t, r, "cursor")
		r = env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?limit=200", nil)
		want(t, r, 200)
		if len(jarr(r.JSON, "messages")) != 55 || r.Get("nextCursor") != nil {
			t.Errorf("limit 200: want all 55 and nextCursor null%s", r)
		}
	})

	t.Run("cursor of another conversation is rejected", func(t *testing.T) {
		c2 := env.W.channel(t, "public", env.W.Owner.ID)
		env.In.addChannel(t, c2.ID)
		env.In.post(t, c2.ID, "a")
		env.In.post(t, c2.ID, "b")
		r := env.In.api(t, "GET", "/conversations/"+c2.ID+"/messages?limit=1", nil)
		want(t, r, 200)
		cur := r.Str("nextCursor")
		r = env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?cursor="+queryEscape(cur), nil)
		wantValidation(t, r, "cursor")
	})

	t.Run("get unknown message is 404", func(t *testing.T) {
		for _, id := range []string{newUUID(), "not-a-uuid"} {
			r := env.In.api(t, "GET", "/messages/"+id, nil)
			wantError(t, r, 404, "not_found")
		}
	})
}

// docs/api.md "Messages" replies and docs/decisions.md threadParentId rule.
func TestMessages_Replies(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	c2 := env.W.channel(t, "public", env.W.Owner.ID)
	env.In.addChannel(t, c2.ID)

	parent := env.In.post(t, env.Chan.ID, "parent")
	pid := jstr(parent, "id")
	reply := func(text, parentID string) *Resp {
		return env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": text, "threadParentId": parentID})
	}
	r1 := reply("reply 1", pid)
	want(t, r1, 201)
	r2 := reply("reply 2", pid)
	want(t, r2, 201)
	for _, r := range []*Resp{r1, r2} {
		if r.Str("message.threadParentId") != pid {
			t.Errorf("reply has threadParentId %q, want %s%s", r.Str("message.threadParentId"), pid, r)
		}
	}

	t.Run("replies lists replies newest first", func(t *testing.T) {
		r := env.In.api(t, "GET", "/messages/"+pid+"/replies", nil)
		want(t, r, 200)
		got := ids(walk(t, s, env.In.Token, "/messages/"+pid+"/replies", "messages", 1), "id")
		wantIDs := []string{r2.Str("message.id"), r1.Str("message.id")}
		if !reflect.DeepEqual(got, wantIDs) {
			t.Errorf("replies = %v, want %v%s", got, wantIDs, r)
		}
	})

	t.Run("conversation history has top-level messages and replies", func(t *testing.T) {
		got := ids(walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 0), "id")
		wantIDs := []string{r2.Str("message.id"), r1.Str("message.id"), pid}
		if !reflect.DeepEqual(got, wantIDs) {
			t.Errorf("history = %v, want %v", got, wantIDs)
		}
	})

	other := env.In.post(t, c2.ID, "parent elsewhere")
	deleted := env.In.post(t, env.Chan.ID, "to be deleted")
	want(t, env.In.api(t, "DELETE", "/messages/"+jstr(deleted, "id"), nil), 200)
	foreign := newBotEnv(t, s)
	foreignMsg := foreign.In.post(t, foreign.Chan.ID, "other workspace")

	bad := []struct {
		name, parent string
	}{
		{"reply to a reply is rejected", r1.Str("message.id")},
		{"parent in another conversation is rejected", jstr(other, "id")},
		{"unknown parent is rejected", newUUID()},
		{"deleted parent is rejected", jstr(deleted, "id")},
		{"parent in another workspace is rejected", jstr(foreignMsg, "id")},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := reply("bad reply", tc.parent)
			wantValidation(t, r, "threadParentId")
		})
	}

	t.Run("replies of an unknown message is 404", func(t *testing.T) {
		r := env.In.api(t, "GET", "/messages/"+newUUID()+"/replies", nil)
		wantError(t, r, 404, "not_found")
		r = env.In.api(t, "GET", "/messages/"+jstr(foreignMsg, "id")+"/replies", nil)
		wantError(t, r, 404, "not_found")
	})
}

// docs/api.md "Messages" PATCH and DELETE, "Deleting a message", and
// docs/decisions.md (403 for another author, 409 for a deleted message).
func TestMessages_EditAndDelete(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	hidden := env.W.channel(t, "public", env.W.Owner.ID)
	second := env.W.install(t, env.W.kit(t, baseScopes...), env.Chan.ID, hidden.ID)

	t.Run("patch own message sets text and editedAt", func(t *testing.T) {
		m := env.In.post(t, env.Chan.ID, "before")
		r := env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), map[string]any{"text": "after", "blocks": dividers(2)})
		want(t, r, 200)
		e := jobj(r.JSON, "message")
		if jstr(e, "id") != jstr(m, "id") || jstr(e, "text") != "after" || jstr(e, "createdAt") != jstr(m, "createdAt") ||
			len(jarr(e, "blocks")) != 2 || jstr(e, "author.id") != env.In.BotID {
			t.Errorf("edited message%s", r)
		}
		edited := parseTime(t, "editedAt", jstr(e, "editedAt"))
		if edited.Before(parseTime(t, "createdAt", jstr(m, "createdAt"))) {
			t.Errorf("editedAt before createdAt%s", r)
		}
		g := env.In.api(t, "GET", "/messages/"+jstr(m, "id"), nil)
		want(t, g, 200)
		if g.Str("message.text") != "after" || g.Str("message.editedAt") == "" {
			t.Errorf("GET after PATCH%s", g)
		}
		r = env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), map[string]any{"text": "again", "blocks": nil})
		want(t, r, 200)
		if b := r.Get("message.blocks"); b != nil && len(jarr(r.JSON, "message.blocks")) != 0 {
			t.Errorf("blocks: null removes the blocks%s", r)
		}
	})

	t.Run("patch validation", func(t *testing.T) {
		m := env.In.post(t, env.Chan.ID, "x")
		for _, tc := range []struct {
			name string
			body map[string]any
			path string
		}{
			{"text is required", map[string]any{}, "text"},
			{"text of 8001 characters is rejected", map[string]any{"text": sentinel + strings.Repeat("b", 8001-len(sentinel))}, "text"},
			{"51 blocks are rejected", map[string]any{"text": "x", "blocks": dividers(51)}, "blocks"},
		} {
			r := env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), tc.body)
			wantValidation(t, r, tc.path, sentinel)
		}
		r := env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), map[string]any{"text": strings.Repeat("c", 8000)})
		want(t, r, 200)
	})

	t.Run("delete answers the tombstone and is idempotent", func(t *testing.T) {
		m := env.In.post(t, env.Chan.ID, "doomed")
		id := jstr(m, "id")
		r := env.In.api(t, "DELETE", "/messages/"+id, nil)
		want(t, r, 200)
		if r.Str("message.id") != id || r.Str("message.deletedAt") == "" {
			t.Fatalf("want the message with deletedAt set%s", r)
		}
		parseTime(t, "deletedAt", r.Str("message.deletedAt"))
		again := env.In.api(t, "DELETE", "/messages/"+id, nil)
		want(t, again, 200)
		if again.Str("message.id") != id || again.Str("message.deletedAt") != r.Str("message.deletedAt") {
			t.Errorf("second DELETE must return the same tombstone%s%s", r, again)
		}
		g := env.In.api(t, "GET", "/messages/"+id, nil)
		want(t, g, 200)
		if g.Str("message.deletedAt") != r.Str("message.deletedAt") {
			t.Errorf("GET of a deleted message shows the tombstone%s", g)
		}
		p := env.In.api(t, "PATCH", "/messages/"+id, map[string]any{"text": "resurrect"})
		wantError(t, p, 409, "conflict")
	})

	theirs := second.post(t, env.Chan.ID, "second bot's message")
	t.Run("patch of another author's message is 403 forbidden", func(t *testing.T) {
		want(t, env.In.api(t, "GET", "/messages/"+jstr(theirs, "id"), nil), 200)
		r := env.In.api(t, "PATCH", "/messages/"+jstr(theirs, "id"), map[string]any{"text": "hijack"})
		wantError(t, r, 403, "forbidden")
	})
	t.Run("delete of another author's message is 403 forbidden", func(t *testing.T) {
		r := env.In.api(t, "DELETE", "/messages/"+jstr(theirs, "id"), nil)
		wantError(t, r, 403, "forbidden")
		g := second.api(t, "GET", "/messages/"+jstr(theirs, "id"), nil)
		want(t, g, 200)
		if g.Get("message.deletedAt") != nil || g.Str("message.text") != "second bot's message" {
			t.Errorf("the forbidden calls changed the message%s", g)
		}
	})

	invisible := second.post(t, hidden.ID, "in a channel the first bot is not in")
	unknown := newUUID()
	for _, tc := range []struct{ name, id string }{
		{"message in a channel the bot is not in", jstr(invisible, "id")},
		{"unknown message", unknown},
		{"non-UUID id", "zz-not-a-uuid"},
	} {
		t.Run(tc.name+" is 404 for get patch delete", func(t *testing.T) {
			wantError(t, env.In.api(t, "GET", "/messages/"+tc.id, nil), 404, "not_found")
			wantError(t, env.In.api(t, "PATCH", "/messages/"+tc.id, map[string]any{"text": "x"}), 404, "not_found")
			wantError(t, env.In.api(t, "DELETE", "/messages/"+tc.id, nil), 404, "not_found")
		})
	}
}

// docs/decisions.md: writes into an archived conversation are 409 conflict;
// reads keep working.
func TestMessages_ArchivedConversation(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	m := env.In.post(t, env.Chan.ID, "before archive")
	gone := env.In.post(t, env.Chan.ID, "deleted before archive")
	want(t, env.In.api(t, "DELETE", "/messages/"+jstr(gone, "id"), nil), 200)
	r := s.ops(t, "POST", "/ops/v1/conversations/"+env.Chan.ID+"/archive", nil)
	want(t, r, 200)

	t.Run("post is 409 conflict", func(t *testing.T) {
		wantError(t, env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "after archive")), 409, "conflict")
	})
	t.Run("patch is 409 conflict", func(t *testing.T) {
		wantError(t, env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), map[string]any{"text": "edit"}), 409, "conflict")
	})
	t.Run("delete is 409 conflict", func(t *testing.T) {
		wantError(t, env.In.api(t, "DELETE", "/messages/"+jstr(m, "id"), nil), 409, "conflict")
	})
	t.Run("a delete of a message deleted before answers its tombstone again (SPEC 3: idempotent)", func(t *testing.T) {
		r := env.In.api(t, "DELETE", "/messages/"+jstr(gone, "id"), nil)
		want(t, r, 200)
		if r.Get("message.deletedAt") == nil {
			t.Fatalf("want the tombstone%s", r)
		}
	})
	t.Run("reads keep working", func(t *testing.T) {
		r := env.In.api(t, "GET", "/conversations/"+env.Chan.ID, nil)
		want(t, r, 200)
		if r.Get("conversation.archived") != true {
			t.Errorf("archived: true expected%s", r)
		}
		r = env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages", nil)
		want(t, r, 200)
		if got := ids(walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 0), "id"); !reflect.DeepEqual(got, []string{jstr(gone, "id"), jstr(m, "id")}) {
			t.Errorf("history of the archived conversation = %v", got)
		}
		want(t, env.In.api(t, "GET", "/messages/"+jstr(m, "id"), nil), 200)
	})
}

// docs/api.md "Idempotency record" and "Messages" Idempotency-Key; docs/decisions.md scope.
func TestMessages_Idempotency(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	c2 := env.W.channel(t, "public", env.W.Owner.ID)
	env.In.addChannel(t, c2.ID)
	second := env.W.install(t, env.W.kit(t, baseScopes...), env.Chan.ID)
	post := func(in *Install, key string, body map[string]any) *Resp {
		return s.api(t, in.Token, "POST", "/messages", body, map[string]string{"Idempotency-Key": key})
	}

	t.Run("same key and content replays the message with 200", func(t *testing.T) {
		key := "key-" + randHex(8)
		first := post(env.In, key, postBody(env.Chan.ID, "once"))
		want(t, first, 201)
		for i := 0; i < 2; i++ {
			again := post(env.In, key, postBody(env.Chan.ID, "once"))
			want(t, again, 200)
			if !reflect.DeepEqual(jobj(again.JSON, "message"), jobj(first.JSON, "message")) {
				t.Errorf("replay differs from the stored message%s%s", first, again)
			}
		}
		got := walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 0)
		n := 0
		for _, m := range got {
			if jstr(m, "id") == first.Str("message.id") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the message is in the history %d times, want once", n)
		}
	})

	t.Run("same key different content is 409 idempotency_conflict", func(t *testing.T) {
		key := "key-" + randHex(8)
		first := post(env.In, key, postBody(env.Chan.ID, "original"))
		want(t, first, 201)
		parent := env.In.post(t, env.Chan.ID, "a parent")
		for _, tc := range []struct {
			name string
			body map[string]any
		}{
			{"different text", postBody(env.Chan.ID, "changed")},
			{"added blocks", map[string]any{"conversationId": env.Chan.ID, "text": "original", "blocks": dividers(1)}},
			{"added threadParentId", map[string]any{"conversationId": env.Chan.ID, "text": "original", "threadParentId": jstr(parent, "id")}},
		} {
			r := post(env.In, key, tc.body)
			if r.Status != 409 || r.Str("code") != "idempotency_conflict" {
				t.Errorf("%s: want 409 idempotency_conflict%s", tc.name, r)
			}
			checkErrorBody(t, r)
		}
		want(t, post(env.In, key, postBody(env.Chan.ID, "original")), 200)
	})

	t.Run("key is scoped to the conversation", func(t *testing.T) {
		key := "key-" + randHex(8)
		a := post(env.In, key, postBody(env.Chan.ID, "same"))
		want(t, a, 201)
		b := post(env.In, key, postBody(c2.ID, "same"))
		want(t, b, 201)
		if a.Str("message.id") == b.Str("message.id") {
			t.Errorf("two conversations share one message%s%s", a, b)
		}
	})

	t.Run("key is scoped to the caller", func(t *testing.T) {
		key := "key-" + randHex(8)
		a := post(env.In, key, postBody(env.Chan.ID, "same"))
		want(t, a, 201)
		b := post(second, key, postBody(env.Chan.ID, "same"))
		want(t, b, 201)
		if b.Str("message.author.id") != second.BotID {
			t.Errorf("the second bot got the first bot's message%s", b)
		}
	})

	t.Run("a key of 255 printable characters is accepted", func(t *testing.T) {
		suffix := randHex(20) + "!#$%&'*+-.^_`|"
		key := strings.Repeat("~", 255-len(suffix)) + suffix
		want(t, post(env.In, key, postBody(env.Chan.ID, "long key")), 201)
		want(t, post(env.In, key, postBody(env.Chan.ID, "long key")), 200)
	})

	for _, tc := range []struct{ name, key string }{
		{"empty key is rejected", ""},
		{"key of 256 characters is rejected", strings.Repeat("k", 256)},
		{"key with a space is rejected", "zz SENTINEL zz"},
		{"key with a tab is rejected", "zz\tSENTINEL"},
		{"key with a non-ASCII character is rejected", "zz-SENTINEL-é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(env.In, tc.key, postBody(env.Chan.ID, "bad key"))
			wantError(t, r, 400, "validation_error")
			noEcho(t, r, "SENTINEL")
		})
	}
}

// Expiries, on a server of their own because they move the clock far
// forward: the idempotency record is kept 24 hours (docs/api.md "Idempotency record"), and a
// developer token ends after its ttlSeconds (OPERATIONS.md section 2).
func TestExpiries(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	env := newBotEnv(t, s)

	t.Run("developer token expires after ttlSeconds", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/users/"+env.W.Owner.ID+"/developer-tokens", map[string]any{"name": "short", "ttlSeconds": 60})
		want(t, r, 201)
		tok := r.Str("token")
		upload := func(version string) *Resp {
			return s.api(t, tok, "POST", "/dev/kits/versions", map[string]any{
				"manifest": manifestString(manifest(env.Kit.Slug, version, baseScopes)),
			}, nil)
		}
		want(t, upload("1.0.1"), 201)
		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 61}), 200)
		wantError(t, upload("1.0.2"), 401, "invalid_token")
	})

	t.Run("idempotency key is kept 24 hours", func(t *testing.T) {
		key := "day-" + randHex(8)
		post := func() *Resp {
			return s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "daily"), map[string]string{"Idempotency-Key": key})
		}
		first := post()
		want(t, first, 201)

		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 86000}), 200)
		r := post()
		want(t, r, 200)
		if r.Str("message.id") != first.Str("message.id") {
			t.Errorf("within 24 h the replay returns the stored message%s", r)
		}

		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 401}), 200)
		r = post()
		want(t, r, 201)
		if r.Str("message.id") == first.Str("message.id") {
			t.Errorf("after 24 h the key is forgotten: want a new message%s", r)
		}
	})
}

// docs/decisions.md: a cursor pins the position, so posts made while paging
// never shift or repeat items.
func TestMessages_PaginationStableUnderPosts(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	var originals []string
	for i := 0; i < 120; i++ {
		originals = append(originals, jstr(env.In.post(t, env.Chan.ID, fmt.Sprintf("original %03d", i)), "id"))
	}
	var seen []string
	cursor := ""
	for page := 0; page < 20; page++ {
		path := "/conversations/" + env.Chan.ID + "/messages?limit=25"
		if cursor != "" {
			path += "&cursor=" + queryEscape(cursor)
		}
		r := env.In.api(t, "GET", path, nil)
		want(t, r, 200)
		seen = append(seen, ids(toMaps(jarr(r.JSON, "messages")), "id")...)
		if r.Get("nextCursor") == nil {
			break
		}
		cursor = r.Str("nextCursor")
		for i := 0; i < 20; i++ {
			env.In.post(t, env.Chan.ID, fmt.Sprintf("between pages %d #%d", page, i))
		}
	}
	count := map[string]int{}
	for _, id := range seen {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("message %s seen %d times", id, n)
		}
	}
	var got []string
	orig := map[string]bool{}
	for _, id := range originals {
		orig[id] = true
	}
	for _, id := range seen {
		if orig[id] {
			got = append(got, id)
		}
	}
	wantIDs := make([]string, len(originals))
	for i, id := range originals {
		wantIDs[len(originals)-1-i] = id
	}
	if !reflect.DeepEqual(got, wantIDs) {
		t.Errorf("originals seen while paging: %d of %d, in order: %v", len(got), len(wantIDs), reflect.DeepEqual(got, wantIDs[:min(len(got), len(wantIDs))]))
	}
	if len(seen) != len(originals) {
		t.Errorf("paging from the newest saw %d messages; a pinned cursor sees exactly the %d that existed at the first page", len(seen), len(originals))
	}
}

func toMaps(a []any) []map[string]any {
	out := make([]map[string]any, 0, len(a))
	for _, v := range a {
		m, _ := v.(map[string]any)
		out = append(out, m)
	}
	return out
}

// SPEC.md 3 "Idempotency record": the same key with the same content
// returns the stored message with 200, an archive since included: the
// replay writes nothing, and a client whose 201 was lost learns its post
// was made. Any other post is still 409.
func TestMessages_AReplayAfterTheArchiveAnswersTheStoredMessage(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	key := "arch-" + randHex(8)
	post := func() *Resp {
		return s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "before archive"), map[string]string{"Idempotency-Key": key})
	}
	first := post()
	want(t, first, 201)
	want(t, s.ops(t, "POST", "/ops/v1/conversations/"+env.Chan.ID+"/archive", nil), 200)

	again := post()
	want(t, again, 200)
	if !reflect.DeepEqual(jobj(again.JSON, "message"), jobj(first.JSON, "message")) {
		t.Errorf("replay differs from the stored message%s%s", first, again)
	}
	// A new post (no key, or a new key) is still refused.
	wantError(t, env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, "after archive")), 409, "conflict")
	r := s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "after archive"), map[string]string{"Idempotency-Key": key + "-new"})
	wantError(t, r, 409, "conflict")
}

// docs/decisions.md "Idempotency-Key scope": a member's user tokens of two
// Kits keep their keys apart, so one Kit's key never answers the other's
// post with its message.
func TestMessages_TwoKitsActingForOneMemberHaveTheirOwnKeys(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.Owner.ID, w.Mem.ID)
	a := w.install(t, w.kit(t, baseScopes...), c.ID)
	b := w.install(t, w.kit(t, baseScopes...), c.ID)
	ta, tb := userToken(t, a, w.Mem.ID), userToken(t, b, w.Mem.ID)
	key := "daily-report"
	ra := s.api(t, ta, "POST", "/messages", postBody(c.ID, "report"), map[string]string{"Idempotency-Key": key})
	want(t, ra, 201)
	rb := s.api(t, tb, "POST", "/messages", postBody(c.ID, "report"), map[string]string{"Idempotency-Key": key})
	want(t, rb, 201)
	if rb.Str("message.id") == ra.Str("message.id") {
		t.Errorf("Kit B's post answered Kit A's message: Kit B's post was never made%s%s", ra, rb)
	}
}
