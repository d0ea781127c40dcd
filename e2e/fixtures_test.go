package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

// The scopes a Kit asks for unless a test says otherwise.
var baseScopes = []string{"conversations:read", "messages:read", "messages:write", "users:read"}

// without returns scopes minus drop.
func without(scopes []string, drop ...string) []string {
	var out []string
next:
	for _, s := range scopes {
		for _, d := range drop {
			if s == d {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Workspace is a fresh workspace with one member of each role and a
// developer token of its owner.
type Workspace struct {
	S     *Server
	ID    string
	Name  string
	Owner User
	Admin User
	Mem   User
	Guest User
	Dev   string // developer token of the owner
	DevID string
}

// User as created through the operator API.
type User struct {
	ID, DisplayName, Email, Role string
}

// Kit is a Kit registered through the developer API.
type Kit struct {
	ID       string
	Slug     string
	Version  string
	Scopes   []string
	Manifest map[string]any
	Upload   *Resp // the 201 of the first upload

	oauth oauthState // the authorization flow's setup, made on first use
}

// Install is an installation with its bot and one bot token.
type Install struct {
	W     *Workspace
	Kit   *Kit
	ID    string
	BotID string
	Token string
	Resp  *Resp // the 201 of the install call
}

// Conv is a conversation created through the operator API.
type Conv struct {
	ID         string
	Name       string
	Visibility string
	Members    []string
}

// newSlug is a globally unique Kit slug for this run.
func newSlug() string { return "e2e-" + randHex(8) }

// setup makes one request of a test's set-up. A node of a cluster may
// answer 503 while a partition changes leader, a legitimate answer that a
// client retries: a set-up retries it, for up to 30 s (a create that
// answered 503 after all may then exist twice, which a set-up does not
// mind). A node alone is asked once: no 503 is expected of it.
func (s *Server) setup(t testing.TB, method, token, path string, body any) *Resp {
	t.Helper()
	if !slices.Contains(s.Args, "--cluster-bind") {
		return s.do(t, method, path, token, body, nil)
	}
	var r *Resp
	_ = eventually.Poll(30*time.Second, func() error {
		if r = s.do(t, method, path, token, body, nil); r.Status == 503 {
			return errors.New("unavailable")
		}
		return nil
	})
	return r
}

// newWorkspace creates a workspace, its owner, an admin, a member, a guest and
// a developer token of the owner.
func newWorkspace(t testing.TB, s *Server) *Workspace {
	t.Helper()
	name := "ws-" + randHex(4)
	r := s.setup(t, "POST", s.OpToken, "/ops/v1/workspaces", map[string]any{"name": name})
	want(t, r, 201)
	w := &Workspace{S: s, ID: r.Str("workspace.id"), Name: name}
	if !isUUID(w.ID) {
		t.Fatalf("workspace.id is not a UUID%s", r)
	}
	w.Owner = w.user(t, "owner")
	w.Admin = w.user(t, "admin")
	w.Mem = w.user(t, "member")
	w.Guest = w.user(t, "guest")
	w.Dev, w.DevID = w.devToken(t, w.Owner.ID)
	return w
}

// user adds a member with role.
func (w *Workspace) user(t testing.TB, role string) User {
	t.Helper()
	u := User{
		DisplayName: role + " " + randHex(3),
		Email:       role + "-" + randHex(6) + "@example.com",
		Role:        role,
	}
	// No password: sign-in is not needed before the credentials issue, and
	// each password costs a bcrypt hash inside the workspace actor.
	r := w.S.setup(t, "POST", w.S.OpToken, "/ops/v1/workspaces/"+w.ID+"/users", map[string]any{
		"displayName": u.DisplayName, "email": u.Email, "role": role,
	})
	want(t, r, 201)
	u.ID = r.Str("user.id")
	if !isUUID(u.ID) {
		t.Fatalf("user.id is not a UUID%s", r)
	}
	return u
}

// devToken creates a developer token for userID.
func (w *Workspace) devToken(t testing.TB, userID string) (token, id string) {
	t.Helper()
	r := w.S.setup(t, "POST", w.S.OpToken, "/ops/v1/users/"+userID+"/developer-tokens", map[string]any{"name": "e2e"})
	want(t, r, 201)
	return r.Str("token"), r.Str("id")
}

// members is every user of the workspace (the four roles).
func (w *Workspace) members() []string {
	return []string{w.Owner.ID, w.Admin.ID, w.Mem.ID, w.Guest.ID}
}

// channel creates a channel with the given visibility and members.
func (w *Workspace) channel(t testing.TB, visibility string, members ...string) Conv {
	t.Helper()
	if members == nil {
		members = []string{}
	}
	c := Conv{Name: "ch-" + randHex(4), Visibility: visibility, Members: members}
	r := w.S.setup(t, "POST", w.S.OpToken, "/ops/v1/workspaces/"+w.ID+"/conversations", map[string]any{
		"kind": "channel", "visibility": visibility, "name": c.Name, "topic": "topic of " + c.Name, "memberIds": members,
	})
	want(t, r, 201)
	c.ID = r.Str("conversation.id")
	if !isUUID(c.ID) {
		t.Fatalf("conversation.id is not a UUID%s", r)
	}
	return c
}

// manifest is a minimal valid manifest.
func manifest(slug, version string, scopes []string) map[string]any {
	if scopes == nil {
		scopes = []string{}
	}
	return map[string]any{
		"schemaVersion":    1,
		"slug":             slug,
		"version":          version,
		"displayName":      map[string]any{"en": "Kit " + slug},
		"description":      map[string]any{"en": "End-to-end test Kit " + slug},
		"developer":        map[string]any{"name": "E2E Developer", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot": map[string]any{
			"displayName": map[string]any{"en": "Bot " + slug},
			"scopes":      scopes,
		},
		"distribution": "private",
	}
}

// manifestString is the manifest as the developer API takes it: a JSON
// document inside a string.
func manifestString(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// uploadVersion uploads (and maybe publishes) a manifest with the developer
// token of the workspace and returns the response.
func (w *Workspace) uploadVersion(t testing.TB, m map[string]any, publish bool) *Resp {
	t.Helper()
	return w.S.setup(t, "POST", w.Dev, "/api/v1/dev/kits/versions", map[string]any{
		"manifest": manifestString(m), "publish": publish,
	})
}

// kit registers and publishes a new private Kit of the workspace.
func (w *Workspace) kit(t testing.TB, scopes ...string) *Kit {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: scopes}
	k.Manifest = manifest(k.Slug, k.Version, scopes)
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	k.Upload = r
	if !isUUID(k.ID) {
		t.Fatalf("kitId is not a UUID%s", r)
	}
	return k
}

// install installs k into the workspace, adds its bot to channels and
// creates a bot token.
func (w *Workspace) install(t testing.TB, k *Kit, channels ...string) *Install {
	t.Helper()
	r := w.S.setup(t, "POST", w.S.OpToken, "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID})
	want(t, r, 201)
	in := &Install{W: w, Kit: k, ID: r.Str("installation.id"), BotID: r.Str("installation.botId"), Resp: r}
	if !isUUID(in.ID) || !isUUID(in.BotID) {
		t.Fatalf("installation.id and installation.botId must be UUIDs%s", r)
	}
	for _, c := range channels {
		in.addChannel(t, c)
	}
	in.Token = in.newToken(t)
	return in
}

func (in *Install) addChannel(t testing.TB, conversationID string) {
	t.Helper()
	r := in.W.S.setup(t, "POST", in.W.S.OpToken, "/ops/v1/installations/"+in.ID+"/channels", map[string]any{"conversationId": conversationID})
	want(t, r, 200)
}

// newToken creates another bot token for the installation.
func (in *Install) newToken(t testing.TB) string {
	t.Helper()
	r := in.W.S.setup(t, "POST", in.W.S.OpToken, "/ops/v1/installations/"+in.ID+"/bot-tokens", nil)
	want(t, r, 201)
	tok := r.Str("token")
	if tok == "" {
		t.Fatalf("no bot token%s", r)
	}
	return tok
}

// api calls the Web API with the installation's bot token.
func (in *Install) api(t testing.TB, method, path string, body any) *Resp {
	t.Helper()
	return in.W.S.api(t, in.Token, method, path, body, nil)
}

// post posts text into conversationID and expects 201.
func (in *Install) post(t testing.TB, conversationID, text string) map[string]any {
	t.Helper()
	r := in.api(t, "POST", "/messages", map[string]any{"conversationId": conversationID, "text": text})
	want(t, r, 201)
	m := jobj(r.JSON, "message")
	if m == nil || !isUUID(jstr(m, "id")) {
		t.Fatalf("201 without a message with an id%s", r)
	}
	return m
}

// BotEnv is the usual setting of a Web API test: a workspace, a public
// channel with every member, a Kit with scopes and its installation whose bot
// was added to that channel.
type BotEnv struct {
	W    *Workspace
	Chan Conv
	Kit  *Kit
	In   *Install
}

func newBotEnv(t testing.TB, s *Server, scopes ...string) *BotEnv {
	t.Helper()
	if len(scopes) == 0 {
		scopes = baseScopes
	}
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.members()...)
	k := w.kit(t, scopes...)
	in := w.install(t, k, c.ID)
	return &BotEnv{W: w, Chan: c, Kit: k, In: in}
}

// walk follows nextCursor through every page of a list and returns the items
// under key. It fails on a page without nextCursor, and after 1000 pages.
func walk(t testing.TB, s *Server, token, path, key string, limit int) []map[string]any {
	t.Helper()
	var items []map[string]any
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("%s: more than 1000 pages", path)
		}
		q := url.Values{}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		p := path
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		r := s.api(t, token, "GET", p, nil, nil)
		want(t, r, 200)
		arr, ok := jget(r.JSON, key).([]any)
		if !ok {
			t.Fatalf("list without array %q%s", key, r)
		}
		if limit > 0 && len(arr) > limit {
			t.Fatalf("page has %d items, more than limit %d%s", len(arr), limit, r)
		}
		for _, v := range arr {
			m, _ := v.(map[string]any)
			items = append(items, m)
		}
		if !has(r.JSON, "", "nextCursor") {
			t.Fatalf("list answer without nextCursor (decisions: always present)%s", r)
		}
		next, isStr := r.Get("nextCursor").(string)
		if r.Get("nextCursor") == nil {
			return items
		}
		if !isStr || next == "" {
			t.Fatalf("nextCursor must be a non-empty string or null%s", r)
		}
		cursor = next
	}
}

func ids(items []map[string]any, key string) []string {
	out := make([]string, 0, len(items))
	for _, m := range items {
		out = append(out, jstr(m, key))
	}
	return out
}

// userToken returns a user token of userID for the installation, obtained
// through the authorization flow (credentials_flow_test.go): a web session
// of the member, the authorize page, approve, kit.access. A Kit without
// oauth gets a new patch version that adds it (userScopes = its scopes).
func userToken(t testing.TB, in *Install, userID string) string {
	t.Helper()
	return authorizeUser(t, in, userID).Str("accessToken")
}
