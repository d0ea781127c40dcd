package actors_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// withFields sets top-level fields of a manifest.
func withFields(man string, fields map[string]any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(man), &m); err != nil {
		panic(err)
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// logEvents is the developer log of the Kit as "event status", newest first.
func logEvents(t testing.TB, n *testNode, kitID string) []string {
	t.Helper()
	entries, _, err := actors.ReadDevLog(n.env, kitID, "", 100, nil)
	noErr(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Source+" "+e.Event+" "+e.Status)
	}
	return out
}

func TestDeveloperAPIRules(t *testing.T) {
	n := shared
	tests := []struct {
		name string
		run  func(t *testing.T, w *workspace)
	}{
		{"a reserved slug cannot be claimed: 400 at manifest.slug", func(t *testing.T, w *workspace) {
			_, err := n.upload(w.id, manifestJSON("admin", "1.0.0"), false)
			wantCode(t, err, kiterr.Validation, "manifest.slug")
		}},
		{"check slug: a free reserved slug is reserved", func(t *testing.T, w *workspace) {
			r := ask[*kitpb.SlugCheckReply](t, n, actors.KindSlug, "kit", &kitpb.CheckSlug{WorkspaceId: w.id})
			if !r.Reserved || r.Taken || r.KitId != "" {
				t.Fatalf("%v", r)
			}
		}},
		{"check slug: a free slug is neither reserved nor taken", func(t *testing.T, w *workspace) {
			r := ask[*kitpb.SlugCheckReply](t, n, actors.KindSlug, newSlug(), &kitpb.CheckSlug{WorkspaceId: w.id})
			if r.Reserved || r.Taken || r.KitId != "" || r.PublishedManifest != "" {
				t.Fatalf("%v", r)
			}
		}},
		{"check slug: another workspace's slug is taken and names no Kit", func(t *testing.T, w *workspace) {
			slug := newSlug()
			n.mustUpload(t, n.workspace(t, 0).id, manifestJSON(slug, "1.0.0"), true)
			r := ask[*kitpb.SlugCheckReply](t, n, actors.KindSlug, slug, &kitpb.CheckSlug{WorkspaceId: w.id})
			if !r.Taken || r.KitId != "" || r.PublishedManifest != "" {
				t.Fatalf("%v", r)
			}
		}},
		{"check slug: the workspace's own Kit and its latest published manifest, not a later draft", func(t *testing.T, w *workspace) {
			slug := newSlug()
			pub := manifestJSON(slug, "1.0.0")
			k := n.mustUpload(t, w.id, pub, true)
			n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0", "messages:read"), false)
			r := ask[*kitpb.SlugCheckReply](t, n, actors.KindSlug, slug, &kitpb.CheckSlug{WorkspaceId: w.id})
			if r.Taken || r.KitId != k.Kit.Id || r.PublishedManifest != pub {
				t.Fatalf("%v", r)
			}
		}},
		{"check slug: an own Kit with only drafts has no published manifest", func(t *testing.T, w *workspace) {
			slug := newSlug()
			k := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			r := ask[*kitpb.SlugCheckReply](t, n, actors.KindSlug, slug, &kitpb.CheckSlug{WorkspaceId: w.id})
			if r.KitId != k.Kit.Id || r.PublishedManifest != "" {
				t.Fatalf("%v", r)
			}
		}},
		{"publishing a directory Kit needs every directory field: 409 naming the first", func(t *testing.T, w *workspace) {
			man := withFields(manifestJSON(newSlug(), "1.0.0"), map[string]any{"distribution": "directory"})
			_, err := n.upload(w.id, man, true)
			wantCode(t, err, kiterr.Conflict, "manifest.iconUrl")
			r := n.mustUpload(t, w.id, man, false)
			_, err = try[*kitpb.VersionReply](n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "1.0.0"})
			wantCode(t, err, kiterr.Conflict, "manifest.iconUrl")
		}},
		{"a complete directory Kit is published", func(t *testing.T, w *workspace) {
			man := withFields(manifestJSON(newSlug(), "1.0.0"), map[string]any{
				"distribution": "directory", "iconUrl": "https://example.com/icon.png", "categories": []string{"productivity"},
			})
			r := n.mustUpload(t, w.id, man, true)
			if !r.Version.Published || r.Kit.Distribution != "directory" {
				t.Fatalf("%v", r)
			}
		}},
		{"uploads and publishes are audit entries of the developer log, newest first", func(t *testing.T, w *workspace) {
			slug := newSlug()
			k := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), true)
			n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0"), false)
			ask[*kitpb.VersionReply](t, n, actors.KindKit, k.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "1.1.0"})
			got := logEvents(t, n, k.Kit.Id)
			want := []string{"audit version.published 1.1.0", "audit version.uploaded 1.1.0", "audit version.published 1.0.0", "audit version.uploaded 1.0.0"}
			if !slices.Equal(got, want) {
				t.Fatalf("log %q, want %q", got, want)
			}
		}},
		{"a refused upload writes no log entry", func(t *testing.T, w *workspace) {
			slug := newSlug()
			k := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			_, err := n.upload(w.id, manifestJSON(slug, "0.9.0"), false)
			wantCode(t, err, kiterr.Conflict)
			if got := logEvents(t, n, k.Kit.Id); len(got) != 1 {
				t.Fatalf("log %q", got)
			}
		}},
		{"kit detail: secret metadata without hashes", func(t *testing.T, w *workspace) {
			k := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), true)
			d := ask[*kitpb.KitDetailReply](t, n, actors.KindKit, k.Kit.Id, &kitpb.GetKitDetail{WorkspaceId: w.id})
			if d.ClientSecret != nil || d.SigningSecret != nil || len(d.Versions) != 1 {
				t.Fatalf("fresh Kit %v", d)
			}
			for range 2 {
				h := ids.Hash(ids.NewSecret("kss_"))
				ask[*kitpb.KitSecretReply](t, n, actors.KindKit, k.Kit.Id, &kitpb.RotateKitSecret{Which: actors.SecretSigning, SecretHash: h[:]})
			}
			d = ask[*kitpb.KitDetailReply](t, n, actors.KindKit, k.Kit.Id, &kitpb.GetKitDetail{WorkspaceId: w.id})
			s := d.SigningSecret
			if s == nil || s.Generation != 2 || s.CreatedAt == 0 || s.PreviousExpiresAt == 0 || len(s.Hash) != 0 || len(s.PreviousHash) != 0 || d.ClientSecret != nil {
				t.Fatalf("signing secret %v", s)
			}
		}},
		{"kit detail: other workspaces get not_found, even for a published Kit", func(t *testing.T, w *workspace) {
			k := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), true)
			_, err := try[*kitpb.KitDetailReply](n, actors.KindKit, k.Kit.Id, &kitpb.GetKitDetail{WorkspaceId: n.workspace(t, 0).id})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"workspace kits lists the workspace's Kits only, in creation order", func(t *testing.T, w *workspace) {
			a := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), false)
			b := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), true)
			n.mustUpload(t, n.workspace(t, 0).id, manifestJSON(newSlug(), "1.0.0"), true)
			got, err := actors.WorkspaceKits(n.env, w.id)
			noErr(t, err)
			if !slices.Equal(got, []string{a.Kit.Id, b.Kit.Id}) {
				t.Fatalf("kits %v", got)
			}
		}},
		{"installed here: only while an installation is active", func(t *testing.T, w *workspace) {
			k := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), true)
			here := func() bool {
				ok, err := actors.InstalledHere(n.env, w.id, k.Kit.Id)
				noErr(t, err)
				return ok
			}
			if here() {
				t.Fatal("installed before install")
			}
			in := n.install(t, w.id, k.Kit.Id, "")
			if !here() {
				t.Fatal("not installed after install")
			}
			ask[*kitpb.Ok](t, n, actors.KindInstallation, in.Id, &kitpb.Uninstall{})
			if here() {
				t.Fatal("installed after uninstall")
			}
		}},
		{"developer token: its record and the workspace's sandbox flag", func(t *testing.T, w *workspace) {
			tokenID := ids.New()
			h := ids.Hash(ids.NewSecret("kdev_"))
			ask[*kitpb.CredentialReply](t, n, actors.KindWorkspace, w.id, &kitpb.CreateDeveloperToken{UserId: w.users[0], TokenId: tokenID, Name: "ci", SecretHash: h[:]})
			r := ask[*kitpb.DeveloperTokenReply](t, n, actors.KindWorkspace, w.id, &kitpb.GetDeveloperToken{TokenId: tokenID})
			c := r.Credential
			if c.TokenId != tokenID || c.Name != "ci" || c.UserId != w.users[0] || c.ExpiresAt-c.CreatedAt != int64(actors.DeveloperTokenLifetime) || r.Sandbox {
				t.Fatalf("%v", r)
			}
			_, err := try[*kitpb.DeveloperTokenReply](n, actors.KindWorkspace, w.id, &kitpb.GetDeveloperToken{TokenId: ids.New()})
			wantCode(t, err, kiterr.NotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, n.workspace(t, 1))
		})
	}
}

// TestDevLogRetention runs on a node of its own: it moves the clock on by
// more than the retention window.
func TestDevLogRetention(t *testing.T) {
	n, err := startNode(vfs.NewMem(), nil)
	noErr(t, err)
	defer n.stop()
	w := n.workspace(t, 0)
	slug := newSlug()
	k := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
	n.clk.Advance(actors.LogRetention - time.Hour)
	n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0"), false)

	t.Run("entries older than the retention window are not read", func(t *testing.T) {
		n.clk.Advance(2 * time.Hour)
		if got := logEvents(t, n, k.Kit.Id); !slices.Equal(got, []string{"audit version.uploaded 1.1.0"}) {
			t.Fatalf("log %q", got)
		}
	})
	t.Run("a later write deletes the expired entries", func(t *testing.T) {
		n.mustUpload(t, w.id, manifestJSON(slug, "1.2.0"), false)
		left := 0
		prefix := actors.DevLogPrefix(partition.Of(k.Kit.Id), k.Kit.Id)
		noErr(t, n.store.Scan(prefix, append(prefix[:len(prefix):len(prefix)], 0xff), false, func(k, _ []byte) bool {
			left++
			return true
		}))
		if left != 2 {
			t.Fatalf("%d entries stored, want 2 (the expired one deleted)", left)
		}
	})
}

// An entry's id is its key's last part: the stored value leaves it out, and
// reads put it back. Entries stored before kept the id in the value too;
// they read the same.
func TestDevLogEntryIDs(t *testing.T) {
	n := shared
	w := n.workspace(t, 0)
	k := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), false)
	stored := storedRecords(t, n, actors.DevLogPrefix(partition.Of(k.Kit.Id), k.Kit.Id), func() *kitpb.DevLogEntry { return &kitpb.DevLogEntry{} })
	for _, e := range stored {
		if e.Id != "" {
			t.Errorf("stored value repeats the id %s", e.Id)
		}
	}
	if len(stored) == 0 {
		t.Fatal("the upload logged nothing")
	}
	older := &kitpb.DevLogEntry{Id: ids.NewAt(n.clk.Now()), At: n.clk.Now().UnixNano(), Source: actors.LogSourceAudit, Level: actors.LogLevelInfo, Event: "older.layout"}
	v, err := proto.Marshal(older)
	noErr(t, err)
	b := n.store.NewBatch()
	b.Set(actors.DevLogKey(partition.Of(k.Kit.Id), k.Kit.Id, older.Id), v)
	noErr(t, b.Commit())

	entries, _, err := actors.ReadDevLog(n.env, k.Kit.Id, "", 100, nil)
	noErr(t, err)
	if len(entries) != len(stored)+1 {
		t.Fatalf("%d entries read, want %d", len(entries), len(stored)+1)
	}
	for _, e := range entries {
		if !ids.Valid(e.Id) {
			t.Errorf("entry %q read with id %q", e.Event, e.Id)
		}
		if e.Event == "older.layout" && e.Id != older.Id {
			t.Errorf("older entry read with id %q, want %q", e.Id, older.Id)
		}
	}
	// The id read back is the cursor of the next page.
	page, _, err := actors.ReadDevLog(n.env, k.Kit.Id, entries[0].Id, 100, nil)
	noErr(t, err)
	if len(page) != len(entries)-1 {
		t.Fatalf("%d entries before %s, want %d", len(page), entries[0].Id, len(entries)-1)
	}
}

// A Kit's log is written by actors of many partitions (each entry in its
// writer's); a read merges them newest first, and its cursor pages across
// partitions.
func TestDevLogMergesEveryWritersPartition(t *testing.T) {
	n := shared
	kit := ids.New()
	var written []string // oldest first
	b := n.store.NewBatch()
	for i, p := range []partition.ID{3, 50, 7, 3, 63, 0, 50} {
		e := &kitpb.DevLogEntry{Id: ids.NewAt(n.clk.Now().Add(time.Duration(i) * time.Millisecond)), At: n.clk.Now().UnixNano(), Source: actors.LogSourceAudit, Level: actors.LogLevelInfo, Event: fmt.Sprint("e", i)}
		v, err := proto.Marshal(e)
		noErr(t, err)
		b.Set(actors.DevLogKey(p, kit, e.Id), v)
		written = append(written, e.Event)
	}
	noErr(t, b.Commit())

	var read []string
	before := ""
	for page := 0; ; page++ {
		entries, more, err := actors.ReadDevLog(n.env, kit, before, 3, nil)
		noErr(t, err)
		for _, e := range entries {
			read = append(read, e.Event)
		}
		if !more {
			break
		}
		if page > 5 {
			t.Fatal("paging does not end")
		}
		before = entries[len(entries)-1].Id
	}
	slices.Reverse(written)
	if !slices.Equal(read, written) {
		t.Fatalf("read %v, want %v (newest first)", read, written)
	}
}
