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

// signInChoiceRecords counts the sign-in choices ws holds: their
// credentials, and the entries of its index of them.
func signInChoiceRecords(t *testing.T, n *testNode, ws string) (creds, index int) {
	t.Helper()
	noErr(t, n.store.Scan([]byte{}, []byte{0xff, 0xff, 0xff}, false, func(k, v []byte) bool {
		if actors.KeyKind(k) == "credentialKey" {
			c := &kitpb.Credential{}
			noErr(t, proto.Unmarshal(v, c))
			if c.Kind == "signin_choice" && c.WorkspaceId == ws {
				creds++
			}
		}
		return true
	}))
	prefix := actors.SignInChoicesPrefix(ws)
	noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, _ []byte) bool { index++; return true }))
	return creds, index
}

// TestExpiredSignInChoicesAreSwept: every sign-in whose password matched
// in several workspaces leaves a choice's credential, which nothing takes
// once its 5 minutes are over. The holding workspace deletes it in the
// batch of a later sign-in of its own (a choice or a session), so that
// what it keeps is bounded by its live choices.
func TestExpiredSignInChoicesAreSwept(t *testing.T) {
	choose := func(t *testing.T, n *testNode, w *workspace) []byte {
		t.Helper()
		h := ids.Hash(ids.NewSecret(ids.SignInChoice))
		ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{{WorkspaceId: w.id, UserId: w.users[0]}}})
		return h[:]
	}
	take := func(n *testNode, w *workspace, h []byte) error {
		_, err := try[*kitpb.SignInChoice](n, actors.KindWorkspace, w.id, &kitpb.TakeSignInChoice{SecretHash: h, WorkspaceId: w.id})
		return err
	}
	tests := []struct {
		name string
		age  time.Duration // of the choice at the later sign-in
		// later is the sign-in that sweeps.
		later func(t *testing.T, n *testNode, w *workspace)
		swept bool
	}{
		{"an expired choice is swept by a later choice", actors.SignInChoiceLifetime, func(t *testing.T, n *testNode, w *workspace) { choose(t, n, w) }, true},
		{"an expired choice is swept by a later session", actors.SignInChoiceLifetime, func(t *testing.T, n *testNode, w *workspace) { n.session(t, w.id, w.users[0]) }, true},
		{"a live choice is kept and can be taken", actors.SignInChoiceLifetime - time.Second, func(t *testing.T, n *testNode, w *workspace) { choose(t, n, w) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			w := n.workspace(t, 1)
			n.session(t, w.id, w.users[0]) // the first sign-in of the activation sweeps
			n.clk.Advance(actors.WriteSweepEvery - tt.age)
			h := choose(t, n, w)
			n.clk.Advance(tt.age) // a sweep is due again
			tt.later(t, n, w)

			creds, index := signInChoiceRecords(t, n, w.id)
			if creds != index {
				t.Errorf("%d choice credentials, %d index entries; want as many", creds, index)
			}
			later := creds // the later sign-in's own choice, if any
			if !tt.swept {
				later--
			}
			if later < 0 || later > 1 {
				t.Fatalf("%d choice credentials; want the expired one swept: %v", creds, tt.swept)
			}
			err := take(n, w, h)
			if tt.swept {
				wantCode(t, err, kiterr.NotFound)
				return
			}
			noErr(t, err)
			if c, i := signInChoiceRecords(t, n, w.id); c != later || i != later {
				t.Fatalf("a taken choice leaves %d credentials, %d index entries; want %d", c, i, later)
			}
		})
	}

	t.Run("a sweep reads at most writeSweepMax choices, and the next sign-in goes on", func(t *testing.T) {
		n := ownNode(t)
		actors.SetWriteSweepMax(n.env, 2)
		w := n.workspace(t, 1)
		for range 5 {
			choose(t, n, w)
		}
		n.clk.Advance(actors.WriteSweepEvery)
		for i, left := range []int{3, 1, 0} {
			live := choose(t, n, w)
			creds, index := signInChoiceRecords(t, n, w.id)
			if creds != left+1 || index != creds {
				t.Fatalf("after sign-in %d: %d credentials, %d index entries; want %d expired left and the live one", i+1, creds, index, left)
			}
			noErr(t, take(n, w, live))
			n.clk.Advance(time.Second)
		}
	})
}
