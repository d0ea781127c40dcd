package app

import (
	"net/url"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
)

func TestSafeNext(t *testing.T) {
	for _, tc := range []struct{ name, next, want string }{
		{"a path under /app/ is followed", "/app/kits/authorize?kit=a", "/app/kits/authorize?kit=a"},
		{"an absolute URL is not followed", "https://evil.example.com/app/", "/app/"},
		{"a scheme-relative URL is not followed", "//evil.example.com/app/", "/app/"},
		{"a path outside the app host is not followed", "/api/v1/auth/test", "/app/"},
		{"a backslash trick is not followed", "/app/\\evil.example.com", "/app/"},
		{"a header split is not followed", "/app/\r\nSet-Cookie: x=y", "/app/"},
		{"empty goes home", "", "/app/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := safeNext(tc.next); got != tc.want {
				t.Fatalf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
			}
		})
	}
}

func TestParseAuthorizeShape(t *testing.T) {
	// An empty store: every Kit is unknown.
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(Config{Env: &actors.Env{Store: store}})
	const ws = "0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c"
	challenge := strings.Repeat("a", 43)
	base := map[string]string{
		"workspace": ws, "kit": "no-such-kit", "token_type": "user", "redirect_uri": "https://k.example/cb",
		"state": "s", "code_challenge": challenge, "code_challenge_method": "S256",
	}
	for _, tc := range []struct {
		name  string
		edit  map[string]string
		twice string // a parameter given a second time
		path  string // "" = shape passes (then the unknown Kit is not found)
	}{
		{"workspace must be a UUID", map[string]string{"workspace": "x"}, "", "workspace"},
		{"kit is required", map[string]string{"kit": ""}, "", "kit"},
		{"token_type must be bot or user", map[string]string{"token_type": "admin"}, "", "token_type"},
		{"redirect_uri is required", map[string]string{"redirect_uri": ""}, "", "redirect_uri"},
		{"redirect_uri is at most 2000 characters", map[string]string{"redirect_uri": "https://k.example/" + strings.Repeat("a", 2000)}, "", "redirect_uri"},
		{"state is at most 2000 characters", map[string]string{"state": strings.Repeat("s", 2001)}, "", "state"},
		{"the plain PKCE method is refused", map[string]string{"code_challenge_method": "plain"}, "", "code_challenge_method"},
		{"a challenge is 43 base64url characters", map[string]string{"code_challenge": "short"}, "", "code_challenge"},
		{"a user token needs a challenge", map[string]string{"code_challenge": "", "code_challenge_method": ""}, "", "code_challenge"},
		{"a bot token needs no challenge", map[string]string{"token_type": "bot", "code_challenge": "", "code_challenge_method": ""}, "", ""},
		{"an absent method is S256", map[string]string{"code_challenge_method": ""}, "", ""},
		{"a parameter given twice is refused (RFC 6749 3.1)", nil, "redirect_uri", "redirect_uri"},
		{"an empty parameter given twice is refused", map[string]string{"state": ""}, "state", "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]string{}
			for k, x := range base {
				v[k] = x
			}
			for k, x := range tc.edit {
				v[k] = x
			}
			var args fasthttp.Args
			for k, x := range v {
				args.Add(k, x)
			}
			if tc.twice != "" {
				args.Add(tc.twice, v[tc.twice])
			}
			_, err := s.parseAuthorize(&args)
			if tc.path == "" {
				if kiterr.CodeOf(err) != kiterr.NotFound {
					t.Fatalf("got %v, want the shape to pass and the Kit to be unknown", err)
				}
				return
			}
			if err == nil || kiterr.CodeOf(err) != kiterr.Validation {
				t.Fatalf("got %v, want a validation error", err)
			}
			if e := err.(*kiterr.Error); e.Path != tc.path {
				t.Fatalf("path %q, want %q", e.Path, tc.path)
			}
		})
	}
}

func TestSessionCookieFlags(t *testing.T) {
	for _, tc := range []struct {
		name, publicURL string
		secure          bool
	}{
		{"on an http public URL the cookie is not Secure", "http://kit.test", false},
		{"on an https public URL the cookie is Secure", "https://kit.example.com", true},
		{"on an https public URL written in capitals the cookie is Secure", "HTTPS://kit.example.com", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{PublicURL: tc.publicURL})
			var ctx fasthttp.RequestCtx
			s.setCookie(&ctx, SessionCookie, "ksess_x", 60)
			c := strings.ToLower(string(ctx.Response.Header.Peek("Set-Cookie")))
			if !strings.Contains(c, "httponly") || !strings.Contains(c, "samesite=lax") || strings.Contains(c, "secure") != tc.secure {
				t.Fatalf("Set-Cookie %q", c)
			}
		})
	}
}

func TestRedirectTargetKeepsTheRegisteredQuery(t *testing.T) {
	code := url.Values{"code": {"kcode_x"}}
	for _, tc := range []struct {
		name, registered, state string
		extra                   url.Values
		want                    string
	}{
		{"no query of its own", "https://kit.example.com/cb", "s1", code, "https://kit.example.com/cb?code=kcode_x&state=s1"},
		{"its query first, as registered", "https://kit.example.com/cb?z=1&a=2", "s1", code, "https://kit.example.com/cb?z=1&a=2&code=kcode_x&state=s1"},
		{"its escapes as registered", "https://kit.example.com/cb?next=%2Fhome%3Fa%3Db", "", code, "https://kit.example.com/cb?next=%2Fhome%3Fa%3Db&code=kcode_x"},
		{"a state to escape", "https://kit.example.com/cb", "a b&c", url.Values{"error": {"access_denied"}}, "https://kit.example.com/cb?error=access_denied&state=a+b%26c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redirectTarget(tc.registered, tc.state, tc.extra); got != tc.want {
				t.Fatalf("redirectTarget = %s, want %s", got, tc.want)
			}
		})
	}
}
