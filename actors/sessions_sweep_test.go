package actors_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// sessionRecords counts the workspace's session records, its session
// credentials (the cookies), and the locators of sessions.
func sessionRecords(t *testing.T, n *testNode, ws string, sessions []string) (recs, creds, locators int) {
	t.Helper()
	prefix := actors.SessionsPrefix(ws)
	noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool { recs++; return true }))
	noErr(t, n.store.Scan([]byte{}, []byte{0xff, 0xff, 0xff}, false, func(k, v []byte) bool {
		if actors.KeyKind(k) == "credentialKey" {
			c := &kitpb.Credential{}
			noErr(t, proto.Unmarshal(v, c))
			if c.Kind == "session" && c.WorkspaceId == ws {
				creds++
			}
		}
		return true
	}))
	for _, s := range sessions {
		found, err := n.store.Has(actors.LocatorKey(s))
		noErr(t, err)
		if found {
			locators++
		}
	}
	return recs, creds, locators
}

// TestEndedSessionsAreSwept: every sign-in writes a session, its
// cookie's credential, its secret's hash and its locator; once its 7
// days are over (signed out or not) nothing reads them as live again,
// and a later sign-in of the workspace deletes them, so that what a
// workspace keeps of its sessions is bounded by the last 7 days'.
func TestEndedSessionsAreSwept(t *testing.T) {
	n := ownNode(t)
	ws, member := ids.New(), ids.New()
	ask[*kitpb.WorkspaceReply](t, n, actors.KindWorkspace, ws, &kitpb.CreateWorkspace{Name: "sessions"})
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, ws, &kitpb.CreateUser{UserId: member, DisplayName: "m", Role: "member"})
	var old []string
	for range 5 {
		old = append(old, n.session(t, ws, member))
	}
	ask[*kitpb.Ok](t, n, actors.KindWorkspace, ws, &kitpb.EndSession{SessionId: old[0]})
	n.clk.Advance(6 * 24 * time.Hour)
	live := n.session(t, ws, member)
	n.clk.Advance(24*time.Hour + time.Second)
	last := n.session(t, ws, member)

	recs, creds, locators := sessionRecords(t, n, ws, old)
	if recs != 2 || creds != 2 || locators != 0 {
		t.Errorf("%d sessions, %d session credentials, %d locators of ended sessions; want 2, 2 and 0", recs, creds, locators)
	}
	for _, s := range []string{live, last} {
		ask[*kitpb.Ok](t, n, actors.KindWorkspace, ws, &kitpb.EndSession{SessionId: s})
	}
}
