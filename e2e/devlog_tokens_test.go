package e2e

import (
	"testing"
)

// auditEntries returns the Kit's audit entries, newest first, as
// event/status/errorCode/installationId maps.
func auditEntries(t *testing.T, w *Workspace, kitID string) []map[string]any {
	t.Helper()
	r := w.S.api(t, w.Dev, "GET", "/dev/kits/"+kitID+"/logs?source=audit&limit=100", nil, nil)
	want(t, r, 200)
	var out []map[string]any
	for _, e := range jarr(r.JSON, "entries") {
		out = append(out, e.(map[string]any))
	}
	return out
}

// countEntries counts the entries with the given event, status and
// errorCode ("" matches an absent one) and level.
func countEntries(es []map[string]any, event, level, status, errorCode string) int {
	n := 0
	for _, e := range es {
		code, _ := e["errorCode"].(string)
		st, _ := e["status"].(string)
		if e["event"] == event && e["level"] == level && st == status && code == errorCode {
			n++
		}
	}
	return n
}

// docs/api.md "Developer log entry": token issues and refusals are
// audit entries of the Kit's log.
func TestDevLog_TokenAudit(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	e := newBotEnv(t, s, baseScopes...)
	in, w := e.In, e.W

	g := authorizeGrant(t, in, w.Mem.ID)
	want(t, refresh(t, in, g.Secret, g.refresh()), 200)
	// The spent refresh token again: a replay, which also revokes the grant.
	wantError(t, refresh(t, in, g.Secret, g.refresh()), 400, "validation_error")
	// A code used twice.
	cookie, _ := webSession(t, s, w.Admin.ID)
	verifier, challenge := pkce()
	code := approveCode(t, in, cookie, "user", challenge)
	want(t, exchange(t, in, g.Secret, code, verifier), 200)
	wantError(t, exchange(t, in, g.Secret, code, verifier), 400, "validation_error")
	// A wrong PKCE verifier.
	code = approveCode(t, in, cookie, "user", challenge)
	other, _ := pkce()
	wantError(t, exchange(t, in, g.Secret, code, other), 400, "validation_error")
	// A wrong client secret.
	wrong := "kcs_" + randToken()
	wantError(t, exchange(t, in, wrong, code, verifier), 401, "invalid_credentials")
	// A bot token from the API access page, then rotated.
	bot := s.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/bot-tokens", nil)
	want(t, bot, 201)
	want(t, s.api(t, bot.Str("token"), "POST", "/auth/rotate", map[string]any{}, nil), 200)

	es := auditEntries(t, w, in.Kit.ID)
	rows := []struct {
		name                            string
		event, level, status, errorCode string
		want                            int
	}{
		{"each code exchange that issues tokens", "token.issued", "info", "user", "", 2},
		{"a bot token issued by the operator (fixture and this test)", "token.issued", "info", "bot", "", 2},
		{"a refresh", "token.refreshed", "info", "user", "", 1},
		{"a bot token rotation", "token.rotated", "info", "bot", "", 1},
		{"a replayed refresh token", "token.refused", "error", "refresh", "refresh_token_replayed", 1},
		{"a spent code", "token.refused", "error", "code", "invalid_code", 1},
		{"a PKCE verifier that does not match", "token.refused", "error", "code", "code_verifier_mismatch", 1},
		{"a wrong client secret", "token.refused", "error", "client", "invalid_client_secret", 1},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if got := countEntries(es, tc.event, tc.level, tc.status, tc.errorCode); got != tc.want {
				t.Fatalf("%d %s entries (status %q, errorCode %q), want %d; entries: %v", got, tc.event, tc.status, tc.errorCode, tc.want, es)
			}
		})
	}
	t.Run("installation entries name the installation", func(t *testing.T) {
		for _, e := range es {
			if e["event"] == "token.refreshed" && e["installationId"] != in.ID {
				t.Fatalf("entry %v, want installationId %s", e, in.ID)
			}
		}
	})
}
