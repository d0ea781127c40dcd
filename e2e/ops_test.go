package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sentinel = "zz-SENTINEL-zz"

var (
	botTokenRE = regexp.MustCompile(`^kbot_[A-Za-z0-9_-]{43}$`)
	devTokenRE = regexp.MustCompile(`^kdev_[A-Za-z0-9_-]+$`)
)

// OPERATIONS.md section 2 "People and places": success shapes.
func TestOps_PeopleAndPlaces(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)

	t.Run("create workspace answers 201 workspace id name sandbox", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "Acme"})
		want(t, r, 201)
		if !isUUID(r.Str("workspace.id")) || r.Str("workspace.name") != "Acme" || r.Get("workspace.sandbox") != false {
			t.Errorf("want {workspace: {id uuid, name Acme, sandbox false}}%s", r)
		}
		r = s.ops(t, "POST", "/ops/v1/workspaces", map[string]any{"name": "Sandbox", "sandbox": true})
		want(t, r, 201)
		if r.Get("workspace.sandbox") != true {
			t.Errorf("sandbox: true not kept%s", r)
		}
	})

	w := newWorkspace(t, s)

	t.Run("create user answers 201 user with email", func(t *testing.T) {
		for _, role := range []string{"owner", "admin", "member", "guest"} {
			email := "u-" + randHex(5) + "@example.com"
			r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/users", map[string]any{
				"displayName": "Ann " + role, "email": email, "role": role, "password": "secret-" + randHex(4),
			})
			want(t, r, 201)
			if !isUUID(r.Str("user.id")) || r.Str("user.displayName") != "Ann "+role ||
				r.Str("user.role") != role || r.Str("user.email") != email {
				t.Errorf("want {user: {id, displayName, role %s, email}}%s", role, r)
			}
			if strings.Contains(string(r.Body), "secret-") {
				t.Errorf("the password is echoed%s", r)
			}
		}
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/users", map[string]any{"displayName": "No Mail", "role": "member"})
		want(t, r, 201)
	})

	t.Run("deactivate user answers 200 ok", func(t *testing.T) {
		u := w.user(t, "member")
		r := s.ops(t, "DELETE", "/ops/v1/users/"+u.ID, nil)
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})

	t.Run("create conversation answers 201 conversation", func(t *testing.T) {
		for _, vis := range []string{"public", "private"} {
			r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
				"kind": "channel", "visibility": vis, "name": "general-" + vis, "topic": "news", "memberIds": []string{w.Owner.ID, w.Mem.ID},
			})
			want(t, r, 201)
			c := jobj(r.JSON, "conversation")
			if !isUUID(jstr(c, "id")) || jstr(c, "kind") != "channel" || jstr(c, "visibility") != vis ||
				jstr(c, "name") != "general-"+vis || jstr(c, "topic") != "news" || c["archived"] != false {
				t.Errorf("conversation shape%s", r)
			}
			parseTime(t, "createdAt", jstr(c, "createdAt"))
		}
	})

	t.Run("conversation name and topic are optional", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
			"kind": "channel", "visibility": "public", "memberIds": []string{},
		})
		want(t, r, 201)
		if r.Get("conversation.name") != nil || r.Get("conversation.topic") != nil {
			t.Errorf("name and topic not given: want null%s", r)
		}
	})

	t.Run("conversation members add and remove answer 200 ok", func(t *testing.T) {
		c := w.channel(t, "public", w.Owner.ID)
		r := s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/members", map[string]any{"userId": w.Mem.ID})
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
		r = s.ops(t, "DELETE", "/ops/v1/conversations/"+c.ID+"/members/"+w.Mem.ID, nil)
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})

	t.Run("archive answers 200 conversation archived", func(t *testing.T) {
		c := w.channel(t, "public", w.Owner.ID)
		r := s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/archive", nil)
		want(t, r, 200)
		if r.Str("conversation.id") != c.ID || r.Get("conversation.archived") != true {
			t.Errorf("want {conversation: {id, archived: true}}%s", r)
		}
	})

	t.Run("sessions start and end", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/users/"+w.Mem.ID+"/sessions", nil)
		want(t, r, 201)
		sid, cookie := r.Str("sessionId"), r.Str("cookie")
		if sid == "" || !strings.Contains(cookie, "=") || strings.ContainsAny(cookie, "; ") {
			t.Errorf("want {sessionId, cookie: name=value}%s", r)
		}
		r = s.ops(t, "DELETE", "/ops/v1/sessions/"+sid, nil)
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})

	t.Run("developer tokens create and delete", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/users/"+w.Owner.ID+"/developer-tokens", map[string]any{"name": "ci"})
		want(t, r, 201)
		if !devTokenRE.MatchString(r.Str("token")) || r.Str("id") == "" {
			t.Errorf("want {token: kdev_..., id, expiresAt}%s", r)
		}
		exp := parseTime(t, "expiresAt", r.Str("expiresAt"))
		if d := time.Until(exp); d < 89*24*time.Hour || d > 91*24*time.Hour {
			t.Errorf("default developer token lifetime: expiresAt %v is %v away, want about 90 days%s", exp, d, r)
		}
		id := r.Str("id")

		r = s.ops(t, "POST", "/ops/v1/users/"+w.Owner.ID+"/developer-tokens", map[string]any{"name": "short", "ttlSeconds": 3600})
		want(t, r, 201)
		exp = parseTime(t, "expiresAt", r.Str("expiresAt"))
		if d := time.Until(exp); d < 50*time.Minute || d > 70*time.Minute {
			t.Errorf("ttlSeconds 3600: expiresAt %v is %v away%s", exp, d, r)
		}

		r = s.ops(t, "DELETE", "/ops/v1/developer-tokens/"+id, nil)
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})

	// ttlSeconds is a whole number of seconds from 60 to 365 days; each
	// refusal names the field, says what is wrong and echoes nothing.
	t.Run("developer token ttlSeconds is checked", func(t *testing.T) {
		for _, tc := range []struct {
			name, ttl, says string
		}{
			{"below a minute", "59", "from 60"},
			{"past a year", "31536001", "from 60"},
			{"a fraction", "73575.5", "must be an integer"},
			{"an exponent", "7357e2", "must be an integer"},
			{"past any integer", "73579999999999999999", "out of range"},
			{"past any number", "7357e700", "must be an integer"},
			{"a string", `"7357"`, "must be of type number"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.ops(t, "POST", "/ops/v1/users/"+w.Owner.ID+"/developer-tokens", map[string]any{"name": "ttl", "ttlSeconds": json.RawMessage(tc.ttl)})
				wantValidation(t, r, "ttlSeconds", "7357")
				if !strings.Contains(r.Str("message"), tc.says) {
					t.Errorf("message %q, want it to say %q", r.Str("message"), tc.says)
				}
			})
		}
	})
}

// OPERATIONS.md section 2 "Kits and installations": success shapes (webhooks,
// client and signing secrets belong to later issues).
func TestOps_KitsAndInstallations(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	c1 := w.channel(t, "public", w.members()...)
	c2 := w.channel(t, "private", w.Owner.ID)
	k := w.kit(t, baseScopes...)

	r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID})
	want(t, r, 201)
	inst := jobj(r.JSON, "installation")
	instID := jstr(inst, "id")
	t.Run("install answers 201 installation", func(t *testing.T) {
		if !isUUID(instID) || jstr(inst, "kit.slug") != k.Slug || jstr(inst, "kit.version") != "1.0.0" ||
			jstr(inst, "workspace.id") != w.ID || jstr(inst, "workspace.name") != w.Name ||
			!isUUID(jstr(inst, "botId")) || jstr(inst, "modelDataPolicy") != "none" {
			t.Errorf("installation shape%s", r)
		}
		if !sameSet(strs(jarr(inst, "scopes.bot")), baseScopes) {
			t.Errorf("scopes.bot = %v, want %v%s", jarr(inst, "scopes.bot"), baseScopes, r)
		}
		if a, ok := jget(inst, "channelIds").([]any); !ok || len(a) != 0 {
			t.Errorf("a new installation has channelIds []%s", r)
		}
	})
	in := &Install{W: w, Kit: k, ID: instID, BotID: jstr(inst, "botId")}

	t.Run("add channel answers 200 installation with the channel", func(t *testing.T) {
		for i, c := range []string{c1.ID, c2.ID} {
			r := s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/channels", map[string]any{"conversationId": c})
			want(t, r, 200)
			if got := strs(jarr(r.JSON, "installation.channelIds")); len(got) != i+1 || !contains(got, c) {
				t.Errorf("channelIds = %v after adding %s%s", got, c, r)
			}
		}
	})

	t.Run("bot token answers 201 kbot_ token", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", nil)
		want(t, r, 201)
		if !botTokenRE.MatchString(r.Str("token")) {
			t.Errorf("want kbot_ + 43 base64url characters%s", r)
		}
		in.Token = r.Str("token")
		for _, body := range []any{map[string]any{}, raw(""), raw("{}")} {
			r := s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", body)
			want(t, r, 201)
		}
	})

	t.Run("remove channel answers 200 installation without the channel", func(t *testing.T) {
		r := s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID+"/channels/"+c2.ID, nil)
		want(t, r, 200)
		if got := strs(jarr(r.JSON, "installation.channelIds")); !sameSet(got, []string{c1.ID}) {
			t.Errorf("channelIds = %v, want [%s]%s", got, c1.ID, r)
		}
	})

	t.Run("install again updates to the latest published version", func(t *testing.T) {
		m := manifest(k.Slug, "1.1.0", baseScopes)
		r := w.uploadVersion(t, m, true)
		want(t, r, 201)
		r = s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID})
		want(t, r, 201)
		if r.Str("installation.id") != in.ID || r.Str("installation.kit.version") != "1.1.0" {
			t.Errorf("want the same installation at version 1.1.0%s", r)
		}
		if got := strs(jarr(r.JSON, "installation.channelIds")); !sameSet(got, []string{c1.ID}) {
			t.Errorf("update lost channelIds: %v%s", got, r)
		}
	})

	t.Run("revoke token answers 200 ok", func(t *testing.T) {
		tok := in.newToken(t)
		r := s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": tok})
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})

	t.Run("uninstall answers 200 ok", func(t *testing.T) {
		r := s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID, nil)
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Errorf("want {ok:true}%s", r)
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// OPERATIONS.md section 2: validation errors name the field path and never
// echo the submitted value; unknown ids answer 404.
func TestOps_Errors(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w := newWorkspace(t, s)
	other := newWorkspace(t, s)
	c := w.channel(t, "public", w.Owner.ID)
	otherChan := other.channel(t, "public", other.Owner.ID)
	k := w.kit(t, baseScopes...)
	otherKit := other.kit(t, baseScopes...)
	in := w.install(t, k)
	unknown := newUUID()

	validation := []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"workspace name is required", "POST", "/ops/v1/workspaces", map[string]any{}, "name"},
		{"workspace name must be a string", "POST", "/ops/v1/workspaces", map[string]any{"name": 42}, "name"},
		{"workspace sandbox must be a boolean", "POST", "/ops/v1/workspaces", map[string]any{"name": "x", "sandbox": sentinel}, "sandbox"},
		{"user role must be one of owner admin member guest", "POST", "/ops/v1/workspaces/" + w.ID + "/users",
			map[string]any{"displayName": "x", "role": sentinel}, "role"},
		{"user role is required", "POST", "/ops/v1/workspaces/" + w.ID + "/users",
			map[string]any{"displayName": "x"}, "role"},
		{"user displayName is required", "POST", "/ops/v1/workspaces/" + w.ID + "/users",
			map[string]any{"role": "member"}, "displayName"},
		{"user displayName holds no control character", "POST", "/ops/v1/workspaces/" + w.ID + "/users",
			map[string]any{"displayName": sentinel + "\u0000", "role": "member"}, "displayName"},
		{"workspace name holds no bidirectional override", "POST", "/ops/v1/workspaces", map[string]any{"name": sentinel + "\u202e"}, "name"},
		{"user email must be an email address", "POST", "/ops/v1/workspaces/" + w.ID + "/users",
			map[string]any{"displayName": "x", "role": "member", "email": sentinel}, "email"},
		{"conversation kind must be a known kind", "POST", "/ops/v1/workspaces/" + w.ID + "/conversations",
			map[string]any{"kind": sentinel, "visibility": "public", "name": "x", "memberIds": []string{}}, "kind"},
		{"conversation visibility must be public or private", "POST", "/ops/v1/workspaces/" + w.ID + "/conversations",
			map[string]any{"kind": "channel", "visibility": sentinel, "name": "x", "memberIds": []string{}}, "visibility"},
		{"conversation memberIds must be UUIDs", "POST", "/ops/v1/workspaces/" + w.ID + "/conversations",
			map[string]any{"kind": "channel", "visibility": "public", "name": "x", "memberIds": []string{w.Owner.ID, sentinel}}, "memberIds[1]"},
		{"conversation memberIds must be an array", "POST", "/ops/v1/workspaces/" + w.ID + "/conversations",
			map[string]any{"kind": "channel", "visibility": "public", "name": "x", "memberIds": sentinel}, "memberIds"},
		{"member userId must be a UUID", "POST", "/ops/v1/conversations/" + c.ID + "/members",
			map[string]any{"userId": sentinel}, "userId"},
		{"developer token ttlSeconds must be an integer", "POST", "/ops/v1/users/" + w.Owner.ID + "/developer-tokens",
			map[string]any{"name": "x", "ttlSeconds": sentinel}, "ttlSeconds"},
		{"install kitId must be a UUID", "POST", "/ops/v1/workspaces/" + w.ID + "/installations",
			map[string]any{"kitId": sentinel}, "kitId"},
		{"install kitId is required", "POST", "/ops/v1/workspaces/" + w.ID + "/installations",
			map[string]any{}, "kitId"},
		{"install version must be a version", "POST", "/ops/v1/workspaces/" + w.ID + "/installations",
			map[string]any{"kitId": k.ID, "version": sentinel}, "version"},
		{"add channel conversationId must be a UUID", "POST", "/ops/v1/installations/" + in.ID + "/channels",
			map[string]any{"conversationId": sentinel}, "conversationId"},
		{"revoke token is required", "POST", "/ops/v1/tokens/revoke", map[string]any{}, "token"},
		{"revoke token must be a string", "POST", "/ops/v1/tokens/revoke", map[string]any{"token": 7}, "token"},
	}
	for _, tc := range validation {
		t.Run(tc.name, func(t *testing.T) {
			r := s.ops(t, tc.method, tc.path, tc.body)
			wantValidation(t, r, tc.field, sentinel)
		})
	}

	notFound := []struct {
		name, method, path string
		body               any
	}{
		{"users of an unknown workspace", "POST", "/ops/v1/workspaces/" + unknown + "/users", map[string]any{"displayName": "x", "role": "member"}},
		{"deactivate an unknown user", "DELETE", "/ops/v1/users/" + unknown, nil},
		{"conversation in an unknown workspace", "POST", "/ops/v1/workspaces/" + unknown + "/conversations",
			map[string]any{"kind": "channel", "visibility": "public", "name": "x", "memberIds": []string{}}},
		{"add member to an unknown conversation", "POST", "/ops/v1/conversations/" + unknown + "/members", map[string]any{"userId": w.Mem.ID}},
		{"remove member from an unknown conversation", "DELETE", "/ops/v1/conversations/" + unknown + "/members/" + w.Mem.ID, nil},
		{"archive an unknown conversation", "POST", "/ops/v1/conversations/" + unknown + "/archive", nil},
		{"session of an unknown user", "POST", "/ops/v1/users/" + unknown + "/sessions", nil},
		{"developer token of an unknown user", "POST", "/ops/v1/users/" + unknown + "/developer-tokens", map[string]any{"name": "x"}},
		{"delete an unknown developer token", "DELETE", "/ops/v1/developer-tokens/" + unknown, nil},
		{"install into an unknown workspace", "POST", "/ops/v1/workspaces/" + unknown + "/installations", map[string]any{"kitId": k.ID}},
		{"install an unknown Kit", "POST", "/ops/v1/workspaces/" + w.ID + "/installations", map[string]any{"kitId": unknown}},
		{"install another workspace's private Kit", "POST", "/ops/v1/workspaces/" + w.ID + "/installations", map[string]any{"kitId": otherKit.ID}},
		{"uninstall an unknown installation", "DELETE", "/ops/v1/installations/" + unknown, nil},
		{"add channel to an unknown installation", "POST", "/ops/v1/installations/" + unknown + "/channels", map[string]any{"conversationId": c.ID}},
		{"add an unknown channel", "POST", "/ops/v1/installations/" + in.ID + "/channels", map[string]any{"conversationId": unknown}},
		{"add another workspace's channel", "POST", "/ops/v1/installations/" + in.ID + "/channels", map[string]any{"conversationId": otherChan.ID}},
		{"remove channel of an unknown installation", "DELETE", "/ops/v1/installations/" + unknown + "/channels/" + c.ID, nil},
		{"bot token of an unknown installation", "POST", "/ops/v1/installations/" + unknown + "/bot-tokens", nil},
		{"non-UUID workspace id", "POST", "/ops/v1/workspaces/" + sentinel + "/users", map[string]any{"displayName": "x", "role": "member"}},
		{"non-UUID installation id", "POST", "/ops/v1/installations/" + sentinel + "/bot-tokens", nil},
	}
	for _, tc := range notFound {
		t.Run(tc.name+" is 404", func(t *testing.T) {
			r := s.ops(t, tc.method, tc.path, tc.body)
			wantError(t, r, 404, "not_found")
			noEcho(t, r, sentinel)
		})
	}

	t.Run("unknown memberIds user is rejected", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
			"kind": "channel", "visibility": "public", "name": "x", "memberIds": []string{unknown},
		})
		if r.Status != 400 && r.Status != 404 {
			t.Fatalf("a member that does not exist: want 400 or 404%s", r)
		}
		checkErrorBody(t, r)
	})

	t.Run("adding a member of another workspace is rejected", func(t *testing.T) {
		r := s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/members", map[string]any{"userId": other.Mem.ID})
		if r.Status != 400 && r.Status != 404 {
			t.Fatalf("want 400 or 404%s", r)
		}
		checkErrorBody(t, r)
	})

	t.Run("a dm keeps its two members: a third is 409", func(t *testing.T) {
		// As its creation requires exactly two (memberIds).
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
			"kind": "dm", "visibility": "private", "memberIds": []string{w.Owner.ID, w.Mem.ID},
		})
		want(t, r, 201)
		dm := r.Str("conversation.id")
		wantError(t, s.ops(t, "POST", "/ops/v1/conversations/"+dm+"/members", map[string]any{"userId": w.Admin.ID}), 409, "conflict")
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+dm+"/members", map[string]any{"userId": w.Mem.ID}), 200) // already one: as before
	})

	t.Run("a dm keeps its two members: removing one is 409 and both stay", func(t *testing.T) {
		// Removed, the member could never be added back (a third is 409).
		r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
			"kind": "dm", "visibility": "private", "memberIds": []string{w.Owner.ID, w.Mem.ID},
		})
		want(t, r, 201)
		dm := r.Str("conversation.id")
		wantError(t, s.ops(t, "DELETE", "/ops/v1/conversations/"+dm+"/members/"+w.Mem.ID, nil), 409, "conflict")
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+dm+"/members", map[string]any{"userId": w.Mem.ID}), 200) // still one of the two
		wantError(t, s.ops(t, "DELETE", "/ops/v1/conversations/"+dm+"/members/"+w.Admin.ID, nil), 404, "not_found")
	})

	t.Run("an archived conversation keeps its members: removing one is 409, as adding one is", func(t *testing.T) {
		conv := w.channel(t, "public", w.Owner.ID, w.Mem.ID)
		in := w.install(t, w.kit(t, baseScopes...), conv.ID) // to read the members
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+conv.ID+"/archive", nil), 200)
		wantError(t, s.ops(t, "DELETE", "/ops/v1/conversations/"+conv.ID+"/members/"+w.Mem.ID, nil), 409, "conflict")
		wantError(t, s.ops(t, "POST", "/ops/v1/conversations/"+conv.ID+"/members", map[string]any{"userId": w.Admin.ID}), 409, "conflict")
		ms := in.api(t, "GET", "/conversations/"+conv.ID+"/members", nil)
		want(t, ms, 200)
		var ids []string
		for _, m := range jarr(ms.JSON, "members") {
			ids = append(ids, jstr(m, "userId"))
		}
		if slices.Sort(ids); !slices.Equal(ids, slices.Sorted(slices.Values([]string{w.Owner.ID, w.Mem.ID}))) {
			t.Fatalf("members %v after the refusals, want the archive's two", ids)
		}
	})

	t.Run("a deactivated user is not added to a conversation: 404", func(t *testing.T) {
		// As its creation refuses one (memberIds[i]).
		gone := w.user(t, "member")
		want(t, s.ops(t, "DELETE", "/ops/v1/users/"+gone.ID, nil), 200)
		wantError(t, s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/members", map[string]any{"userId": gone.ID}), 404, "not_found")
	})
}
