package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
)

// csrfHeader carries a member action's CSRF token (OPERATIONS.md section 6).
const csrfHeader = "X-CSRF-Token"

var (
	errNoSession = kiterr.New(kiterr.Unauthenticated, "a signed-in session is required")
	errBadCSRF   = kiterr.New(kiterr.CSRFRejected, "the X-CSRF-Token header is missing or is not this session's")
)

// memberOf authenticates a member action: the session cookie, and on every
// method but GET (and HEAD, which is GET without the body) the session's
// CSRF token in X-CSRF-Token. It writes the error and returns false when
// the request may not go on.
func (s *Server) memberOf(ctx *fasthttp.RequestCtx) (*actors.WebSession, bool) {
	secret := ctx.Request.Header.Cookie(app.SessionCookie)
	if len(secret) == 0 {
		s.fail(ctx, errNoSession)
		return nil, false
	}
	sess, err := s.auth.Session(secret)
	if err != nil {
		if kiterr.CodeOf(err) == kiterr.InvalidToken {
			err = errNoSession
		}
		s.fail(ctx, err)
		return nil, false
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		got := ctx.Request.Header.Peek(csrfHeader)
		if want := app.SessionCSRF(string(secret)); len(got) == 0 || !ids.Equal(got, []byte(want)) {
			s.fail(ctx, errBadCSRF)
			return nil, false
		}
	}
	return sess, true
}

// sessionView is GET /app/api/session's answer.
type sessionView struct {
	UserID      string `json:"userId"`
	WorkspaceID string `json:"workspaceId"`
	CSRF        string `json:"csrf"`
}

func (s *Server) memberSession(in call) (reply, error) {
	secret := in.ctx.Request.Header.Cookie(app.SessionCookie)
	in.carriesSecret()
	return reply{status: fasthttp.StatusOK, json: sessionView{
		UserID: in.member.UserID, WorkspaceID: in.member.WorkspaceID, CSRF: app.SessionCSRF(string(secret)),
	}}, nil
}
