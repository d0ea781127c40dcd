package actors_test

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The email index and the pending workspace choice of a sign-in without a
// workspace (docs/decisions.md "Sign-in without a workspace").
func TestSignInRules(t *testing.T) {
	n := shared
	hash := []byte("$2a$10$not.a.real.hash.but.the.index.does.not.care.abcdefghi")
	// The actors' store is shared by every test of the package and every
	// -count run, so each address is new: a whole ID, whose first characters
	// are only its time.
	newEmail := func() string { return fmt.Sprintf("signin-%s@example.com", ids.New()) }
	member := func(t *testing.T, wsID, email string, password []byte) string {
		t.Helper()
		id := ids.New()
		ask[*kitpb.UserReply](t, n, actors.KindWorkspace, wsID, &kitpb.CreateUser{
			UserId: id, DisplayName: "m", Email: email, Role: "member", PasswordHash: password,
		})
		return id
	}
	members := func(t *testing.T, email string, limit int) []actors.SignInMember {
		t.Helper()
		got, err := actors.SignInMembers(n.env, email, limit)
		noErr(t, err)
		return got
	}
	choice := func(t *testing.T, holder string, choices ...*kitpb.SignInChoice) []byte {
		t.Helper()
		h := sha256.Sum256([]byte(ids.NewSecret(ids.SignInChoice)))
		ask[*kitpb.Ok](t, n, actors.KindWorkspace, holder, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: choices})
		return h[:]
	}
	// pair is a choice held by a, between a member of a and one of b.
	pair := func(t *testing.T) (a, b *workspace, h []byte) {
		t.Helper()
		a, b = n.workspace(t, 1), n.workspace(t, 1)
		return a, b, choice(t, a.id, &kitpb.SignInChoice{WorkspaceId: a.id, UserId: a.users[0]}, &kitpb.SignInChoice{WorkspaceId: b.id, UserId: b.users[0]})
	}
	take := func(holder string, h []byte, ws string) (*kitpb.SignInChoice, error) {
		return try[*kitpb.SignInChoice](n, actors.KindWorkspace, holder, &kitpb.TakeSignInChoice{SecretHash: h, WorkspaceId: ws})
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a member with an email and a password is found by email in every workspace", func(t *testing.T) {
			a, b := n.workspace(t, 0), n.workspace(t, 0)
			email := newEmail()
			ua, ub := member(t, a.id, email, hash), member(t, b.id, email, hash)
			got := members(t, email, 10)
			want := []actors.SignInMember{{WorkspaceID: a.id, UserID: ua}, {WorkspaceID: b.id, UserID: ub}}
			if !slices.Equal(got, want) {
				t.Fatalf("members %v, want %v (oldest first)", got, want)
			}
		}},
		{"emails compare case-insensitively", func(t *testing.T) {
			w := n.workspace(t, 0)
			email := newEmail()
			u := member(t, w.id, "Mixed."+email, hash)
			if got := members(t, "MIXED."+email, 10); len(got) != 1 || got[0].UserID != u {
				t.Fatalf("members %v, want %s", got, u)
			}
		}},
		{"a member without a password is not in the index", func(t *testing.T) {
			w := n.workspace(t, 0)
			email := newEmail()
			member(t, w.id, email, nil)
			if got := members(t, email, 10); len(got) != 0 {
				t.Fatalf("members %v, want none", got)
			}
		}},
		{"a deactivated member leaves the index", func(t *testing.T) {
			a, b := n.workspace(t, 0), n.workspace(t, 0)
			email := newEmail()
			ua := member(t, a.id, email, hash)
			ub := member(t, b.id, email, hash)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, a.id, &kitpb.DeactivateUser{UserId: ua})
			if got := members(t, email, 10); len(got) != 1 || got[0].UserID != ub {
				t.Fatalf("members %v, want only %s", got, ub)
			}
		}},
		{"at most limit members are found, the oldest", func(t *testing.T) {
			email := newEmail()
			var want []string
			for range 4 {
				want = append(want, member(t, n.workspace(t, 0).id, email, hash))
			}
			got := members(t, email, 3)
			if len(got) != 3 || got[0].UserID != want[0] || got[2].UserID != want[2] {
				t.Fatalf("members %v, want the first 3 of %v", got, want)
			}
		}},
		{"a choice gives the member of the workspace chosen", func(t *testing.T) {
			a, b, h := pair(t)
			c, err := take(a.id, h, b.id)
			noErr(t, err)
			if c.WorkspaceId != b.id || c.UserId != b.users[0] {
				t.Fatalf("choice %v, want %s in %s", c, b.users[0], b.id)
			}
		}},
		{"a choice is used once", func(t *testing.T) {
			a, b, h := pair(t)
			_, err := take(a.id, h, a.id)
			noErr(t, err)
			_, err = take(a.id, h, b.id)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a workspace not among the choices is refused, and the choice is spent", func(t *testing.T) {
			a, _, h := pair(t)
			c := n.workspace(t, 1)
			_, err := take(a.id, h, c.id)
			wantCode(t, err, kiterr.NotFound)
			_, err = take(a.id, h, a.id)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a choice ends after SignInChoiceLifetime", func(t *testing.T) {
			a, _, h := pair(t)
			n.clk.Advance(actors.SignInChoiceLifetime)
			_, err := take(a.id, h, a.id)
			wantCode(t, err, kiterr.NotFound)
		}},
		{"only the workspace holding a choice spends it", func(t *testing.T) {
			a, b, h := pair(t)
			_, err := take(b.id, h, b.id)
			wantCode(t, err, kiterr.NotFound)
			_, err = take(a.id, h, b.id)
			noErr(t, err)
		}},
		{"a choice is held only by a workspace with an active member among the choices", func(t *testing.T) {
			a, b := n.workspace(t, 1), n.workspace(t, 1)
			h := sha256.Sum256([]byte("x"))
			_, err := try[*kitpb.Ok](n, actors.KindWorkspace, a.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{{WorkspaceId: b.id, UserId: b.users[0]}}})
			wantCode(t, err, kiterr.Validation, "choices")
			_, err = try[*kitpb.Ok](n, actors.KindWorkspace, a.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{{WorkspaceId: a.id, UserId: b.users[0]}}})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"the holder of a choice is located by its secret", func(t *testing.T) {
			a, b := n.workspace(t, 1), n.workspace(t, 1)
			secret := ids.NewSecret(ids.SignInChoice)
			h := sha256.Sum256([]byte(secret))
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, a.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{
				{WorkspaceId: a.id, UserId: a.users[0]}, {WorkspaceId: b.id, UserId: b.users[0]},
			}})
			owner, err := actors.SignInChoiceOwner(n.env, secret)
			noErr(t, err)
			if owner != a.id {
				t.Fatalf("owner %s, want %s", owner, a.id)
			}
			_, err = actors.SignInChoiceOwner(n.env, ids.NewSecret(ids.SignInChoice))
			wantCode(t, err, kiterr.NotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
