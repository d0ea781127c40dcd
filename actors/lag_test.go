package actors_test

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// laggingReplicas plays this node's replicas of some partitions a moment
// behind their leaders, elsewhere: a commit returns once a partition's
// leader applied it (replica.Log), and the replica here applies it only
// when it is caught up with the leader (Env.Reads). Until then, reads
// here see the partition as it was.
type laggingReplicas struct {
	inner actors.Committer
	store *persistence.Store

	mu     sync.Mutex
	lags   func(partition.ID) bool // nil: none lags
	behind map[partition.ID]*persistence.Batch
}

// lagReplicas puts a laggingReplicas in front of n's commits and reads.
// It must run before n's actors commit anything.
func lagReplicas(n *testNode) *laggingReplicas {
	l := &laggingReplicas{inner: n.env.Commits, store: n.store, behind: make(map[partition.ID]*persistence.Batch)}
	if l.inner == nil {
		l.inner = storeCommits{n.store}
	}
	n.env.Commits, n.env.Reads = l, l
	return l
}

// lag has the replicas of the partitions lags answers true for fall
// behind from now on.
func (l *laggingReplicas) lag(lags func(partition.ID) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lags = lags
}

func (l *laggingReplicas) Commit(repr []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.store.NewBatch()
	defer now.Close()
	err := persistence.Ops(repr, func(op persistence.Op) error {
		p, ok := partition.OfKey(op.Key)
		if !ok || l.lags == nil || !l.lags(p) {
			now.Add(op)
			return nil
		}
		if l.behind[p] == nil {
			l.behind[p] = l.store.NewBatch()
		}
		l.behind[p].Add(op)
		return nil
	})
	if err != nil || now.Empty() {
		return err
	}
	return l.inner.Commit(now.Repr())
}

// CatchUp applies here what partition p's leader applied.
func (l *laggingReplicas) CatchUp(p partition.ID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.behind[p]
	if b == nil {
		return nil
	}
	delete(l.behind, p)
	defer b.Close()
	return l.inner.Commit(b.Repr())
}

// An actor that changes a record of another partition (a credential it
// spends, rotates, revokes or touches) reads it caught up with its
// leader: the replica here may not hold the actor's own last change yet,
// and a change made on its copy would undo that one (docs/cluster.md,
// "Reads of another partition's record").
func TestChangesOfAnotherPartitionsRecordReadItCaughtUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node per row")
	}
	for _, tc := range []struct {
		name string
		// run does the row's writes on n, whose replicas of every
		// partition but the one of owner lag once lag is called.
		run func(t *testing.T, n *testNode, lag func(owner string))
	}{
		{"an authorization code is exchanged once", func(t *testing.T, n *testNode, lag func(string)) {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challengeOf(testVerifier))
			noErr(t, err)
			lag(g.inst.Id)
			_, _, err = n.exchange(g, code, testVerifier)
			noErr(t, err)
			if _, _, err := n.exchange(g, code, testVerifier); err == nil {
				t.Fatal("a code was exchanged twice")
			}
		}},
		{"a refresh token is spent once", func(t *testing.T, n *testNode, lag func(string)) {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			lag(g.inst.Id)
			_, err := n.refresh(g, tk.refresh)
			noErr(t, err)
			if _, err := n.refresh(g, tk.refresh); err == nil {
				t.Fatal("a refresh token was spent twice")
			}
		}},
		{"a bot token is rotated once", func(t *testing.T, n *testNode, lag func(string)) {
			g := n.grantEnv(t)
			old := n.botToken(t, g.inst.Id)
			lag(g.inst.Id)
			for i, want := range []bool{true, false} {
				o, h := ids.Hash(old), ids.Hash(ids.NewSecret(ids.BotToken))
				_, err := try[*kitpb.RotateBotTokenReply](n, actors.KindInstallation, g.inst.Id, &kitpb.RotateBotToken{OldHash: o[:], NewHash: h[:]})
				if (err == nil) != want {
					t.Fatalf("rotation %d of one token: %v", i+1, err)
				}
			}
		}},
		{"a sign-in choice is taken once", func(t *testing.T, n *testNode, lag func(string)) {
			w := n.workspace(t, 1)
			h := ids.Hash(ids.NewSecret(ids.SignInChoice))
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{{WorkspaceId: w.id, UserId: w.users[0]}}})
			lag(w.id)
			take := &kitpb.TakeSignInChoice{SecretHash: h[:], WorkspaceId: w.id}
			ask[*kitpb.SignInChoice](t, n, actors.KindWorkspace, w.id, take)
			if _, err := try[*kitpb.SignInChoice](n, actors.KindWorkspace, w.id, take); err == nil {
				t.Fatal("a sign-in choice was taken twice")
			}
		}},
		{"a use recorded after a revocation leaves the bot token revoked", func(t *testing.T, n *testNode, lag func(string)) {
			g := n.grantEnv(t)
			tok := n.botToken(t, g.inst.Id)
			p, err := n.auth.Authenticate([]byte(tok))
			noErr(t, err)
			lag(g.inst.Id)
			ask[*kitpb.Ok](t, n, actors.KindInstallation, g.inst.Id, &kitpb.RevokeCredential{TokenId: p.TokenID})
			ask[*kitpb.Ok](t, n, actors.KindInstallation, g.inst.Id, &kitpb.TouchBotToken{TokenId: p.TokenID, At: n.clk.Now().UnixNano()})
			wantRevoked(t, n, tok)
		}},
		{"a use recorded after a revocation leaves the developer token revoked", func(t *testing.T, n *testNode, lag func(string)) {
			w := n.workspace(t, 1)
			tok, id := ids.NewSecret(ids.DeveloperToken), ids.New()
			h := ids.Hash(tok)
			ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{UserId: w.users[0], TokenId: id, Name: "ci", SecretHash: h[:]})
			lag(w.id)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.RevokeCredential{TokenId: id})
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.TouchDeveloperToken{TokenId: id, At: n.clk.Now().UnixNano()})
			wantRevoked(t, n, tok)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := startNode(vfs.NewMem(), nil)
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			replicas := lagReplicas(n)
			tc.run(t, n, func(owner string) {
				home := partition.Of(owner)
				replicas.lag(func(p partition.ID) bool { return p != home })
			})
		})
	}
}

// wantRevoked checks, on a replica caught up with its leader, that the
// credential of token is revoked.
func wantRevoked(t *testing.T, n *testNode, token string) {
	t.Helper()
	h := ids.Hash(token)
	k := actors.CredentialKey(h[:])
	p, _ := partition.OfKey(k)
	noErr(t, n.env.Reads.CatchUp(p))
	v, err := n.store.Get(k)
	noErr(t, err)
	cred := &kitpb.Credential{}
	noErr(t, proto.Unmarshal(v, cred))
	if cred.RevokedAt == 0 {
		t.Fatalf("the credential is %v after its revocation and a use: revoked no more", cred)
	}
}
