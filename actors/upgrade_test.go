package actors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

func openMemStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// A directory written before the email index (layout 0) gets an entry for
// every user who can sign in, and only for them; the layout is recorded, so
// the step runs once.
func TestUpgradeIndexesSignInEmails(t *testing.T) {
	store := openMemStore(t)
	users := []struct {
		rule    string
		user    *kitpb.User
		indexed bool
	}{
		{"an active user with an email and a password is indexed, by the lower-case email",
			&kitpb.User{Id: "u1", WorkspaceId: "w1", Email: "Ana@Example.com", PasswordHash: []byte("h"), Active: true}, true},
		{"the same email in another workspace is indexed there too",
			&kitpb.User{Id: "u2", WorkspaceId: "w2", Email: "ana@example.com", PasswordHash: []byte("h"), Active: true}, true},
		{"a deactivated user is not", &kitpb.User{Id: "u3", WorkspaceId: "w1", Email: "bo@example.com", PasswordHash: []byte("h")}, false},
		{"a user without a password is not", &kitpb.User{Id: "u4", WorkspaceId: "w1", Email: "cy@example.com", Active: true}, false},
		{"a user without an email is not", &kitpb.User{Id: "u5", WorkspaceId: "w1", PasswordHash: []byte("h"), Active: true}, false},
	}
	b := store.NewBatch()
	b.Set(unpartitioned(workspaceKey("w1")), marshal(&kitpb.Workspace{Id: "w1"}))
	for _, u := range users {
		b.Set(unpartitioned(userKey(u.user.WorkspaceId, u.user.Id)), marshal(u.user))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	if err := Upgrade(store, discardLog()); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		t.Run(u.rule, func(t *testing.T) {
			v, err := store.Get(emailUserKey(normalEmail(u.user.Email), u.user.Id))
			switch {
			case u.indexed && err != nil:
				t.Fatalf("no index entry: %v", err)
			case u.indexed && string(v) != u.user.WorkspaceId:
				t.Fatalf("entry names workspace %q, want %q", v, u.user.WorkspaceId)
			case !u.indexed && !errors.Is(err, persistence.ErrNotFound):
				t.Fatalf("indexed (%q, %v)", v, err)
			}
		})
	}
	t.Run("the directory records the newest layout", func(t *testing.T) {
		if at, err := layoutOf(store); err != nil || at != uint64(len(layoutSteps)) {
			t.Fatalf("layout %d (%v), want %d", at, err, len(layoutSteps))
		}
	})
	t.Run("a directory at the newest layout runs no step again", func(t *testing.T) {
		late := &kitpb.User{Id: "u6", WorkspaceId: "w1", Email: "di@example.com", PasswordHash: []byte("h"), Active: true}
		b := store.NewBatch()
		b.Set(userKey("w1", late.Id), mustMarshalUser(t, late))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := Upgrade(store, discardLog()); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get(emailUserKey(normalEmail(late.Email), late.Id)); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("the step ran again: %v", err)
		}
	})
	t.Run("a build that does not read taken records refuses the directory", func(t *testing.T) {
		// Layout 2 is the newest such a build knows.
		if at, err := layoutOf(store); err != nil || at <= 2 {
			t.Fatalf("layout %d (%v), want past 2", at, err)
		}
	})
	t.Run("a directory from a newer build is refused", func(t *testing.T) {
		b := store.NewBatch()
		b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, uint64(len(layoutSteps))+1))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := Upgrade(store, discardLog()); err == nil {
			t.Fatal("upgraded a newer layout")
		}
	})
}

func mustMarshalUser(t *testing.T, u *kitpb.User) []byte {
	t.Helper()
	v, err := proto.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A directory of layout 1 has every key moved under its partition, with its
// value, and nothing left where it was; a move cut short resumes.
func TestUpgradeMovesEveryKeyIntoItsPartition(t *testing.T) {
	store := openMemStore(t)
	hash := sha256sum("kbt_secret")
	keys := [][]byte{
		workspaceKey("w"), userKey("w", "u"), conversationKey("c"), messageKey("c", 1), messageKey("c", 2),
		fileChunkKey("c", "f", 0), memberConversationKey("u", "c"), messageTagKey(ids.MessageTag("c"), "c"),
		installationKey("i"), grantCredentialKey("i", "g", hash), webhookKey("h"), kitKey("k"),
		versionKey("k", manifest.Version{Major: 1}), installLinkIndexKey(hash), workspaceKitKey("w", "k"),
		slugKey("acme"), credentialKey(hash), emailUserKey("a@example.com", "u"), locatorKey("x"), devLogKey(partition.Of("k"), "k", "e"),
	}
	b := store.NewBatch()
	for i, k := range keys {
		if i == 0 {
			b.Set(k, []byte{byte(i)}) // moved already by an upgrade that stopped
			continue
		}
		b.Set(unpartitioned(k), []byte{byte(i)})
	}
	b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, 1))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	if err := Upgrade(store, discardLog()); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		kind := KeyKind(k)
		t.Run(kind, func(t *testing.T) {
			if v, err := store.Get(k); err != nil || !bytes.Equal(v, []byte{byte(i)}) {
				t.Errorf("moved %s = %v (%v), want its value", kind, v, err)
			}
			if i > 0 {
				if _, err := store.Get(unpartitioned(k)); !errors.Is(err, persistence.ErrNotFound) {
					t.Errorf("the %s is still where it was (%v)", kind, err)
				}
			}
		})
	}
	n := 0
	if err := store.Scan(nil, nil, false, func(k, _ []byte) bool {
		if KeyKind(k) == "" {
			t.Errorf("after the upgrade, %q is built by no constructor", k)
		}
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := len(keys) + 1; n != want { // and layoutKey
		t.Errorf("%d keys after the upgrade, want %d", n, want)
	}
}

func TestUpgradeRefusesAKeyItCannotPlace(t *testing.T) {
	store := openMemStore(t)
	b := store.NewBatch()
	b.Set([]byte("other/x"), []byte("v"))
	b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, 1))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := Upgrade(store, discardLog()); err == nil {
		t.Fatal("upgraded a directory with a key no constructor builds")
	}
	if at, _ := layoutOf(store); at != 1 {
		t.Fatalf("layout %d after a failed step, want 1", at)
	}
}

// A directory of layout 3 has every outbox entry rewritten under its key
// of layout 4, in whichever partition it lies, with its value, and nothing
// left where it was; a rewrite cut short resumes.
func TestUpgradeKeysOutboxEntriesByTheirIDsBytes(t *testing.T) {
	store := openMemStore(t)
	inst, other := ids.New(), ids.New()
	entries := []struct {
		inst, source string
		pos          uint64
	}{{inst, ids.New(), 1}, {inst, ids.New(), 2}, {other, ids.New(), 1 << 60}, {inst, convID, '/'}}
	b := store.NewBatch()
	for i, e := range entries {
		if i == 0 {
			b.Set(outboxKey(e.inst, e.source, e.pos), []byte{byte(i)}) // rewritten already by an upgrade that stopped
			continue
		}
		b.Set(textOutboxKey(e.inst, e.source, e.pos), []byte{byte(i)})
	}
	b.Set(messageKey(convID, 1), []byte("a message stays"))
	b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, 3))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	if err := Upgrade(store, discardLog()); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if v, err := store.Get(outboxKey(e.inst, e.source, e.pos)); err != nil || !bytes.Equal(v, []byte{byte(i)}) {
			t.Errorf("entry %d = %v (%v), want its value under its new key", i, v, err)
		}
		if _, err := store.Get(textOutboxKey(e.inst, e.source, e.pos)); !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("entry %d is still under its text key (%v)", i, err)
		}
	}
	if v, err := store.Get(messageKey(convID, 1)); err != nil || string(v) != "a message stays" {
		t.Errorf("the message = %q (%v)", v, err)
	}
	if err := store.Scan(nil, nil, false, func(k, _ []byte) bool {
		if KeyKind(k) == "" {
			t.Errorf("after the upgrade, %q is built by no constructor", k)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if at, _ := layoutOf(store); at != 4 {
		t.Errorf("layout %d, want 4", at)
	}
}

// An outbox entry whose key layout 4 has no form for stops the upgrade
// at layout 3, with the entry where it was: its event is not dropped.
func TestUpgradeRefusesAnOutboxKeyItCannotRewrite(t *testing.T) {
	store := openMemStore(t)
	bad := textOutboxKey("not-a-uuid", convID, 1)
	b := store.NewBatch()
	b.Set(bad, []byte("v"))
	b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, 3))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	err := Upgrade(store, discardLog())
	if err == nil {
		t.Fatal("upgraded a directory with an outbox key it cannot rewrite")
	}
	if at, _ := layoutOf(store); at != 3 {
		t.Fatalf("layout %d after a failed step, want 3", at)
	}
	if v, err := store.Get(bad); err != nil || string(v) != "v" {
		t.Fatalf("the entry = %q (%v), want it kept", v, err)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The upgrade at start logs its progress (docs/decisions.md "Logs"): that it starts, each
// step with what it does, the keys written at each batch and in all, and
// its end; a directory at the newest layout logs nothing.
func TestUpgradeLogsItsProgress(t *testing.T) {
	store := openMemStore(t)
	const users = 10_001 // a batch of the email index and then some
	b := store.NewBatch()
	for i := range users {
		id := "u" + strconv.Itoa(i)
		b.Set(unpartitioned(userKey("w1", id)), marshal(&kitpb.User{Id: id, WorkspaceId: "w1", Email: id + "@example.com", PasswordHash: []byte("h"), Active: true}))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Upgrade(store, slog.New(slog.NewJSONHandler(&out, nil))); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for line := range bytes.Lines(out.Bytes()) {
		var l map[string]any
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	find := func(msg string, to float64) map[string]any {
		for _, l := range lines {
			if l["msg"] == msg && (to == 0 || l["to"] == to) {
				return l
			}
		}
		t.Fatalf("no line %q (to %v) in\n%s", msg, to, out.Bytes())
		return nil
	}
	for _, tc := range []struct {
		rule  string
		check func() bool
	}{
		{"the start says from which layout to which", func() bool {
			l := find("upgrading the data layout", 0)
			return l["from"] == 0.0 && l["to"] == float64(len(layoutSteps))
		}},
		{"each step says what it does", func() bool { return find("data layout step", 1)["what"] == layoutSteps[0].what }},
		{"a step's batches report the keys written so far", func() bool { return find("data layout step progress", 1)["keys"] == 10_000.0 }},
		{"a step's end says how many keys it wrote", func() bool { return find("data layout step done", 1)["keys"] == float64(users) }},
		{"the second step moves every key", func() bool { return find("data layout step done", 2)["keys"].(float64) >= 2*users }},
		{"the end names the layout reached", func() bool { return find("upgraded the data layout", 0)["layout"] == float64(len(layoutSteps)) }},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if !tc.check() {
				t.Fatalf("no, in\n%s", out.Bytes())
			}
		})
	}
	t.Run("a fresh directory logs nothing and is at the newest layout", func(t *testing.T) {
		fresh := openMemStore(t)
		var out bytes.Buffer
		if err := Upgrade(fresh, slog.New(slog.NewJSONHandler(&out, nil))); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 {
			t.Fatalf("logged %s", out.Bytes())
		}
		if at, err := layoutOf(fresh); err != nil || at != uint64(len(layoutSteps)) {
			t.Fatalf("layout %d (%v), want %d", at, err, len(layoutSteps))
		}
	})
	t.Run("a directory at the newest layout logs nothing", func(t *testing.T) {
		out.Reset()
		if err := Upgrade(store, slog.New(slog.NewJSONHandler(&out, nil))); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 {
			t.Fatalf("logged %s", out.Bytes())
		}
	})
}
