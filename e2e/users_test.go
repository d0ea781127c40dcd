package e2e

import (
	"testing"
)

// docs/api.md "Users, runs and the installation".
func TestUsers(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	w := env.W
	gone := w.user(t, "member")
	want(t, s.ops(t, "DELETE", "/ops/v1/users/"+gone.ID, nil), 200)
	other := newWorkspace(t, s)
	byID := map[string]User{}
	for _, u := range []User{w.Owner, w.Admin, w.Mem, w.Guest} {
		byID[u.ID] = u
	}

	t.Run("list shows active members without email", func(t *testing.T) {
		r := env.In.api(t, "GET", "/users", nil)
		want(t, r, 200)
		users := walk(t, s, env.In.Token, "/users", "users", 2)
		got := ids(users, "id")
		if !sameSet(got, w.members()) {
			t.Errorf("users = %v, want the four active members %v (not the deactivated %s, nor another workspace's)", got, w.members(), gone.ID)
		}
		for _, u := range users {
			exp := byID[jstr(u, "id")]
			if jstr(u, "displayName") != exp.DisplayName || jstr(u, "role") != exp.Role {
				t.Errorf("user %v, want displayName %q role %q", u, exp.DisplayName, exp.Role)
			}
			if _, ok := u["email"]; ok {
				t.Errorf("email shown without users:read.email: %v", u)
			}
		}
	})

	t.Run("users:read.email adds email", func(t *testing.T) {
		in := w.install(t, w.kit(t, "users:read", "users:read.email"))
		users := walk(t, s, in.Token, "/users", "users", 0)
		if len(users) != 4 {
			t.Errorf("%d users, want 4", len(users))
		}
		for _, u := range users {
			if jstr(u, "email") != byID[jstr(u, "id")].Email {
				t.Errorf("user %v: want email %q", u, byID[jstr(u, "id")].Email)
			}
		}
		r := in.api(t, "GET", "/users/"+w.Guest.ID, nil)
		want(t, r, 200)
		if r.Str("user.email") != w.Guest.Email {
			t.Errorf("GET /users/{id} with users:read.email shows email%s", r)
		}
	})

	t.Run("get user answers 200 user", func(t *testing.T) {
		r := env.In.api(t, "GET", "/users/"+w.Admin.ID, nil)
		want(t, r, 200)
		if r.Str("user.id") != w.Admin.ID || r.Str("user.displayName") != w.Admin.DisplayName || r.Str("user.role") != "admin" || has(r.JSON, "user", "email") {
			t.Errorf("want {user: {id, displayName, role admin}} without email%s", r)
		}
	})

	for _, tc := range []struct{ name, id string }{
		{"unknown user", newUUID()},
		{"user of another workspace", other.Mem.ID},
		{"non-UUID id", "nobody"},
	} {
		t.Run(tc.name+" is 404", func(t *testing.T) {
			wantError(t, env.In.api(t, "GET", "/users/"+tc.id, nil), 404, "not_found")
		})
	}

	t.Run("users/me of a bot token is the bot", func(t *testing.T) {
		r := env.In.api(t, "GET", "/users/me", nil)
		want(t, r, 200)
		if !has(r.JSON, "", "user") || r.Get("user") != nil {
			t.Errorf("want user: null for a bot token%s", r)
		}
		if r.Str("bot.id") != env.In.BotID {
			t.Errorf("bot.id = %q, want %s%s", r.Str("bot.id"), env.In.BotID, r)
		}
		if r.Str("bot.displayName") != "Bot "+env.Kit.Slug {
			t.Errorf("bot.displayName = %q, want the manifest's bot.displayName.en %q%s", r.Str("bot.displayName"), "Bot "+env.Kit.Slug, r)
		}
	})
}
