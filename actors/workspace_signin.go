package actors

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// SignInChoiceLifetime is how long a member has to choose a workspace after
// a sign-in whose password matched in several: long enough to read a short
// list of names, short enough that a page left open is no standing key.
const SignInChoiceLifetime = 5 * time.Minute

// credSignInChoice is the Credential kind of a pending workspace choice.
// It is no bearer credential: the authenticator refuses every kind it does
// not know.
const credSignInChoice = "signin_choice"

// handleSignIn answers the app host's sign-in requests: the lookup of a
// member by email, and the pending workspace choice of a sign-in without a
// workspace. ok is false for any other request.
func (a *workspaceActor) handleSignIn(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.FindUserByEmail:
		id, found := a.emails[normalEmail(m.Email)]
		u := a.users[id]
		if !found || u == nil || !u.Active {
			return nil, true, kiterr.Absent("user")
		}
		return &kitpb.UserReply{User: u}, true, nil
	case *kitpb.CreateSignInChoice:
		reply, err = a.createSignInChoice(m)
		return reply, true, err
	case *kitpb.TakeSignInChoice:
		reply, err = a.takeSignInChoice(m)
		return reply, true, err
	}
	return nil, false, nil
}

// createSignInChoice records a pending choice under the hash of its secret.
// This workspace holds it because one of its members is among the choices:
// the credential belongs to that member, like a session.
func (a *workspaceActor) createSignInChoice(m *kitpb.CreateSignInChoice) (proto.Message, error) {
	i := slices.IndexFunc(m.Choices, func(c *kitpb.SignInChoice) bool { return c.WorkspaceId == a.id })
	if len(m.SecretHash) != 32 || i < 0 {
		return nil, kiterr.Invalid("choices", "must include a member of this workspace")
	}
	if _, err := a.activeUser(m.Choices[i].UserId); err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	expires := nanos(now.Add(SignInChoiceLifetime))
	first, b := a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepSignInChoices(first, b, nanos(now))
	if err != nil {
		closeAll([]batch{first, b})
		return nil, err
	}
	// The index entry that finds the choice commits before its credential
	// (workspace_signin_sweep.go).
	first.Set(signInChoiceKey(a.id, expires, m.SecretHash), nil)
	put(b, credentialKey(m.SecretHash), &kitpb.Credential{
		Kind: credSignInChoice, WorkspaceId: a.id, UserId: m.Choices[i].UserId,
		CreatedAt: nanos(now), ExpiresAt: expires, Choices: m.Choices,
	})
	if err := a.env.commitInSteps(first, b); err != nil {
		return nil, fmt.Errorf("record sign-in choice in %s: %w", a.id, err)
	}
	a.choiceSweep = sweep
	return &kitpb.Ok{}, nil
}

// takeSignInChoice spends a pending choice and answers the one of the
// workspace asked for. Any attempt spends it, so a choice is used once,
// and a workspace the password did not match is never among its choices.
func (a *workspaceActor) takeSignInChoice(m *kitpb.TakeSignInChoice) (proto.Message, error) {
	cred := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(m.SecretHash), cred)
	if err != nil {
		return nil, err
	}
	if !found || cred.Kind != credSignInChoice || cred.WorkspaceId != a.id {
		return nil, kiterr.Absent("sign-in choice")
	}
	// The credential goes first, its index entry after it
	// (workspace_signin_sweep.go).
	spend, b := a.env.newBatch(), a.env.newBatch()
	spend.Delete(credentialKey(m.SecretHash))
	b.Delete(signInChoiceKey(a.id, cred.ExpiresAt, m.SecretHash))
	if err := a.env.commitInSteps(spend, b); err != nil {
		return nil, fmt.Errorf("spend sign-in choice in %s: %w", a.id, err)
	}
	if nanos(a.env.Clock.Now()) >= cred.ExpiresAt {
		return nil, kiterr.Absent("sign-in choice")
	}
	for _, c := range cred.Choices {
		if c.WorkspaceId == m.WorkspaceId {
			return c, nil
		}
	}
	return nil, kiterr.Absent("sign-in choice")
}
