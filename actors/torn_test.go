package actors_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// tornCommits is a node's Committer that can die in the middle of a
// commit: once torn, it applies the parts of the commit's partitions that
// keep says to keep and none of the others, and then commits nothing
// more. It is what a kill -9 can leave of a batch that spans partitions
// on a cluster, where replica.Log proposes each partition's part to its
// own group: parts led elsewhere before those led here, but in any other
// respect in no order at all.
type tornCommits struct {
	inner actors.Committer
	store *persistence.Store

	mu   sync.Mutex
	keep func(partition.ID) bool // armed: what the next commit keeps
	torn chan struct{}           // closed once a commit was torn
	dead bool
}

// tearCommits puts a tornCommits in front of n's commits. It must run
// before n's actors commit anything.
func tearCommits(n *testNode) *tornCommits {
	c := &tornCommits{inner: n.env.Commits, store: n.store, torn: make(chan struct{})}
	if c.inner == nil {
		c.inner = storeCommits{n.store}
	}
	n.env.Commits = c
	return c
}

// tearNext has the next commit keep the parts of the partitions keep
// answers true for; torn is closed once it has.
func (c *tornCommits) tearNext(keep func(partition.ID) bool) (torn <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep = keep
	return c.torn
}

var errNodeKilled = errors.New("the node was killed in the middle of a commit")

func (c *tornCommits) Commit(repr []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
		return errNodeKilled
	case c.keep == nil:
		return c.inner.Commit(repr)
	}
	kept := c.store.NewBatch()
	defer kept.Close()
	err := persistence.Ops(repr, func(op persistence.Op) error {
		if p, ok := partition.OfKey(op.Key); !ok || c.keep(p) {
			kept.Add(op)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !kept.Empty() {
		if err := c.inner.Commit(kept.Repr()); err != nil {
			return err
		}
	}
	c.dead, c.keep = true, nil
	close(c.torn)
	return errNodeKilled
}

// A node killed between the parts of a delivery actor's commit loses no
// event: whatever part of it the survivors hold, every event is still
// queued, or delivered, or dead, once the installation's partition is
// led again (docs/deliveries.md, "A write that spans partitions").
func TestAKillBetweenACommitsPartitionsLosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes per row")
	}
	type state struct {
		n    *testNode
		f    *eventsFixture
		conv string // a conversation outside the installation's partition
	}
	post := func(t *testing.T, s *state, text string) {
		s.n.post(t, s.f.user, s.conv, postReq{text: text})
	}
	takeOne := func(t *testing.T, s *state, text string) *kitpb.Event {
		t.Helper()
		evs := take(t, s.n, s.f.inst.Id).Events
		if len(evs) != 1 || evs[0].Message.GetText() != text {
			t.Fatalf("took %q, want %s", eventTexts(evs), text)
		}
		return evs[0]
	}
	failed := func(t *testing.T, s *state, text string) *kitpb.Event {
		t.Helper()
		ev := takeOne(t, s, text)
		record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		queued(t, s.n, s.f.inst.Id) // flushes the outcome
		return ev
	}
	for _, tc := range []struct {
		name string
		// torn does what ends in the torn commit, armed by tear.
		torn func(t *testing.T, s *state, tear func())
		want []string // queued after the restart, in order
		// then, when set, runs after the restart, before the rest goes.
		then func(t *testing.T, s *state)
	}{
		{"an attempt's failure", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		}, []string{"a1"}, nil},
		{"a delivery after a failure", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			failed(t, s, "a1")
			s.n.clk.Advance(actors.FirstRetryAfter * 2)
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, true)
		}, []string{"a1"}, nil},
		{"a dead letter", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			failed(t, s, "a1")
			s.n.clk.Advance(actors.DeadAfter)
			ev := takeOne(t, s, "a1")
			tear()
			record(t, s.n, s.f.inst.Id, ev.Sequence, false)
		}, []string{"a1"}, nil},
		{"a redelivery of an event waiting behind another", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			post(t, s, "a2")
			takeOne(t, s, "a1")
			var a2 *kitpb.Event
			for _, ev := range queued(t, s.n, s.f.inst.Id) {
				if ev.Message.GetText() == "a2" {
					a2 = ev
				}
			}
			tear()
			_, _ = try[*kitpb.RedeliverReply](s.n, actors.KindDelivery, s.f.inst.Id, &kitpb.Redeliver{EventId: a2.Id})
		}, []string{"a1", "a2"}, nil},
		{"a redelivery of a delivered event", func(t *testing.T, s *state, tear func()) {
			post(t, s, "a1")
			ev := takeOne(t, s, "a1")
			record(t, s.n, s.f.inst.Id, ev.Sequence, true)
			queued(t, s.n, s.f.inst.Id)
			tear()
			_, _ = try[*kitpb.RedeliverReply](s.n, actors.KindDelivery, s.f.inst.Id, &kitpb.Redeliver{EventId: ev.Id})
		}, nil, func(t *testing.T, s *state) {
			// Not answered, so not done; but done when asked again.
			ev := listDeliveries(t, s.n, s.f.inst.Id, 0, 10).Deliveries[0].Event
			redeliver(t, s.n, s.f.inst.Id, &kitpb.Redeliver{EventId: ev.Id})
			if q := queued(t, s.n, s.f.inst.Id); !slices.Equal(eventTexts(q), []string{"a1"}) {
				t.Fatalf("queued %q after the redelivery, want a1", eventTexts(q))
			}
		}},
		{"a pruning of delivered records", func(t *testing.T, s *state, tear func()) {
			const total = actors.KeepDelivered + 101 // the last delivery prunes
			for i := range total {
				post(t, s, fmt.Sprint(i))
				ev := takeOne(t, s, fmt.Sprint(i))
				if i == total-1 {
					tear()
				}
				record(t, s.n, s.f.inst.Id, ev.Sequence, true)
			}
		}, []string{fmt.Sprint(actors.KeepDelivered + 100)}, func(t *testing.T, s *state) {
			// The pruned records whose entries went are gone too: every page
			// of the list reads.
			succeeded := 0
			for before := uint64(0); ; {
				p := listDeliveries(t, s.n, s.f.inst.Id, before, 100)
				for _, d := range p.Deliveries {
					if d.State == actors.DeliverySucceeded {
						succeeded++
					}
					before = d.Event.Sequence
				}
				if !p.More {
					break
				}
			}
			if succeeded != actors.KeepDelivered-1 {
				t.Fatalf("listed %d deliveries that succeeded, want the %d that the pruning kept", succeeded, actors.KeepDelivered-1)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			n, err := startNode(fs, nil)
			noErr(t, err)
			commits := tearCommits(n)
			f, _ := deliveryFixture(t, n, 1)
			s := &state{n: n, f: f, conv: f.conv}
			home := partition.Of(f.inst.Id)
			for partition.Of(s.conv) == home {
				s.conv = n.channel(t, f.ws.id, f.ws.users...)
				n.addChannel(t, f.inst.Id, s.conv)
			}
			var torn <-chan struct{}
			tc.torn(t, s, func() { torn = commits.tearNext(func(p partition.ID) bool { return p != home }) })
			waitFor(t, "the torn commit", torn)
			noErr(t, n.stop())

			n, err = startNode(fs, n.clk)
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			s.n = n
			q := queued(t, n, f.inst.Id)
			if got := eventTexts(q); !slices.Equal(got, tc.want) {
				t.Fatalf("queued %q after the restart, want %q", got, tc.want)
			}
			if tc.then != nil {
				tc.then(t, s)
				q = queued(t, n, f.inst.Id)
			}
			// What is queued goes, each once.
			n.clk.Advance(actors.MaxRetryWait * 2)
			sent := map[string]int{}
			for range len(q) + 1 {
				for _, ev := range take(t, n, f.inst.Id).Events {
					sent[ev.Message.GetText()]++
					record(t, n, f.inst.Id, ev.Sequence, true)
				}
			}
			for _, ev := range q {
				if text := ev.Message.GetText(); sent[text] != 1 {
					t.Fatalf("after the restart sent %v, want each of %q once", sent, eventTexts(q))
				}
			}
			if q := queued(t, n, f.inst.Id); len(q) != 0 {
				t.Fatalf("%q still queued after every event was delivered", eventTexts(q))
			}
		})
	}
}

// A write that spans partitions and that a kill parts, whichever of its
// parts land, is left to its retry: the retry finds it undone (or done)
// and leaves it whole (docs/cluster.md, "Global indexes"). Each row is
// torn both ways: with the owner's part alone landing, and with every
// part but the owner's.
func TestAKillBetweenAWritesPartsLeavesItToItsRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes per row")
	}
	// Each row's setup answers the actor that owns the write, the write
	// (which ends in the torn commit), and its retry with what must hold
	// after it, on the node started again.
	type write struct {
		owner string
		do    func(n *testNode)
		retry func(t *testing.T, n *testNode)
		// keep, when set, is the one way the row is torn: the parts that
		// land.
		keep func(partition.ID) bool
	}
	authFails := func(t *testing.T, n *testNode, what, token string) {
		t.Helper()
		if _, err := n.auth.Authenticate([]byte(token)); err == nil {
			t.Fatalf("the %s still works", what)
		}
	}
	authWorks := func(t *testing.T, n *testNode, what, token string) {
		t.Helper()
		if _, err := n.auth.Authenticate([]byte(token)); err != nil {
			t.Fatalf("the %s does not work: %v", what, err)
		}
	}
	bothWays := []struct {
		name string
		keep func(part, owner partition.ID) bool
	}{
		{"the owner's part alone lands", func(part, owner partition.ID) bool { return part == owner }},
		{"every part but the owner's lands", func(part, owner partition.ID) bool { return part != owner }},
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, n *testNode) write
		// only, when set, names the one way the row is torn, which its
		// write's keep says.
		only string
	}{
		{"ending a session", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 1)
			secret := ids.NewSecret(ids.SessionCookie)
			h := ids.Hash(secret)
			sid := ask[*kitpb.SessionReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateSession{UserId: w.users[0], SessionId: ids.New(), SecretHash: h[:]}).Session.Id
			end := &kitpb.EndSession{SessionId: sid}
			return write{w.id, func(n *testNode) { try[*kitpb.Ok](n, actors.KindWorkspace, w.id, end) }, func(t *testing.T, n *testNode) {
				ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, end)
				if _, err := n.auth.Session([]byte(secret)); err == nil {
					t.Fatal("the session's cookie still works after it ended")
				}
			}, nil}
		}, ""},
		{"revoking a member's authorization", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			grant := ask[*kitpb.UserGrantsReply](t, n, actors.KindInstallation, g.inst.Id, &kitpb.ListUserGrants{UserId: g.member}).Grants[0]
			revoke := &kitpb.RevokeUserGrant{UserId: g.member, GrantId: grant.GrantId}
			return write{g.inst.Id, func(n *testNode) { try[*kitpb.Ok](n, actors.KindInstallation, g.inst.Id, revoke) }, func(t *testing.T, n *testNode) {
				try[*kitpb.Ok](n, actors.KindInstallation, g.inst.Id, revoke) // done already, or done now
				authFails(t, n, "revoked user token", tk.access)
				if _, err := n.refresh(g, tk.refresh); err == nil {
					t.Fatal("the refresh token of a revoked authorization still works")
				}
			}, nil}
		}, ""},
		{"rotating a bot token", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			old := n.botToken(t, g.inst.Id)
			rotate := func(n *testNode) (string, error) {
				next := ids.NewSecret(ids.BotToken)
				o, h := ids.Hash(old), ids.Hash(next)
				_, err := try[*kitpb.RotateBotTokenReply](n, actors.KindInstallation, g.inst.Id, &kitpb.RotateBotToken{OldHash: o[:], NewHash: h[:]})
				return next, err
			}
			return write{g.inst.Id, func(n *testNode) { rotate(n) }, func(t *testing.T, n *testNode) {
				next, err := rotate(n)
				noErr(t, err)
				authWorks(t, n, "new bot token", next)
				authWorks(t, n, "rotated bot token, within its overlap,", old)
			}, nil}
		}, ""},
		{"refreshing a user token", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			return write{g.inst.Id, func(n *testNode) { n.refresh(g, tk.refresh) }, func(t *testing.T, n *testNode) {
				next, err := n.refresh(g, tk.refresh)
				noErr(t, err)
				authWorks(t, n, "refreshed user token", next.access)
			}, nil}
		}, ""},
		{"exchanging an authorization code", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			code, err := n.code(g, actors.CallerUser, g.member, g.session, challengeOf(testVerifier))
			noErr(t, err)
			return write{g.inst.Id, func(n *testNode) { n.exchange(g, code, testVerifier) }, func(t *testing.T, n *testNode) {
				tk, _, err := n.exchange(g, code, testVerifier)
				noErr(t, err)
				authWorks(t, n, "user token of the code", tk.access)
			}, nil}
		}, ""},
		{"creating a member who signs in", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 0)
			email := "torn-" + ids.New()[24:] + "@example.com"
			create := func(n *testNode, id string) error {
				_, err := try[*kitpb.UserReply](n, actors.KindWorkspace, w.id, &kitpb.CreateUser{
					UserId: id, DisplayName: "m", Email: email, Role: "member", PasswordHash: []byte("bcrypt")})
				return err
			}
			return write{w.id, func(n *testNode) { create(n, ids.New()) }, func(t *testing.T, n *testNode) {
				id := ids.New() // a retry through the API is a new request
				noErr(t, create(n, id))
				members, err := actors.SignInMembers(n.env, email, 10)
				noErr(t, err)
				if !slices.Contains(members, actors.SignInMember{WorkspaceID: w.id, UserID: id}) {
					t.Fatalf("sign-in by email finds %v, not the member created", members)
				}
			}, nil}
		}, ""},
		{"adding a member to a channel", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 2)
			c := n.channel(t, w.id, w.users[0])
			add := &kitpb.AddMember{UserId: w.users[1], UserWorkspaceId: w.id}
			return write{c, func(n *testNode) { try[*kitpb.Ok](n, actors.KindConversation, c, add) }, func(t *testing.T, n *testNode) {
				ask[*kitpb.Ok](t, n, actors.KindConversation, c, add)
				convs, _, err := actors.MemberConversations(n.env, w.users[1], "", 10)
				noErr(t, err)
				if !slices.Contains(convs, c) {
					t.Fatalf("the member's conversations are %v, without the channel", convs)
				}
			}, nil}
		}, ""},
		{"removing a member from a channel", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 2)
			c := n.channel(t, w.id, w.users...)
			remove := &kitpb.RemoveMember{UserId: w.users[1]}
			return write{c, func(n *testNode) { try[*kitpb.Ok](n, actors.KindConversation, c, remove) }, func(t *testing.T, n *testNode) {
				try[*kitpb.Ok](n, actors.KindConversation, c, remove) // done already, or done now
				convs, _, err := actors.MemberConversations(n.env, w.users[1], "", 10)
				noErr(t, err)
				if slices.Contains(convs, c) {
					t.Fatalf("the member's conversations are %v, with the channel left", convs)
				}
			}, nil}
		}, ""},
		{"revoking an authorization whose refresh token was replayed", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			tk := n.userTokens(t, g)
			next, err := n.refresh(g, tk.refresh)
			noErr(t, err)
			// Of the revocation, only the replayed token's part lands.
			h := ids.Hash(tk.refresh)
			replayed, _ := partition.OfKey(actors.CredentialKey(h[:]))
			return write{g.inst.Id, func(n *testNode) { n.refresh(g, tk.refresh) }, func(t *testing.T, n *testNode) {
				if _, err := n.refresh(g, tk.refresh); err == nil {
					t.Fatal("a replayed refresh token was refreshed")
				}
				authFails(t, n, "user token of a replayed authorization", next.access)
			}, func(p partition.ID) bool { return p == replayed }}
		}, "the replayed token's part alone lands"},
		{"sweeping an expired session in a later sign-in", func(t *testing.T, n *testNode) write {
			// The ended session's cookie credential and locator lie in
			// partitions of their own, not the workspace's.
			w := n.workspace(t, 1)
			var h [32]byte
			var sid string
			for {
				h, sid = ids.Hash(ids.NewSecret(ids.SessionCookie)), ids.New()
				cp, _ := partition.OfKey(actors.CredentialKey(h[:]))
				lp, _ := partition.OfKey(actors.LocatorKey(sid))
				if cp != partition.Of(w.id) && lp != partition.Of(w.id) {
					break
				}
			}
			ask[*kitpb.SessionReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateSession{UserId: w.users[0], SessionId: sid, SecretHash: h[:]})
			n.clk.Advance(actors.SessionLifetime)
			signIn := func(n *testNode) error {
				next := ids.Hash(ids.NewSecret(ids.SessionCookie))
				_, err := try[*kitpb.SessionReply](n, actors.KindWorkspace, w.id, &kitpb.CreateSession{UserId: w.users[0], SessionId: ids.New(), SecretHash: next[:]})
				return err
			}
			return write{w.id, func(n *testNode) { signIn(n) }, func(t *testing.T, n *testNode) {
				noErr(t, signIn(n))
				for what, k := range map[string][]byte{"cookie's credential": actors.CredentialKey(h[:]), "locator": actors.LocatorKey(sid)} {
					if found, err := n.store.Has(k); err != nil || found {
						t.Fatalf("the expired session's %s is kept for ever (found %v, %v)", what, found, err)
					}
				}
			}, nil}
		}, ""},
		{"sweeping an expired sign-in choice in a later sign-in", func(t *testing.T, n *testNode) write {
			// The choice's credential lies in a partition of its own, not
			// the workspace's, which holds the index entry that finds it.
			w := n.workspace(t, 1)
			var h [32]byte
			for {
				h = ids.Hash(ids.NewSecret(ids.SignInChoice))
				if p, _ := partition.OfKey(actors.CredentialKey(h[:])); p != partition.Of(w.id) {
					break
				}
			}
			choose := func(n *testNode, h [32]byte) error {
				_, err := try[*kitpb.Ok](n, actors.KindWorkspace, w.id, &kitpb.CreateSignInChoice{SecretHash: h[:], Choices: []*kitpb.SignInChoice{{WorkspaceId: w.id, UserId: w.users[0]}}})
				return err
			}
			noErr(t, choose(n, h))
			n.clk.Advance(actors.WriteSweepEvery)
			return write{w.id, func(n *testNode) { choose(n, ids.Hash(ids.NewSecret(ids.SignInChoice))) }, func(t *testing.T, n *testNode) {
				noErr(t, choose(n, ids.Hash(ids.NewSecret(ids.SignInChoice))))
				if found, err := n.store.Has(actors.CredentialKey(h[:])); err != nil || found {
					t.Fatalf("the expired choice's credential is kept for ever (found %v, %v)", found, err)
				}
				creds, index := signInChoiceRecords(t, n, w.id)
				if creds > index {
					t.Fatalf("%d choice credentials, %d index entries: a credential nothing finds", creds, index)
				}
			}, nil}
		}, ""},
		{"sweeping a dead user token in a later refresh", func(t *testing.T, n *testNode) write {
			g := n.grantEnv(t)
			var tk tokens
			for {
				tk = n.userTokens(t, g)
				h := ids.Hash(tk.access)
				if p, _ := partition.OfKey(actors.CredentialKey(h[:])); p != partition.Of(g.inst.Id) {
					break
				}
			}
			n.clk.Advance(actors.UserTokenLifetime)
			dead := ids.Hash(tk.access)
			return write{g.inst.Id, func(n *testNode) { n.refresh(g, tk.refresh) }, func(t *testing.T, n *testNode) {
				_, err := n.refresh(g, tk.refresh)
				noErr(t, err)
				if found, err := n.store.Has(actors.CredentialKey(dead[:])); err != nil || found {
					t.Fatalf("the dead user token's credential is kept for ever (found %v, %v)", found, err)
				}
			}, nil}
		}, ""},
		{"sweeping a rotated bot token in a later issue", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 0)
			b := n.bot(t, w.id, chatScopes)
			var old string
			for {
				old = n.botToken(t, b.inst.Id)
				h := ids.Hash(old)
				if p, _ := partition.OfKey(actors.CredentialKey(h[:])); p != partition.Of(b.inst.Id) {
					break
				}
			}
			n.rotateBot(t, b.inst.Id, old)
			n.clk.Advance(actors.BotRotationOverlap)
			dead := ids.Hash(old)
			issue := func(n *testNode) error {
				h := ids.Hash(ids.NewSecret(ids.BotToken))
				_, err := try[*kitpb.CredentialReply](n, actors.KindInstallation, b.inst.Id, &kitpb.CreateBotToken{SecretHash: h[:]})
				return err
			}
			return write{b.inst.Id, func(n *testNode) { issue(n) }, func(t *testing.T, n *testNode) {
				noErr(t, issue(n))
				if found, err := n.store.Has(actors.CredentialKey(dead[:])); err != nil || found {
					t.Fatalf("the rotated bot token's credential is kept for ever (found %v, %v)", found, err)
				}
			}, nil}
		}, ""},
		{"uploading a Kit's first version", func(t *testing.T, n *testNode) write {
			w := n.workspace(t, 0)
			slug := newSlug()
			kit := ask[*kitpb.SlugReply](t, n, actors.KindSlug, slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: w.id}).KitId
			upload := func(n *testNode) error {
				_, err := try[*kitpb.VersionReply](n, actors.KindKit, kit, &kitpb.UploadVersion{
					KitId: kit, WorkspaceId: w.id, VersionId: ids.New(), Manifest: manifestJSON(slug, "1.0.0"), Publish: false})
				return err
			}
			return write{kit, func(n *testNode) { upload(n) }, func(t *testing.T, n *testNode) {
				upload(n) // done already, or done now
				kits, err := actors.WorkspaceKits(n.env, w.id)
				noErr(t, err)
				if !slices.Contains(kits, kit) {
					t.Fatalf("the workspace's Kits are %v, without the Kit uploaded", kits)
				}
			}, nil}
		}, ""},
	} {
		ways := bothWays
		if tc.only != "" {
			ways = slices.Clone(bothWays[:1])
			ways[0].name = tc.only
		}
		for _, tear := range ways {
			t.Run(tc.name+"/"+tear.name, func(t *testing.T) {
				fs := vfs.NewMem()
				n, err := startNode(fs, nil)
				noErr(t, err)
				commits := tearCommits(n)
				w := tc.setup(t, n)
				owner := partition.Of(w.owner)
				keep := func(p partition.ID) bool { return tear.keep(p, owner) }
				if tc.only != "" {
					keep = w.keep
				}
				torn := commits.tearNext(keep)
				w.do(n)
				waitFor(t, "the torn commit", torn)
				noErr(t, n.stop())

				n, err = startNode(fs, n.clk)
				noErr(t, err)
				t.Cleanup(func() { n.stop() })
				w.retry(t, n)
			})
		}
	}
}
