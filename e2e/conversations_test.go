package e2e

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// docs/api.md "Conversations": a bot token sees the channels its bot was added to,
// and nothing else; invisible and unknown answer the same 404.
func TestConversations_Visibility(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	pub := w.channel(t, "public", w.Owner.ID, w.Mem.ID)
	priv := w.channel(t, "private", w.Admin.ID)
	notAdded := w.channel(t, "public", w.members()...)
	removed := w.channel(t, "public", w.Owner.ID)
	k := w.kit(t, baseScopes...)
	in := w.install(t, k, pub.ID, priv.ID, removed.ID)
	r := s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID+"/channels/"+removed.ID, nil)
	want(t, r, 200)

	other := newBotEnv(t, s) // another workspace's channel

	t.Run("list shows only the channels the bot was added to", func(t *testing.T) {
		r := in.api(t, "GET", "/conversations", nil)
		want(t, r, 200)
		got := ids(walk(t, s, in.Token, "/conversations", "conversations", 0), "id")
		if !sameSet(got, []string{pub.ID, priv.ID}) {
			t.Errorf("conversations = %v, want exactly [%s %s]%s", got, pub.ID, priv.ID, r)
		}
	})

	t.Run("conversation shape", func(t *testing.T) {
		for _, c := range []Conv{pub, priv} {
			r := in.api(t, "GET", "/conversations/"+c.ID, nil)
			want(t, r, 200)
			conv := jobj(r.JSON, "conversation")
			if jstr(conv, "id") != c.ID || jstr(conv, "kind") != "channel" || jstr(conv, "visibility") != c.Visibility ||
				jstr(conv, "name") != c.Name || jstr(conv, "topic") != "topic of "+c.Name || conv["archived"] != false {
				t.Errorf("want {conversation: {id, kind channel, visibility %s, name, topic, archived false, createdAt}}%s", c.Visibility, r)
			}
			parseTime(t, "createdAt", jstr(conv, "createdAt"))
		}
	})

	t.Run("members lists userId and joinedAt", func(t *testing.T) {
		r := in.api(t, "GET", "/conversations/"+pub.ID+"/members", nil)
		want(t, r, 200)
		got := ids(walk(t, s, in.Token, "/conversations/"+pub.ID+"/members", "members", 0), "userId")
		var users []string
		for _, u := range got {
			if u != in.BotID {
				users = append(users, u)
			}
		}
		if !sameSet(users, pub.Members) {
			t.Errorf("members = %v, want %v%s", got, pub.Members, r)
		}
		for _, m := range jarr(r.JSON, "members") {
			parseTime(t, "joinedAt", jstr(m, "joinedAt"))
		}
	})

	t.Run("member changes show in the list", func(t *testing.T) {
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+pub.ID+"/members", map[string]any{"userId": w.Guest.ID}), 200)
		want(t, s.ops(t, "DELETE", "/ops/v1/conversations/"+pub.ID+"/members/"+w.Owner.ID, nil), 200)
		got := ids(walk(t, s, in.Token, "/conversations/"+pub.ID+"/members", "members", 0), "userId")
		if !contains(got, w.Guest.ID) || contains(got, w.Owner.ID) || !contains(got, w.Mem.ID) {
			t.Errorf("members after adding the guest and removing the owner = %v", got)
		}
	})

	unknownID := newUUID()
	base := in.api(t, "GET", "/conversations/"+unknownID, nil)
	wantError(t, base, 404, "not_found")
	baseMembers := in.api(t, "GET", "/conversations/"+unknownID+"/members", nil)
	wantError(t, baseMembers, 404, "not_found")

	hidden := []struct {
		name string
		id   string
	}{
		{"channel the bot was not added to", notAdded.ID},
		{"channel the bot was removed from", removed.ID},
		{"channel of another workspace", other.Chan.ID},
		{"non-UUID id", "not-a-uuid"},
		{"a channel's id in upper case (ids are compared exactly)", strings.ToUpper(pub.ID)},
	}
	for _, tc := range hidden {
		t.Run(tc.name+" is 404 like an unknown id", func(t *testing.T) {
			for _, suffix := range []string{"", "/members", "/messages"} {
				r := in.api(t, "GET", "/conversations/"+tc.id+suffix, nil)
				wantError(t, r, 404, "not_found")
				ref := base
				if suffix == "/members" {
					ref = baseMembers
				}
				if suffix != "/messages" && strings.ReplaceAll(r.Str("message"), tc.id, "ID") != strings.ReplaceAll(ref.Str("message"), unknownID, "ID") {
					t.Errorf("404 message differs from an unknown id's %q: existence is revealed%s", ref.Str("message"), r)
				}
			}
		})
	}
}

// docs/api.md "Endpoints" list rules and docs/decisions.md cursor rules.
func TestConversations_Pagination(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	k := w.kit(t, baseScopes...)
	in := w.install(t, k)
	var all []string
	for i := 0; i < 7; i++ {
		c := w.channel(t, "public", w.Owner.ID)
		in.addChannel(t, c.ID)
		all = append(all, c.ID)
	}
	// A second list, for a cursor of another list.
	for _, u := range []string{w.Admin.ID, w.Mem.ID, w.Guest.ID} {
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+all[0]+"/members", map[string]any{"userId": u}), 200)
	}

	for _, limit := range []int{1, 2, 3, 7, 200} {
		t.Run(fmt.Sprintf("walking with limit %d returns every item exactly once", limit), func(t *testing.T) {
			got := ids(walk(t, s, in.Token, "/conversations", "conversations", limit), "id")
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s listed %d times", id, n)
				}
			}
			if !sameSet(got, all) {
				t.Errorf("got %v, want %v", sortedStrings(got), sortedStrings(all))
			}
		})
	}

	t.Run("limit 1 gives one item and a cursor", func(t *testing.T) {
		r := in.api(t, "GET", "/conversations?limit=1", nil)
		want(t, r, 200)
		if n := len(jarr(r.JSON, "conversations")); n != 1 {
			t.Errorf("%d items%s", n, r)
		}
		if c, _ := r.Get("nextCursor").(string); c == "" || len(c) > 512 {
			t.Errorf("nextCursor must be a 1-512 character string%s", r)
		}
	})

	t.Run("last page has nextCursor null", func(t *testing.T) {
		r := in.api(t, "GET", "/conversations?limit=200", nil)
		want(t, r, 200)
		if !has(r.JSON, "", "nextCursor") || r.Get("nextCursor") != nil {
			t.Errorf("want nextCursor: null on the last page%s", r)
		}
		if n := len(jarr(r.JSON, "conversations")); n != len(all) {
			t.Errorf("%d items, want %d%s", n, len(all), r)
		}
	})

	r := in.api(t, "GET", "/conversations?limit=1", nil)
	want(t, r, 200)
	goodCursor := r.Str("nextCursor")
	r = in.api(t, "GET", "/conversations/"+all[0]+"/members?limit=1", nil)
	want(t, r, 200)
	membersCursor := r.Str("nextCursor")
	if membersCursor == "" {
		t.Fatalf("members list of 4 with limit 1 has no nextCursor%s", r)
	}

	bad := []struct {
		name, query, path string
	}{
		{"limit 0 is rejected", "limit=0", "limit"},
		{"limit 201 is rejected", "limit=201", "limit"},
		{"limit -1 is rejected", "limit=-1", "limit"},
		{"limit abc is rejected", "limit=abc", "limit"},
		{"limit 1.5 is rejected", "limit=1.5", "limit"},
		{"cursor of 513 characters is rejected", "cursor=" + strings.Repeat("A", 513), "cursor"},
		{"garbage cursor is rejected", "cursor=" + url.QueryEscape("!!not a cursor!!"), "cursor"},
		{"512 characters of garbage are rejected", "cursor=" + strings.Repeat("Q", 512), "cursor"},
		{"truncated cursor is rejected", "cursor=" + url.QueryEscape(goodCursor[:len(goodCursor)/2]), "cursor"},
		{"cursor of another list is rejected", "cursor=" + url.QueryEscape(membersCursor), "cursor"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := in.api(t, "GET", "/conversations?"+tc.query, nil)
			wantValidation(t, r, tc.path, "!!not a cursor!!", strings.Repeat("Q", 512))
		})
	}

	t.Run("cursor of another list is rejected on members", func(t *testing.T) {
		r := in.api(t, "GET", "/conversations/"+all[0]+"/members?cursor="+url.QueryEscape(goodCursor), nil)
		wantValidation(t, r, "cursor")
	})

	t.Run("members pagination returns every member once", func(t *testing.T) {
		got := ids(walk(t, s, in.Token, "/conversations/"+all[0]+"/members", "members", 1), "userId")
		var users []string
		for _, u := range got {
			if u != in.BotID {
				users = append(users, u)
			}
		}
		sort.Strings(users)
		if !sameSet(users, w.members()) {
			t.Errorf("members = %v, want %v", users, w.members())
		}
	})
}
