package actors

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

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
	put(b, workspaceKey("w1"), &kitpb.Workspace{Id: "w1"})
	for _, u := range users {
		put(b, userKey(u.user.WorkspaceId, u.user.Id), u.user)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	if err := Upgrade(store); err != nil {
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
		if err := Upgrade(store); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get(emailUserKey(normalEmail(late.Email), late.Id)); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("the step ran again: %v", err)
		}
	})
	t.Run("a directory from a newer build is refused", func(t *testing.T) {
		b := store.NewBatch()
		b.Set(layoutKey(), binary.BigEndian.AppendUint64(nil, uint64(len(layoutSteps))+1))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := Upgrade(store); err == nil {
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
