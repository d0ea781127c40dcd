package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/eventually"
)

// docs/deliveries.md "Events": data holds the resource in the Web API's
// field names, so a Kit reads an event with the same types as a GET. Each
// row compares an event's data with what the Web API answered for the
// write or answers to a GET by the Kit's bot.
func TestEventDataIsWhatTheWebAPIAnswers(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	w := newWorkspace(t, s)
	k, _ := w.receivingKit(t, rcv, []string{"message.posted", "message.edited", "message.deleted", "channel.member_joined",
		"channel.member_left", "channel.archived", "bot.added", "bot.removed", "installation.updated", "user.joined"}, baseScopes...)
	conv := w.channel(t, "private", w.Owner.ID)
	in := w.install(t, k, conv.ID)

	// next waits for the next event of type typ and returns its data.
	seen := 0
	next := func(t *testing.T, typ string) map[string]any {
		t.Helper()
		var data map[string]any
		eventually.True(t, "an event "+typ, func() bool {
			got := rcv.received()
			for ; seen < len(got); seen++ {
				if jstr(got[seen].event, "type") == typ {
					data = jobj(got[seen].event, "data")
					seen++
					return true
				}
			}
			return false
		})
		return data
	}
	same := func(t *testing.T, what string, event, api any) {
		t.Helper()
		// Through JSON both ways, so that numbers compare alike.
		norm := func(v any) any {
			b, _ := json.Marshal(v)
			var out any
			_ = json.Unmarshal(b, &out)
			return out
		}
		if !reflect.DeepEqual(norm(event), norm(api)) {
			e, _ := json.Marshal(event)
			a, _ := json.Marshal(api)
			t.Fatalf("%s of the event:\n%s\nthe Web API's:\n%s", what, e, a)
		}
	}

	t.Run("bot.added carries the conversation as GET /conversations/{id}", func(t *testing.T) {
		d := next(t, "bot.added")
		g := in.api(t, "GET", "/conversations/"+conv.ID, nil)
		want(t, g, 200)
		same(t, "conversation", d["conversation"], g.Get("conversation"))
	})
	var posted *Resp
	t.Run("message.posted carries the message as POST /messages answers it", func(t *testing.T) {
		posted = in.api(t, "POST", "/messages", map[string]any{"conversationId": conv.ID, "text": "hello",
			"blocks": []any{map[string]any{"type": "header", "text": "Title"}}})
		want(t, posted, 201)
		same(t, "message", next(t, "message.posted")["message"], posted.Get("message"))
	})
	t.Run("message.edited carries the message as PATCH answers it", func(t *testing.T) {
		e := in.api(t, "PATCH", "/messages/"+posted.Str("message.id"), map[string]any{"text": "edited"})
		want(t, e, 200)
		same(t, "message", next(t, "message.edited")["message"], e.Get("message"))
	})
	t.Run("message.deleted carries the tombstone as DELETE answers it", func(t *testing.T) {
		e := in.api(t, "DELETE", "/messages/"+posted.Str("message.id"), nil)
		want(t, e, 200)
		same(t, "message", next(t, "message.deleted")["message"], e.Get("message"))
	})
	t.Run("channel.member_joined carries the conversation and the member as the Web API", func(t *testing.T) {
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+conv.ID+"/members", map[string]any{"userId": w.Mem.ID}), 200)
		d := next(t, "channel.member_joined")
		g := in.api(t, "GET", "/conversations/"+conv.ID, nil)
		want(t, g, 200)
		same(t, "conversation", d["conversation"], g.Get("conversation"))
		ms := in.api(t, "GET", "/conversations/"+conv.ID+"/members", nil)
		want(t, ms, 200)
		var member any
		for _, m := range jarr(ms.JSON, "members") {
			if jstr(m, "userId") == w.Mem.ID {
				member = m
			}
		}
		same(t, "member", d["member"], member)
	})
	t.Run("channel.member_left carries the conversation as the Web API", func(t *testing.T) {
		want(t, s.ops(t, "DELETE", "/ops/v1/conversations/"+conv.ID+"/members/"+w.Mem.ID, nil), 200)
		d := next(t, "channel.member_left")
		g := in.api(t, "GET", "/conversations/"+conv.ID, nil)
		want(t, g, 200)
		same(t, "conversation", d["conversation"], g.Get("conversation"))
		if jstr(d, "member.userId") != w.Mem.ID {
			t.Fatalf("member %v", d["member"])
		}
	})
	t.Run("user.joined carries the user as GET /users/{id}", func(t *testing.T) {
		u := w.user(t, "member")
		d := next(t, "user.joined")
		g := in.api(t, "GET", "/users/"+u.ID, nil)
		want(t, g, 200)
		same(t, "user", d["user"], g.Get("user"))
	})
	t.Run("installation.updated carries the installation as GET /installation", func(t *testing.T) {
		k.Manifest["version"] = "1.0.1"
		want(t, w.uploadVersion(t, k.Manifest, true), 201)
		want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID}), 201)
		d := next(t, "installation.updated")
		g := in.api(t, "GET", "/installation", nil)
		want(t, g, 200)
		same(t, "installation", d["installation"], g.Get("installation"))
	})
	t.Run("channel.archived carries the conversation as GET /conversations/{id}", func(t *testing.T) {
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+conv.ID+"/archive", nil), 200)
		d := next(t, "channel.archived")
		g := in.api(t, "GET", "/conversations/"+conv.ID, nil)
		want(t, g, 200)
		same(t, "conversation", d["conversation"], g.Get("conversation"))
		if !strings.Contains(mustJSON(d), `"archived":true`) {
			t.Fatalf("not archived: %v", d)
		}
	})
}
