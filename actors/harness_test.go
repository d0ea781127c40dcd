package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/history"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
	"github.com/kitd/kitd/replica"
)

// The harness runs the real actors on a real single-node cluster over an
// in-memory Pebble store, with the test clock and the spec rate limits.
// Starting a node takes about a second, so the tests of this binary share
// one node (started in TestMain) and keep apart by using fresh ids; only
// the restart test starts nodes of its own.

// testNode is one running node: cluster, store, clock and authenticator.
type testNode struct {
	env   *actors.Env
	clk   *clock.Test
	auth  *actors.Authenticator
	node  *cluster.Host
	store *persistence.Store
	rep   *replica.Replica // nil unless KITD_TEST_REPLICATED=1
}

// replicated runs every actor test with the actors' batches committed
// through one-voter raft groups (replica.Log), as a node of a cluster
// commits them: KITD_TEST_REPLICATED=1 (make test runs both ways).
var replicated = os.Getenv("KITD_TEST_REPLICATED") == "1"

// shared is the node of this test binary.
var shared *testNode

// startNode opens the store in fs and starts a node over it. A restart
// passes the clock of the node it replaces, so time keeps going forward.
func startNode(fs vfs.FS, clk *clock.Test) (*testNode, error) { return startNodeAt(fs, "db", clk) }

// crashableNode starts a node on a store whose unsynced writes a crash
// (fs.CrashClone) loses, for tests of what an answer made durable. It
// skips under -short: such a test starts a second node on the clone.
func crashableNode(t *testing.T) (*testNode, *vfs.MemFS) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewCrashableMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	return n, fs
}

// startNodeAt is startNode with the store in dir of fs.
func startNodeAt(fs vfs.FS, dir string, clk *clock.Test) (*testNode, error) {
	store, err := persistence.Open(dir, persistence.Options{FS: fs})
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.NewTest()
	}
	// Every page of history goes through the conversations' windows, as
	// on a node with its default --cache-bytes.
	env := &actors.Env{Store: store, Clock: clk, Limits: limits.Spec(), History: history.NewBudget(history.Options{Bytes: 64 << 20})}
	// A failed sync leaves nothing to trust: stop the whole test binary.
	env.Fatal = func(err error) { panic(fmt.Sprintf("actors: storage failed: %v", err)) }
	auth := actors.NewAuthenticator(env)
	env.Invalidator = &actors.Caches{Auth: auth}
	cn, err := cluster.Start(cluster.Config{}, actors.Kinds(env)...)
	if err != nil {
		store.Close()
		return nil, err
	}
	env.Host = cn
	n := &testNode{env: env, clk: clk, auth: auth, node: cn, store: store}
	if replicated {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n.rep, err = replica.Start(ctx, replica.Config{Store: store, Hosts: cn, CurrentKey: actors.CurrentKey})
		if err != nil {
			cn.Stop()
			store.Close()
			return nil, err
		}
		env.Commits = n.rep.Log
	}
	return n, nil
}

// stop stops the node, then closes its store.
func (n *testNode) stop() error {
	n.node.Stop()
	if n.rep != nil {
		if err := n.rep.Close(); err != nil {
			n.store.Close()
			return err
		}
	}
	return n.store.Close()
}

// ownNode starts a node of the test's own on an in-memory filesystem,
// stopped when the test ends, for a test that moves the node's clock or
// timers or counts its processes. Skipped with -short.
func ownNode(t *testing.T) *testNode {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a node")
	}
	n, err := startNode(vfs.NewMem(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.stop() })
	return n
}

func TestMain(m *testing.M) {
	n, err := startNode(vfs.NewMem(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start node:", err)
		os.Exit(1)
	}
	shared = n
	code := m.Run()
	if err := n.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop node:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// ---- asking actors ----

// try asks an actor and returns its typed reply or error.
func try[R proto.Message](n *testNode, kind, identity string, msg proto.Message) (R, error) {
	return cluster.Call[R](n.node, kind, identity, msg)
}

// ask asks an actor and fails the test on error.
func ask[R proto.Message](t testing.TB, n *testNode, kind, identity string, msg proto.Message) R {
	t.Helper()
	r, err := cluster.Call[R](n.node, kind, identity, msg)
	if err != nil {
		t.Fatalf("%T to %s/%s: %v", msg, kind, identity, err)
	}
	return r
}

// wantCode checks that err is a domain error with code, and with path
// when one is given.
func wantCode(t testing.TB, err error, code kiterr.Code, path ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	var e *kiterr.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
	if len(path) > 0 && e.Path != path[0] {
		t.Fatalf("got path %q (%v), want %q", e.Path, err, path[0])
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- fixtures ----

type workspace struct {
	id    string
	users []string // members, in creation order
}

// workspace creates a workspace with the given number of members.
func (n *testNode) workspace(t testing.TB, members int) *workspace {
	t.Helper()
	w := &workspace{id: ids.New()}
	ask[*kitpb.WorkspaceReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateWorkspace{Name: "ws " + w.id[:8]})
	for range members {
		w.users = append(w.users, n.user(t, w.id))
	}
	return w
}

func (n *testNode) user(t testing.TB, wsID string) string {
	t.Helper()
	id := ids.New()
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, wsID, &kitpb.CreateUser{UserId: id, DisplayName: "user " + id[:8], Role: "member"})
	return id
}

// conversation creates a conversation of kind in the workspace.
func (n *testNode) conversation(t testing.TB, wsID, kind string, members ...string) string {
	t.Helper()
	return n.conversationWithID(t, wsID, ids.New(), kind, members...)
}

func (n *testNode) conversationWithID(t testing.TB, wsID, id, kind string, members ...string) string {
	t.Helper()
	vis := "private"
	req := &kitpb.CreateConversation{ConversationId: id, Kind: kind, Visibility: vis, MemberIds: members}
	if kind == "channel" {
		req.Visibility = "public"
		name := "ch-" + id[:8]
		req.Name = &name
	}
	ask[*kitpb.ConversationReply](t, n, actors.KindWorkspace, wsID, req)
	return id
}

func (n *testNode) channel(t testing.TB, wsID string, members ...string) string {
	t.Helper()
	return n.conversation(t, wsID, "channel", members...)
}

// manifestJSON is a minimal valid private manifest with bot scopes.
func manifestJSON(slug, version string, scopes ...string) string {
	if scopes == nil {
		scopes = []string{}
	}
	b, err := json.Marshal(map[string]any{
		"schemaVersion":    1,
		"slug":             slug,
		"version":          version,
		"displayName":      map[string]any{"en": "Kit " + slug},
		"description":      map[string]any{"en": "Test Kit " + slug},
		"developer":        map[string]any{"name": "Test Developer", "url": "https://example.com"},
		"privacyPolicyUrl": "https://example.com/privacy",
		"bot":              map[string]any{"displayName": map[string]any{"en": "Bot " + slug}, "scopes": scopes},
		"distribution":     "private",
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

var slugSeq atomic.Int64

// newSlug is a Kit slug no other test of this binary uses.
func newSlug() string { return fmt.Sprintf("t%d-%s", slugSeq.Add(1), ids.New()[24:32]) }

// upload registers a manifest version as the developer API does: claim the
// slug for the workspace, then upload to the Kit the slug names.
func (n *testNode) upload(wsID, man string, publish bool) (*kitpb.VersionReply, error) {
	var probe struct {
		Slug string `json:"slug"`
	}
	if err := json.Unmarshal([]byte(man), &probe); err != nil {
		return nil, err
	}
	slug, err := try[*kitpb.SlugReply](n, actors.KindSlug, probe.Slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: wsID})
	if err != nil {
		return nil, err
	}
	return try[*kitpb.VersionReply](n, actors.KindKit, slug.KitId, &kitpb.UploadVersion{
		KitId: slug.KitId, WorkspaceId: wsID, VersionId: ids.New(), Manifest: man, Publish: publish,
	})
}

func (n *testNode) mustUpload(t testing.TB, wsID, man string, publish bool) *kitpb.VersionReply {
	t.Helper()
	r, err := n.upload(wsID, man, publish)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return r
}

// install installs (or updates) a Kit in the workspace; version "" is the
// default version.
func (n *testNode) install(t testing.TB, wsID, kitID, version string) *kitpb.Installation {
	t.Helper()
	return ask[*kitpb.InstallationReply](t, n, actors.KindWorkspace, wsID, &kitpb.Install{KitId: kitID, Version: version}).Installation
}

func (n *testNode) addChannel(t testing.TB, instID, convID string) *kitpb.Installation {
	t.Helper()
	return ask[*kitpb.InstallationReply](t, n, actors.KindInstallation, instID, &kitpb.AddChannel{ConversationId: convID}).Installation
}

// botToken issues a bot token of the installation.
func (n *testNode) botToken(t testing.TB, instID string) string {
	t.Helper()
	secret := ids.NewSecret(ids.BotToken)
	h := ids.Hash(secret)
	ask[*kitpb.CredentialReply](t, n, actors.KindInstallation, instID, &kitpb.CreateBotToken{SecretHash: h[:]})
	return secret
}

// bot is an installed Kit with one bot token and its principal.
type bot struct {
	kitID  string
	inst   *kitpb.Installation
	token  string
	caller *kitpb.Caller
}

// bot registers a private Kit of the workspace with scopes, installs it,
// issues a bot token and adds the bot to channels.
func (n *testNode) bot(t testing.TB, wsID string, scopes []string, channels ...string) *bot {
	t.Helper()
	v := n.mustUpload(t, wsID, manifestJSON(newSlug(), "1.0.0", scopes...), false)
	b := &bot{kitID: v.Kit.Id}
	b.inst = n.install(t, wsID, b.kitID, "")
	for _, c := range channels {
		b.inst = n.addChannel(t, b.inst.Id, c)
	}
	b.token = n.botToken(t, b.inst.Id)
	p, err := n.auth.Authenticate([]byte(b.token))
	if err != nil {
		t.Fatalf("authenticate new bot token: %v", err)
	}
	b.caller = p.Caller
	return b
}

var chatScopes = []string{"conversations:read", "messages:read", "messages:write"}

func userCaller(wsID, userID string) *kitpb.Caller {
	return &kitpb.Caller{Kind: actors.CallerUser, WorkspaceId: wsID, UserId: userID}
}

// postReq is a post with its options.
type postReq struct {
	text, parent, key string
	blocks            string
}

// send posts as caller without any clock change.
func (n *testNode) send(c *kitpb.Caller, convID string, p postReq) (*kitpb.MessageReply, error) {
	if p.text == "" {
		p.text = "hello"
	}
	m := &kitpb.PostMessage{Caller: c, Text: p.text, ThreadParentId: p.parent, IdempotencyKey: p.key}
	if p.blocks != "" {
		m.Blocks = []byte(p.blocks)
	}
	return try[*kitpb.MessageReply](n, actors.KindConversation, convID, m)
}

// post posts as caller after letting a second pass, so that tests posting
// many messages stay inside the post_message bucket (1/second, burst 5).
func (n *testNode) post(t testing.TB, c *kitpb.Caller, convID string, p postReq) *kitpb.Message {
	t.Helper()
	n.clk.Advance(time.Second)
	r, err := n.send(c, convID, p)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	return r.Message
}

// list asks for a page, and reads its encoded messages back into
// Messages (their positions from their ids) for the tests to look at.
func (n *testNode) list(c *kitpb.Caller, convID, parent string, before uint64, limit int32) (*kitpb.MessagesReply, error) {
	r, err := try[*kitpb.MessagesReply](n, actors.KindConversation, convID, &kitpb.ListMessages{
		Caller: c, ThreadParentId: parent, BeforeSeq: before, Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	for _, e := range r.Encoded {
		m, err := decodeMessage(e)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, m)
	}
	return r, nil
}

// decodeMessage reads a message as the API answers it (docs/api.md "Resources").
func decodeMessage(b []byte) (*kitpb.Message, error) {
	var v struct {
		ID, ConversationID string
		Author             struct{ Kind, ID string }
		Text               *string
		Blocks             json.RawMessage
		ThreadParentID     *string
		CreatedAt          string
		EditedAt           *string
		DeletedAt          *string
		Reactions          []struct {
			Reaction string
			UserIDs  []string
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("encoded message %s: %w", b, err)
	}
	m := &kitpb.Message{Id: v.ID, ConversationId: v.ConversationID, AuthorKind: v.Author.Kind, AuthorId: v.Author.ID}
	_, m.Seq, _ = ids.ParseMessage(v.ID)
	if v.Text != nil {
		m.Text = *v.Text
	}
	if string(v.Blocks) != "null" {
		m.Blocks = v.Blocks
	}
	if v.ThreadParentID != nil {
		m.ThreadParentId = *v.ThreadParentID
	}
	var err error
	m.CreatedAt, err = nanosOf(&v.CreatedAt)
	if err == nil {
		m.EditedAt, err = nanosOf(v.EditedAt)
	}
	if err == nil {
		m.DeletedAt, err = nanosOf(v.DeletedAt)
	}
	for _, r := range v.Reactions {
		m.Reactions = append(m.Reactions, &kitpb.Reaction{Reaction: r.Reaction, UserIds: r.UserIDs})
	}
	return m, err
}

// nanosOf reads an API time (milliseconds) as nanoseconds; nil is 0.
func nanosOf(s *string) (int64, error) {
	if s == nil {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	return t.UnixNano(), err
}

func texts(ms []*kitpb.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

// storedRecords decodes every record stored under prefix, in key order.
func storedRecords[M proto.Message](t testing.TB, n *testNode, prefix []byte, fresh func() M) []M {
	t.Helper()
	var out []M
	noErr(t, n.store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
		m := fresh()
		noErr(t, proto.Unmarshal(v, m))
		out = append(out, m)
		return true
	}))
	return out
}
