package e2e

import (
	"testing"
)

// memberCall is one member action (OPERATIONS.md section 6) with the
// session cookie (as webSession gives it: "kit_session=…") and, when csrf
// is not "", the X-CSRF-Token header.
func memberCall(t testing.TB, s *Server, method, path, cookie, csrf string, body any) *Resp {
	t.Helper()
	hdr := map[string]string{}
	if cookie != "" {
		hdr["Cookie"] = cookie
	}
	if csrf != "" {
		hdr["X-CSRF-Token"] = csrf
	}
	return s.do(t, method, path, "", body, hdr)
}

// memberSession is the member's CSRF token, from GET /app/api/session.
func memberSession(t testing.TB, s *Server, cookie string) (csrf string) {
	t.Helper()
	r := memberCall(t, s, "GET", "/app/api/session", cookie, "", nil)
	want(t, r, 200)
	return r.Str("csrf")
}

func TestMemberSession(t *testing.T) {
	s := sharedServer(t)
	w := newWorkspace(t, s)
	cookie, _ := webSession(t, s, w.Mem.ID)

	t.Run("a live session gets its member, workspace and CSRF token", func(t *testing.T) {
		r := memberCall(t, s, "GET", "/app/api/session", cookie, "", nil)
		want(t, r, 200)
		if r.Str("userId") != w.Mem.ID || r.Str("workspaceId") != w.ID || r.Str("csrf") == "" {
			t.Fatalf("session: %s", r.Body)
		}
	})
	t.Run("HEAD answers what GET does, without a CSRF token (docs/decisions.md HEAD)", func(t *testing.T) {
		// HEAD is as safe as GET: a CSRF token guards the actions only.
		r := memberCall(t, s, "HEAD", "/app/api/session", cookie, "", nil)
		if r.Status != 200 || len(r.Body) != 0 {
			t.Fatalf("HEAD /app/api/session: %d %s, want what GET answers: 200 without the body", r.Status, r.Body)
		}
	})
	t.Run("without a session cookie: 401 unauthenticated", func(t *testing.T) {
		wantError(t, memberCall(t, s, "GET", "/app/api/session", "", "", nil), 401, "unauthenticated")
	})
	t.Run("a made-up session cookie: 401 unauthenticated", func(t *testing.T) {
		wantError(t, memberCall(t, s, "GET", "/app/api/session", "kit_session=ks_madeup", "", nil), 401, "unauthenticated")
	})
	t.Run("an unknown member route: 404 in the API's error body", func(t *testing.T) {
		wantError(t, memberCall(t, s, "GET", "/app/api/nothing", cookie, "", nil), 404, "not_found")
	})
	t.Run("an ended session: 401 unauthenticated", func(t *testing.T) {
		other, otherID := webSession(t, s, w.Mem.ID)
		want(t, s.ops(t, "DELETE", "/ops/v1/sessions/"+otherID, nil), 200)
		wantError(t, memberCall(t, s, "GET", "/app/api/session", other, "", nil), 401, "unauthenticated")
	})
	t.Run("a deactivated member's session: 401 unauthenticated", func(t *testing.T) {
		// docs/credentials.md: deactivating the member ends what their
		// sessions authorized, and the sessions themselves.
		gone := w.user(t, "member")
		cookie, _ := webSession(t, s, gone.ID)
		csrf := memberSession(t, s, cookie)
		want(t, s.ops(t, "DELETE", "/ops/v1/users/"+gone.ID, nil), 200)
		wantError(t, memberCall(t, s, "GET", "/app/api/session", cookie, "", nil), 401, "unauthenticated")
		wantError(t, memberCall(t, s, "POST", "/app/api/commands", cookie, csrf, map[string]any{"conversationId": newUUID(), "command": "/x", "text": ""}), 401, "unauthenticated")
		if r := s.page(t, "GET", "/app/", cookie, nil); csrfField.Match(r.Body) {
			t.Fatalf("the home page is signed in for a deactivated member's session%s", r)
		}
	})
}
