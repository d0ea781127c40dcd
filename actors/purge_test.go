package actors_test

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// purgeFixture is one installation that accumulated some of every record
// an installation keeps: bot tokens (one of a bot code, one rotated), user
// authorizations (one refreshed), runs (finished, queued, one running),
// responseUrls and webhooks (one revoked).
type purgeFixture struct {
	g        *grantEnv
	conv     string
	bots     []string // bot tokens
	users    []tokens // user tokens and refresh tokens
	hooks    map[string]string
	running  string // the run still running at the uninstall
	response [32]byte
}

func purgeManifest(slug string) string {
	var m map[string]any
	bot := append([]string{actors.WebhookScope}, chatScopes...)
	if err := json.Unmarshal([]byte(oauthManifest(slug, "1.0.0", bot, []string{"messages:read"})), &m); err != nil {
		panic(err)
	}
	var tools map[string]any
	if err := json.Unmarshal([]byte(toolManifest(slug, "1.0.0")), &tools); err != nil {
		panic(err)
	}
	m["tools"] = tools["tools"]
	m["endpoints"] = map[string]any{"tools": "https://tools.example.com/call", "commands": commandsURL}
	m["interactivity"] = map[string]any{"url": interactURL}
	m["commands"] = []any{map[string]any{"name": "/deploy", "description": map[string]any{"en": "Deploys"}}}
	m["incomingWebhooks"] = map[string]any{"maxPerInstallation": 20}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// purgeFixture makes the installation with each of its records k times.
func (n *testNode) purgeFixture(t *testing.T, k int) *purgeFixture {
	t.Helper()
	g := &grantEnv{ws: ids.New(), slug: newSlug()}
	ask[*kitpb.WorkspaceReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateWorkspace{Name: "purge"})
	g.member, g.admin = ids.New(), ids.New()
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateUser{UserId: g.member, DisplayName: "m", Role: "member"})
	admin := ask[*kitpb.UserReply](t, n, actors.KindWorkspace, g.ws, &kitpb.CreateUser{UserId: g.admin, DisplayName: "a", Role: "admin"}).User
	g.kitID = n.mustUpload(t, g.ws, purgeManifest(g.slug), false).Kit.Id
	g.inst = n.install(t, g.ws, g.kitID, "")
	g.session, g.adminSes = n.session(t, g.ws, g.member), n.session(t, g.ws, g.admin)
	f := &purgeFixture{g: g, hooks: map[string]string{}}
	f.conv = n.channel(t, g.ws, g.admin, g.member)
	n.addChannel(t, g.inst.Id, f.conv)
	inst := g.inst.Id

	for range k {
		f.bots = append(f.bots, n.botToken(t, inst))
		f.users = append(f.users, n.userTokens(t, g))
	}
	f.bots = append(f.bots, n.rotateBot(t, inst, f.bots[0]))
	code, err := n.code(g, actors.CallerBot, g.admin, g.adminSes, "")
	noErr(t, err)
	tk, _, err := n.exchange(g, code, "")
	noErr(t, err)
	f.bots = append(f.bots, tk.bot)
	next, err := n.refresh(g, f.users[0].refresh)
	noErr(t, err)
	f.users = append(f.users, next)

	invoke := &kitpb.InvokeTool{WorkspaceId: g.ws, UserId: g.member, ConversationId: f.conv, Tool: "lookup"}
	var runs []string
	for range k + 2 {
		runs = append(runs, ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, inst, invoke).Run.Id)
	}
	for _, id := range runs[:2] {
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.StartRun{RunId: id})
	}
	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: runs[0], Succeeded: true, Result: []byte(`{"data":"of the workspace"}`)})
	f.running = runs[1]

	for range k {
		grant := ask[*kitpb.MemberActionGrant](t, n, actors.KindInstallation, inst, &kitpb.BeginMemberAction{
			Kind: actors.ActionCommand, WorkspaceId: g.ws, UserId: g.member, ConversationId: f.conv, Command: "/deploy"})
		f.response = ids.Hash(grant.ResponseToken)
	}

	for range k {
		id, secret := ids.New(), ids.NewSecret("")
		ask[*kitpb.WebhookReply](t, n, actors.KindInstallation, inst, &kitpb.CreateWebhook{
			WebhookId: id, ConversationId: f.conv, Creator: admin, SecretHash: actors.HookSecretHash(secret)})
		f.hooks[id] = secret
	}
	for id := range f.hooks {
		ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.RevokeWebhook{WebhookId: id})
		break
	}
	return f
}

// leftOf is what is left of the installation's records: every key under
// its own range, its credentials (by kind), its webhooks' records and
// locators, and its purge marker.
func (f *purgeFixture) leftOf(t *testing.T, n *testNode) []string {
	t.Helper()
	inst := f.g.inst.Id
	var left []string
	prefix := actors.InstallationRecordsPrefix(inst)
	noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		left = append(left, actors.KeyKind(k))
		return true
	}))
	noErr(t, n.store.Scan([]byte{}, []byte{0xff, 0xff, 0xff}, false, func(k, v []byte) bool {
		if actors.KeyKind(k) == "credentialKey" {
			c := &kitpb.Credential{}
			noErr(t, proto.Unmarshal(v, c))
			if c.InstallationId == inst {
				left = append(left, "credential "+c.Kind)
			}
		}
		return true
	}))
	for id := range f.hooks {
		for what, k := range map[string][]byte{"webhook": actors.WebhookKey(id), "webhook locator": actors.LocatorKey(id)} {
			if found, err := n.store.Has(k); err != nil || found {
				left = append(left, what)
			}
		}
	}
	if found, err := n.store.Has(actors.PurgeKey(inst)); err != nil || found {
		left = append(left, "purge marker")
	}
	return left
}

// answersOfUninstalled checks what the uninstalled installation answers,
// the same before, during and after its purge: its tokens 401, its
// webhooks, responseUrls and runs 404, the operator's revocation of its
// tokens 404.
func (f *purgeFixture) answersOfUninstalled(t *testing.T, n *testNode) {
	t.Helper()
	inst := f.g.inst.Id
	var all []string
	all = append(all, f.bots...)
	for _, u := range f.users {
		all = append(all, u.access, u.refresh)
	}
	for _, tok := range all {
		_, err := n.auth.Authenticate([]byte(tok))
		wantCode(t, err, kiterr.InvalidToken)
		wantCode(t, n.auth.Revoke(tok), kiterr.NotFound)
	}
	for id, secret := range f.hooks {
		_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, id, &kitpb.HookPost{
			InstallationId: inst, SecretHash: actors.HookSecretHash(secret), Text: "after"})
		wantCode(t, err, kiterr.NotFound)
	}
	_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, inst, &kitpb.UseResponseURL{TokenHash: f.response[:], Text: "after"})
	wantCode(t, err, kiterr.NotFound)
	_, err = try[*kitpb.RunReply](n, actors.KindInstallation, inst, &kitpb.GetRun{RunId: f.running, UserId: f.g.member})
	wantCode(t, err, kiterr.NotFound)
	got := ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, inst, &kitpb.GetInstallation{}).Installation
	if !got.Uninstalled {
		t.Fatalf("installation %v, not uninstalled", got)
	}
}

// boundedCommits records the most writes one commit made.
type boundedCommits struct {
	inner actors.Committer
	mu    sync.Mutex
	most  int
}

func (c *boundedCommits) Commit(repr []byte) error {
	ops := 0
	if err := persistence.Ops(repr, func(persistence.Op) error { ops++; return nil }); err != nil {
		return err
	}
	c.mu.Lock()
	c.most = max(c.most, ops)
	c.mu.Unlock()
	return c.inner.Commit(repr)
}

func (c *boundedCommits) reset() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	most := c.most
	c.most = 0
	return most
}

// TestAnUninstalledInstallationIsPurged: once uninstalled, an installation
// deletes, after the answer and in batches of writeSweepMax keys, every
// record it accumulated, which nothing reads again: its credentials and
// their index entries, its UserGrants, runs, responseUrls and webhooks.
// A run still running is kept until its outcome is in (the developer log
// shows it). What it answers stays as it was.
func TestAnUninstalledInstallationIsPurged(t *testing.T) {
	n := ownNode(t)
	commits := &boundedCommits{inner: n.env.Commits}
	if commits.inner == nil {
		commits.inner = storeCommits{n.store}
	}
	n.env.Commits = commits
	const bound = 3
	actors.SetWriteSweepMax(n.env, bound)
	f := n.purgeFixture(t, 4)
	inst := f.g.inst.Id
	if len(f.leftOf(t, n)) < 40 {
		t.Fatalf("the fixture holds only %v", f.leftOf(t, n))
	}

	commits.reset()
	ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.Uninstall{})
	f.answersOfUninstalled(t, n)
	// The running run and its open entry stay, and the marker with them.
	want := fmt.Sprint([]string{"runKey", "openRunKey", "purge marker"})
	eventually.True(t, "the purge up to the running run", func() bool { return fmt.Sprint(f.leftOf(t, n)) == want })
	f.answersOfUninstalled(t, n)

	ask[*kitpb.RunReply](t, n, actors.KindInstallation, inst, &kitpb.FinishRun{RunId: f.running, Succeeded: true, Result: []byte(`1`)})
	eventually.True(t, "the purge of the rest", func() bool { return len(f.leftOf(t, n)) == 0 })
	f.answersOfUninstalled(t, n)
	entries, _, err := actors.ReadDevLog(n.env, f.g.kitID, "", 10, func(e *kitpb.DevLogEntry) bool { return e.SubjectId == f.running })
	noErr(t, err)
	if len(entries) != 1 || entries[0].Status != actors.RunSucceeded {
		t.Fatalf("the developer log of the run finished after the uninstall: %v", entries)
	}
	// A batch holds its keys' deletions and what they find elsewhere,
	// two a key at most, and the marker.
	if most := commits.reset(); most > 2*bound+1 {
		t.Fatalf("a commit after the uninstall wrote %d keys; a purge batch is bounded by %d", most, 2*bound+1)
	}
}

// tearWhen tears the first commit in front of torn that when says
// holds, keeping the parts that keep says; armed by arm.
type tearWhen struct {
	torn *tornCommits
	when func(persistence.Op) bool
	keep func(p uint16) bool

	mu    sync.Mutex
	armed bool
	done  <-chan struct{}
}

func (c *tearWhen) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (c *tearWhen) Commit(repr []byte) error {
	c.mu.Lock()
	if c.armed {
		match := false
		_ = persistence.Ops(repr, func(op persistence.Op) error {
			match = match || c.when(op)
			return nil
		})
		if match {
			c.armed = false
			c.done = c.torn.tearNext(func(p partition.ID) bool { return c.keep(uint16(p)) })
		}
	}
	c.mu.Unlock()
	return c.torn.Commit(repr)
}

func (c *tearWhen) tornDone() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// TestAKillMidPurgeLeavesItToTheNextActivation: a kill between or within
// the steps of a purge batch leaves what was not deleted, and the
// installation's next activation deletes it, whether a request or the
// wake of the node that leads its partition again activates it.
func TestAKillMidPurgeLeavesItToTheNextActivation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes per row")
	}
	deletes := func(kinds ...string) func(persistence.Op) bool {
		return func(op persistence.Op) bool {
			return op.Kind == persistence.OpDelete && slices.Contains(kinds, actors.KeyKind(op.Key))
		}
	}
	for _, tc := range []struct {
		name string
		when func(persistence.Op) bool
		keep func(p uint16) bool
		// activate activates the installation on the node started again.
		activate func(t *testing.T, n *testNode, inst string)
	}{
		{"some credentials of a batch deleted, woken at the start", deletes("credentialKey"), func(p uint16) bool { return p%2 == 0 },
			func(t *testing.T, n *testNode, inst string) {
				noErr(t, actors.WakeDeliveriesIn(n.env, partition.Of(inst)))
			}},
		{"the credentials deleted, not their entries, activated by a request", deletes("grantCredentialKey", "botTokenKey"), func(uint16) bool { return false },
			func(t *testing.T, n *testNode, inst string) {
				ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, inst, &kitpb.GetInstallation{})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			n, err := startNode(fs, nil)
			noErr(t, err)
			tear := &tearWhen{torn: tearCommits(n), when: tc.when, keep: tc.keep}
			n.env.Commits = tear
			actors.SetWriteSweepMax(n.env, 3)
			f := n.purgeFixture(t, 4)
			inst := f.g.inst.Id
			tear.arm()
			ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.Uninstall{})
			eventually.True(t, "a torn purge batch", func() bool { return tear.tornDone() != nil })
			waitFor(t, "the torn commit", tear.tornDone())
			if len(f.leftOf(t, n)) == 0 {
				t.Fatal("nothing left after the kill")
			}
			noErr(t, n.stop())

			n, err = startNode(fs, n.clk)
			noErr(t, err)
			t.Cleanup(func() { n.stop() })
			tc.activate(t, n, inst)
			eventually.True(t, "the rest of the purge", func() bool { return len(f.leftOf(t, n)) == 0 })
			f.answersOfUninstalled(t, n)
			// The run a kill interrupted is in the developer log.
			entries, _, err := actors.ReadDevLog(n.env, f.g.kitID, "", 10, func(e *kitpb.DevLogEntry) bool { return e.SubjectId == f.running })
			noErr(t, err)
			if len(entries) != 1 || entries[0].ErrorCode != actors.RunInterrupted {
				t.Fatalf("the developer log of the run running at the kill: %v", entries)
			}
		})
	}
}

// A node wakes a partition's installations when it starts to lead it
// (WakeDeliveriesIn, on a goroutine of its own): one that no longer hosts
// it by the time the wake runs (it lost the lead again, as in a whole
// cluster's stop) reads nothing of it, its replica being no longer its to
// read; a whole cluster's stop had logged three reads of a partition the
// node held no replica of.
func TestAWakeOfAPartitionNoLongerHostedReadsNothing(t *testing.T) {
	n := ownNode(t)
	f, _ := deliveryFixture(t, n, 1)
	n.post(t, f.user, f.conv, postReq{text: "a"})
	p := partition.Of(f.inst.Id)
	var reads atomic.Int64
	n.env.Store.SetReadCheck(func(k []byte) {
		// The wake's reads only: the node's other goroutines may read p
		// meanwhile (a stopping activation's last write).
		if q, ok := partition.OfKey(k); ok && q == p && strings.Contains(string(debug.Stack()), "WakeDeliveriesIn") {
			reads.Add(1)
		}
	})
	t.Cleanup(func() { n.env.Store.SetReadCheck(nil) })
	n.node.Release(p)
	t.Cleanup(func() { n.node.Host(p) })
	noErr(t, actors.WakeDeliveriesIn(n.env, p))
	if got := reads.Load(); got != 0 {
		t.Fatalf("a wake of a partition no longer hosted read it %d times", got)
	}
}
