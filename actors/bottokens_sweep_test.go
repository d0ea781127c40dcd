package actors_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// botTokenRecords reads what the installation keeps of its bot tokens: the
// credentials of kind bot, by hash, and the hashes its token index
// (botTokenKey) and grant index (grantCredentialKey) name.
func botTokenRecords(t *testing.T, n *testNode, inst string) (creds map[string]*kitpb.Credential, index, grants map[string]bool) {
	t.Helper()
	creds, index, grants = map[string]*kitpb.Credential{}, map[string]bool{}, map[string]bool{}
	noErr(t, n.store.Scan([]byte{}, []byte{0xff, 0xff, 0xff}, false, func(k, v []byte) bool {
		if actors.KeyKind(k) != "credentialKey" {
			return true
		}
		c := &kitpb.Credential{}
		noErr(t, proto.Unmarshal(v, c))
		if c.InstallationId == inst && c.Kind == actors.CallerBot {
			creds[string(k[len(k)-32:])] = c
		}
		return true
	}))
	scan := func(prefix []byte, fn func(k, v []byte)) {
		noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool { fn(k, v); return true }))
	}
	scan(actors.BotTokensPrefix(inst), func(_, v []byte) { index[string(v)] = true })
	scan(actors.GrantsPrefix(inst), func(k, _ []byte) { grants[string(k[len(k)-32:])] = true })
	return creds, index, grants
}

func (n *testNode) rotateBot(t testing.TB, inst, old string) string {
	t.Helper()
	next := ids.NewSecret(ids.BotToken)
	o, h := ids.Hash(old), ids.Hash(next)
	ask[*kitpb.RotateBotTokenReply](t, n, actors.KindInstallation, inst, &kitpb.RotateBotToken{OldHash: o[:], NewHash: h[:]})
	return next
}

// TestDeadBotTokensAreSwept: every rotation leaves the old token's record,
// which nothing reads as working once its 24 hours are over, and a
// revoked token's record stays too. The installation deletes them, with
// their index entries, in the batches of the bot tokens it issues later,
// so that what it keeps is bounded by the tokens that work; a swept token
// is answered as before (401), and revoking it is 404, as an unknown one.
func TestDeadBotTokensAreSwept(t *testing.T) {
	tests := []struct {
		name string
		// token makes the token of the row from a working one; bot is
		// the working token of the installation, from a bot code's
		// exchange when fromGrant.
		fromGrant bool
		token     func(t *testing.T, n *testNode, inst, bot string) string
		wait      time.Duration
		swept     bool
	}{
		{"a token rotated over 24 hours ago is swept", false, func(t *testing.T, n *testNode, inst, bot string) string {
			n.rotateBot(t, inst, bot)
			return bot
		}, actors.BotRotationOverlap + time.Second, true},
		{"a bot code's token rotated over 24 hours ago is swept with its grant entry", true, func(t *testing.T, n *testNode, inst, bot string) string {
			n.rotateBot(t, inst, bot)
			return bot
		}, actors.BotRotationOverlap + time.Second, true},
		{"a token rotated within 24 hours is kept and works", false, func(t *testing.T, n *testNode, inst, bot string) string {
			n.rotateBot(t, inst, bot)
			return bot
		}, actors.BotRotationOverlap - time.Minute, false},
		{"a live token is kept and works", false, func(t *testing.T, n *testNode, inst, bot string) string {
			return bot
		}, 30 * 24 * time.Hour, false},
		{"a token revoked over 24 hours ago is swept", false, func(t *testing.T, n *testNode, inst, bot string) string {
			noErr(t, n.auth.Revoke(bot))
			return bot
		}, actors.RevokedBotTokenKept + time.Second, true},
		{"a token revoked within 24 hours is kept: revoking it again tells the caches again", false, func(t *testing.T, n *testNode, inst, bot string) string {
			noErr(t, n.auth.Revoke(bot))
			return bot
		}, actors.RevokedBotTokenKept - time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			g := n.grantEnv(t)
			inst := g.inst.Id
			var bot string
			if tt.fromGrant {
				code, err := n.code(g, actors.CallerBot, g.admin, g.adminSes, "")
				noErr(t, err)
				tk, _, err := n.exchange(g, code, "")
				noErr(t, err)
				bot = tk.bot
			} else {
				bot = n.botToken(t, inst)
			}
			tok := tt.token(t, n, inst, bot)
			h := ids.Hash(tok)
			n.clk.Advance(tt.wait)
			n.botToken(t, inst) // a later issue sweeps

			creds, index, grants := botTokenRecords(t, n, inst)
			_, kept := creds[string(h[:])]
			if kept == tt.swept || index[string(h[:])] == tt.swept {
				t.Fatalf("credential kept %v, index entry kept %v; want both %v", kept, index[string(h[:])], !tt.swept)
			}
			if tt.fromGrant && grants[string(h[:])] == tt.swept {
				t.Fatalf("grant index entry kept %v; want %v", grants[string(h[:])], !tt.swept)
			}
			for hash := range index {
				if creds[hash] == nil {
					t.Errorf("an index entry names a bot token that is gone")
				}
			}
			_, authErr := n.auth.Authenticate([]byte(tok))
			revokeErr := n.auth.Revoke(tok)
			switch {
			case tt.swept:
				wantCode(t, authErr, kiterr.InvalidToken)
				wantCode(t, revokeErr, kiterr.NotFound)
			case creds[string(h[:])].RevokedAt != 0:
				wantCode(t, authErr, kiterr.InvalidToken)
				noErr(t, revokeErr)
			default:
				noErr(t, authErr)
				noErr(t, revokeErr)
			}
		})
	}
}

// TestBotTokenSweepIsBounded: a sweep reads at most writeSweepMax index
// entries, and an installation behind on its sweeps catches up over its
// later issues.
func TestBotTokenSweepIsBounded(t *testing.T) {
	const bound = 3
	n := ownNode(t)
	actors.SetWriteSweepMax(n.env, bound)
	g := n.grantEnv(t)
	inst := g.inst.Id
	tok := n.botToken(t, inst)
	live := n.botToken(t, inst)
	var dead [][32]byte
	for range 8 {
		dead = append(dead, ids.Hash(tok))
		tok = n.rotateBot(t, inst, tok)
	}
	n.clk.Advance(actors.BotRotationOverlap + time.Second)
	countDead := func() int {
		creds, _, _ := botTokenRecords(t, n, inst)
		left := 0
		for _, h := range dead {
			if creds[string(h[:])] != nil {
				left++
			}
		}
		return left
	}
	left := countDead()
	if left != len(dead) {
		t.Fatalf("%d of %d rotated tokens before their overlap ended; want all", left, len(dead))
	}
	for i := 0; left > 0; i++ {
		if i == 10 {
			t.Fatalf("%d rotated tokens left after %d issues", left, i)
		}
		n.botToken(t, inst)
		now := countDead()
		if left-now > bound {
			t.Fatalf("one issue swept %d tokens; want at most %d", left-now, bound)
		}
		left = now
		n.clk.Advance(actors.WriteSweepEvery)
	}
	creds, _, _ := botTokenRecords(t, n, inst)
	for _, s := range []string{tok, live} {
		h := ids.Hash(s)
		if creds[string(h[:])] == nil {
			t.Fatal("a working token was swept")
		}
		_, err := n.auth.Authenticate([]byte(s))
		noErr(t, err)
	}
}
