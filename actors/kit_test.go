package actors_test

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestKitVersions(t *testing.T) {
	n := shared
	// withDisplayName changes one field of a manifest, keeping its version.
	withDisplayName := func(man string) string {
		return strings.Replace(man, `"en":"Kit `, `"en":"Renamed Kit `, 1)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, w *workspace, slug string)
	}{
		{"version immutability: same version different manifest conflicts; identical re-upload is created=false", func(t *testing.T, w *workspace, slug string) {
			man := manifestJSON(slug, "1.0.0", "messages:read")
			first := n.mustUpload(t, w.id, man, false)
			if !first.Created || first.Version.Version != "1.0.0" || first.Version.Published {
				t.Fatalf("first upload %v", first)
			}
			changed := withDisplayName(man)
			if changed == man {
				t.Fatal("test manifest did not change")
			}
			_, err := n.upload(w.id, changed, false)
			wantCode(t, err, kiterr.Conflict)
			again := n.mustUpload(t, w.id, man, false)
			if again.Created || again.Version.Id != first.Version.Id || again.Version.ManifestHash != first.Version.ManifestHash {
				t.Fatalf("identical re-upload %v, want the registered version with created=false", again)
			}
		}},
		{"an identical re-upload with publish publishes the draft", func(t *testing.T, w *workspace, slug string) {
			man := manifestJSON(slug, "1.0.0")
			n.mustUpload(t, w.id, man, false)
			r := n.mustUpload(t, w.id, man, true)
			if r.Created || !r.Version.Published || r.Version.PublishedAt == 0 || r.Kit.LatestPublishedVersion != "1.0.0" {
				t.Fatalf("re-upload with publish %v", r)
			}
		}},
		{"versions must increase", func(t *testing.T, w *workspace, slug string) {
			n.mustUpload(t, w.id, manifestJSON(slug, "1.2.0"), false)
			for _, v := range []string{"1.1.9", "0.9.0", "1.1.10"} {
				_, err := n.upload(w.id, manifestJSON(slug, v), false)
				if kiterr.CodeOf(err) != kiterr.Conflict {
					t.Errorf("upload %s after 1.2.0: got %v, want conflict", v, err)
				}
			}
			for _, v := range []string{"1.2.1", "1.10.0", "2.0.0"} {
				r := n.mustUpload(t, w.id, manifestJSON(slug, v), false)
				if !r.Created || r.Kit.LatestVersion != v {
					t.Fatalf("upload %s: %v", v, r)
				}
			}
		}},
		{"a slug belongs to one workspace", func(t *testing.T, w *workspace, slug string) {
			mine := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			other := n.workspace(t, 0)
			_, err := n.upload(other.id, manifestJSON(slug, "2.0.0"), false)
			wantCode(t, err, kiterr.SlugTaken, "manifest.slug")
			// Even with the Kit id known, the other workspace cannot add a version.
			_, err = try[*kitpb.VersionReply](n, actors.KindKit, mine.Kit.Id, &kitpb.UploadVersion{
				KitId: mine.Kit.Id, WorkspaceId: other.id, VersionId: ids.New(), Manifest: manifestJSON(slug, "3.0.0"),
			})
			wantCode(t, err, kiterr.NotFound)
			again := n.mustUpload(t, w.id, manifestJSON(slug, "1.1.0"), false)
			if again.Kit.Id != mine.Kit.Id {
				t.Fatalf("the owner's next version went to Kit %s, want %s", again.Kit.Id, mine.Kit.Id)
			}
		}},
		{"a new Kit starts private with its first version as latest", func(t *testing.T, w *workspace, slug string) {
			r := n.mustUpload(t, w.id, manifestJSON(slug, "0.1.0"), false)
			k := r.Kit
			if k.Slug != slug || k.Distribution != "private" || k.State != "active" || k.WorkspaceId != w.id ||
				k.LatestVersion != "0.1.0" || k.LatestPublishedVersion != "" {
				t.Fatalf("kit %v", k)
			}
		}},
		{"an invalid manifest is a validation error under manifest", func(t *testing.T, w *workspace, slug string) {
			_, err := try[*kitpb.VersionReply](n, actors.KindKit, ids.New(), &kitpb.UploadVersion{
				WorkspaceId: w.id, VersionId: ids.New(), Manifest: `{"schemaVersion":1}`,
			})
			wantCode(t, err, kiterr.Validation)
			if p := err.(*kiterr.Error).Path; p != "manifest" && !strings.HasPrefix(p, "manifest.") {
				t.Fatalf("path %q is not under manifest", p)
			}
		}},
		{"publishing a draft makes it the latest published version", func(t *testing.T, w *workspace, slug string) {
			r := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			p := ask[*kitpb.VersionReply](t, n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "1.0.0"})
			if !p.Version.Published || p.Version.PublishedAt == 0 || p.Kit.LatestPublishedVersion != "1.0.0" {
				t.Fatalf("publish %v", p)
			}
			again := ask[*kitpb.VersionReply](t, n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "1.0.0"})
			if again.Version.PublishedAt != p.Version.PublishedAt {
				t.Fatal("publishing twice changed publishedAt")
			}
		}},
		{"publishing an unknown version or another workspace's Kit is not found", func(t *testing.T, w *workspace, slug string) {
			r := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			_, err := try[*kitpb.VersionReply](n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "9.9.9"})
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.VersionReply](n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: ids.New(), Version: "1.0.0"})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a private Kit installs only in its own workspace", func(t *testing.T, w *workspace, slug string) {
			r := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), true)
			other := n.workspace(t, 0)
			_, err := try[*kitpb.InstallationReply](n, actors.KindWorkspace, other.id, &kitpb.Install{KitId: r.Kit.Id})
			wantCode(t, err, kiterr.NotFound)
			n.install(t, w.id, r.Kit.Id, "")
		}},
		{"another workspace installs only published versions of an unlisted Kit", func(t *testing.T, w *workspace, slug string) {
			unlisted := strings.Replace(manifestJSON(slug, "1.0.0"), `"distribution":"private"`, `"distribution":"unlisted"`, 1)
			r := n.mustUpload(t, w.id, unlisted, false)
			other := n.workspace(t, 0)
			_, err := try[*kitpb.InstallationReply](n, actors.KindWorkspace, other.id, &kitpb.Install{KitId: r.Kit.Id})
			wantCode(t, err, kiterr.NotFound)
			ask[*kitpb.VersionReply](t, n, actors.KindKit, r.Kit.Id, &kitpb.PublishVersion{WorkspaceId: w.id, Version: "1.0.0"})
			inst := n.install(t, other.id, r.Kit.Id, "")
			if inst.WorkspaceId != other.id || inst.KitVersion != "1.0.0" {
				t.Fatalf("installation %v", inst)
			}
		}},
		{"installing an unknown Kit or version is not found", func(t *testing.T, w *workspace, slug string) {
			_, err := try[*kitpb.InstallationReply](n, actors.KindWorkspace, w.id, &kitpb.Install{KitId: ids.New()})
			wantCode(t, err, kiterr.NotFound)
			r := n.mustUpload(t, w.id, manifestJSON(slug, "1.0.0"), false)
			_, err = try[*kitpb.InstallationReply](n, actors.KindWorkspace, w.id, &kitpb.Install{KitId: r.Kit.Id, Version: "2.0.0"})
			wantCode(t, err, kiterr.NotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, n.workspace(t, 0), newSlug()) })
	}
}
