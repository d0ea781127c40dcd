package app

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// comparePasswords makes one bcrypt comparison per entry and matches only
// real members with that password.
func TestComparePasswords(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	a := &kitpb.User{Id: "a", PasswordHash: hash}
	b := &kitpb.User{Id: "b", PasswordHash: hash}
	noPassword := &kitpb.User{Id: "c"}
	for _, tc := range []struct {
		name     string
		users    []*kitpb.User
		password string
		want     []string
	}{
		{"the right password matches its member", []*kitpb.User{a, nil, nil}, "right", []string{"a"}},
		{"a wrong password matches no one", []*kitpb.User{a, nil, nil}, "wrong", nil},
		{"the password matches in every workspace that has it", []*kitpb.User{a, b, nil}, "right", []string{"a", "b"}},
		{"the dummy hash's password matches no one", []*kitpb.User{nil, nil, nil}, "kitd dummy password", nil},
		{"a member without a password never matches", []*kitpb.User{noPassword, nil, nil}, "kitd dummy password", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range comparePasswords(tc.users, []byte(tc.password)) {
				got = append(got, u.Id)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("matched %v, want %v", got, tc.want)
			}
		})
	}
}

func newTestServer(t *testing.T) *Server {
	t.Helper()
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return New(Config{Env: &actors.Env{Store: store}, Logger: slog.Default(), CorrelationID: func(*fasthttp.RequestCtx) string { return "c" }})
}

// The sign-in form asks for a workspace id never; it carries one given.
func TestSignInForm(t *testing.T) {
	s := newTestServer(t)
	const ws = "0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c"
	hidden := `<input type="hidden" name="workspace" value="` + ws + `">`
	for _, tc := range []struct {
		name, query string
		hidden      bool
	}{
		{"without a workspace the form asks for email and password only", "", false},
		{"?workspace= is carried as a hidden field", "workspace=" + ws, true},
		{"the workspace of next's authorize URL is carried as a hidden field", "next=" + url.QueryEscape("/app/kits/authorize?workspace="+ws), true},
		{"a workspace that is no id is dropped", "workspace=nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI("/app/signin?" + tc.query)
			s.SignInForm(&ctx)
			body := string(ctx.Response.Body())
			if ctx.Response.StatusCode() != 200 || !strings.Contains(body, `name="email"`) || !strings.Contains(body, `name="password"`) {
				t.Fatalf("status %d, want the form: %s", ctx.Response.StatusCode(), body)
			}
			if strings.Contains(body, "Workspace ID") || strings.Contains(body, `type="text" id="workspace"`) {
				t.Errorf("the form asks for a workspace id: %s", body)
			}
			if strings.Contains(body, hidden) != tc.hidden || (!tc.hidden && strings.Contains(body, `name="workspace"`)) {
				t.Errorf("hidden workspace field: want %v: %s", tc.hidden, body)
			}
		})
	}
}

// A sign-in post without a workspace: what each form gets, on a node that
// knows no member (the store is empty).
func TestSignInPost(t *testing.T) {
	s := newTestServer(t)
	csrf := ids.NewSecret("")
	for _, tc := range []struct {
		name   string
		form   url.Values
		cookie bool
		status int
	}{
		{"a form without the csrf cookie is refused", url.Values{"email": {"a@example.com"}, "password": {"pw"}}, false, 403},
		{"an unknown email is a failed sign-in", url.Values{"email": {"a@example.com"}, "password": {"pw"}}, true, 401},
		{"an empty password is a failed sign-in", url.Values{"email": {"a@example.com"}, "password": {""}}, true, 401},
		{"a password longer than bcrypt reads is a failed sign-in", url.Values{"email": {"a@example.com"}, "password": {strings.Repeat("p", 73)}}, true, 401},
		{"a malformed choice is a failed sign-in", url.Values{"choice": {"not-a-choice"}, "workspace": {"0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c"}}, true, 401},
		{"an unknown choice is a failed sign-in", url.Values{"choice": {ids.NewSecret(ids.SignInChoice)}}, true, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/app/signin")
			ctx.Request.Header.SetContentType("application/x-www-form-urlencoded")
			tc.form.Set("csrf", csrf)
			ctx.Request.SetBodyString(tc.form.Encode())
			if tc.cookie {
				ctx.Request.Header.SetCookie(csrfCookie, csrf)
			}
			s.SignIn(&ctx)
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Fatalf("status %d, want %d: %s", got, tc.status, ctx.Response.Body())
			}
			if strings.Contains(string(ctx.Response.Header.Peek("Set-Cookie")), SessionCookie) {
				t.Errorf("set a session")
			}
			for _, v := range tc.form {
				if v[0] != "" && v[0] != csrf && len(v[0]) > 3 && strings.Contains(string(ctx.Response.Body()), v[0]) {
					t.Errorf("the page echoes %q", v[0])
				}
			}
		})
	}
}
