package actors_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// grantRecords counts, by grant, what the installation keeps of its
// authorizations: the credentials of kind code, user and refresh, the
// entries of its grant index, and the member's UserGrant records.
func grantRecords(t *testing.T, n *testNode, g *grantEnv) (creds, index, userGrants map[string]int) {
	t.Helper()
	creds, index, userGrants = map[string]int{}, map[string]int{}, map[string]int{}
	noErr(t, n.store.Scan([]byte{}, []byte{0xff, 0xff, 0xff}, false, func(k, v []byte) bool {
		if actors.KeyKind(k) != "credentialKey" {
			return true
		}
		c := &kitpb.Credential{}
		noErr(t, proto.Unmarshal(v, c))
		if c.InstallationId == g.inst.Id && c.Kind != actors.CallerBot {
			creds[c.GrantId]++
		}
		return true
	}))
	scan := func(prefix []byte, fn func(k, v []byte)) {
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool { fn(k, v); return true }))
	}
	prefix := actors.GrantsPrefix(g.inst.Id)
	scan(prefix, func(k, _ []byte) {
		grant, _, _ := bytes.Cut(k[len(prefix):], []byte("/"))
		index[string(grant)]++
	})
	scan(actors.UserGrantsPrefix(g.inst.Id, g.member), func(_, v []byte) {
		ug := &kitpb.UserGrant{}
		noErr(t, proto.Unmarshal(v, ug))
		userGrants[ug.GrantId]++
	})
	return creds, index, userGrants
}

// TestDeadGrantCredentialsAreSwept: a Kit that refreshes its user tokens
// every hour adds two credentials and two grant index entries an hour for
// every member who authorized it. Once a grant cannot work any more (its
// web session's 7 days are over; a code's 10 minutes, a user token's
// hour), the installation deletes its records in the batches of later
// token requests, so that what it keeps is bounded by its live grants.
func TestDeadGrantCredentialsAreSwept(t *testing.T) {
	tests := []struct {
		name     string
		sweepMax int // 0: the default
	}{
		{"the records of an ended grant go with later token requests", 0},
		{"a sweep bounded below the records to read catches up over later requests", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			if tt.sweepMax > 0 {
				actors.SetWriteSweepMax(n.env, tt.sweepMax)
			}
			g := n.grantEnv(t)
			// A grant refreshed every hour, and a code never exchanged.
			tk := n.userTokens(t, g)
			for range 5 {
				n.clk.Advance(time.Hour)
				var err error
				tk, err = n.refresh(g, tk.refresh)
				noErr(t, err)
			}
			_, err := n.code(g, actors.CallerUser, g.member, g.session, challengeOf(testVerifier))
			noErr(t, err)
			dead, deadIndex, deadUG := grantRecords(t, n, g)
			if len(dead) != 2 || len(deadIndex) != 2 || len(deadUG) != 1 {
				t.Fatalf("before: credentials %v, index entries %v, user grants %v; want two grants and one user grant", dead, deadIndex, deadUG)
			}

			// A grant of a later session, live once the first one's session
			// ended: its spent refresh tokens must stay, to tell a replay.
			n.clk.Advance(6 * 24 * time.Hour)
			g.session = n.session(t, g.ws, g.member)
			first := n.userTokens(t, g)
			live, err := n.refresh(g, first.refresh)
			noErr(t, err)
			n.clk.Advance(actors.SessionLifetime - 6*24*time.Hour)
			for range 30 {
				n.clk.Advance(10 * time.Minute)
				live, err = n.refresh(g, live.refresh)
				noErr(t, err)
			}

			creds, index, ugs := grantRecords(t, n, g)
			for grant := range dead {
				if creds[grant] != 0 || index[grant] != 0 || ugs[grant] != 0 {
					t.Errorf("grant %s, ended, keeps %d credentials, %d index entries, %d user grants; want none", grant, creds[grant], index[grant], ugs[grant])
				}
			}
			if len(ugs) != 1 {
				t.Errorf("user grants %v; want the live grant's alone", ugs)
			}
			_, err = n.refresh(g, first.refresh)
			wantCode(t, err, kiterr.Validation, "refreshToken")
			if _, err := n.refresh(g, live.refresh); err == nil {
				t.Fatal("the replay of a spent refresh token of the live grant did not revoke it")
			}
		})
	}
}
