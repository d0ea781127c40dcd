package app

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
)

// Every form carries a CSRF token: on the sign-in form (no session yet) it
// is a random value that must equal the kit_csrf cookie (double submit);
// on the forms of a signed-in member it is derived from the session
// secret, which only the member's browser holds.

// SessionCookie is the name of the web session cookie.
const SessionCookie = "kit_session"

// csrfCookie holds the sign-in form's CSRF token.
const csrfCookie = "kit_csrf"

// secureCookies: the cookies are Secure when the app host is served over
// https. A scheme is case-insensitive (--public-url takes HTTPS:// too).
func (s *Server) secureCookies() bool {
	return len(s.publicURL) >= len("https://") && strings.EqualFold(s.publicURL[:len("https://")], "https://")
}

func (s *Server) setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge int) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(s.secureCookies())
	if maxAge > 0 {
		c.SetMaxAge(maxAge)
	} else {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	ctx.Response.Header.SetCookie(c)
}

// session returns the signed-in member of the request, or nil, and the
// cookie secret.
func (s *Server) session(ctx *fasthttp.RequestCtx) (*actors.WebSession, string) {
	secret := ctx.Request.Header.Cookie(SessionCookie)
	if len(secret) == 0 {
		return nil, ""
	}
	ws, err := s.auth.Session(secret)
	if err != nil {
		return nil, ""
	}
	return ws, string(secret)
}

// SessionCSRF is the CSRF token of the forms and member actions of a
// session (GET /app/api/session answers it): derived from the
// session secret, so it needs no storage and dies with the session.
func SessionCSRF(secret string) string {
	sum := sha256.Sum256([]byte("kit-csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func csrfOK(got, want string) bool {
	return want != "" && got != "" && ids.Equal([]byte(got), []byte(want))
}

// formSession is the session of a form posted by a signed-in member, nil
// when the form's CSRF token is not the session's (answered 403). The token
// is bound to the session: without one it cannot match.
func (s *Server) formSession(ctx *fasthttp.RequestCtx, f *fasthttp.Args) (*actors.WebSession, string) {
	sess, secret := s.session(ctx)
	if sess == nil || !csrfOK(string(f.Peek("csrf")), SessionCSRF(secret)) {
		s.csrfRejected(ctx)
		return nil, ""
	}
	return sess, secret
}

func (s *Server) csrfRejected(ctx *fasthttp.RequestCtx) {
	s.errorPage(ctx, kiterr.CSRFRejected, "The form could not be verified. Go back, reload the page and try again.")
}

// redirect answers a redirect to loc as given: fasthttp's Redirect would
// rebuild the URL, and a redirect_uri must arrive exactly as registered.
func redirect(ctx *fasthttp.RequestCtx, loc string, status int) {
	ctx.Response.Header.Set("Location", loc)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(status)
}

// safeNext keeps a post-sign-in redirect on the app host.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/app/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/app/"
	}
	return next
}
