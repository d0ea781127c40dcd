package actors_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// withDistribution returns the manifest with its distribution replaced.
func withDistribution(t testing.TB, man, distribution string) string {
	t.Helper()
	var m map[string]any
	noErr(t, json.Unmarshal([]byte(man), &m))
	m["distribution"] = distribution
	b, err := json.Marshal(m)
	noErr(t, err)
	return string(b)
}

// linkHash is the stored form of a fresh install link secret.
func linkHash() []byte {
	h := ids.Hash(ids.NewSecret(ids.InstallLink))
	return h[:]
}

// docs/decisions.md "Install links".
func TestKitInstallLink(t *testing.T) {
	n := shared
	create := func(ws, kit string, hash []byte) (*kitpb.InstallLinkReply, error) {
		return try[*kitpb.InstallLinkReply](n, actors.KindKit, kit, &kitpb.CreateInstallLink{WorkspaceId: ws, LinkHash: hash})
	}
	open := func(kit string, hash []byte) (*kitpb.OpenInstallLinkReply, error) {
		return try[*kitpb.OpenInstallLinkReply](n, actors.KindKit, kit, &kitpb.OpenInstallLink{LinkHash: hash})
	}
	state := func(t *testing.T, ws, kit string) *kitpb.InstallLinkReply {
		return ask[*kitpb.KitDetailReply](t, n, actors.KindKit, kit, &kitpb.GetKitDetail{WorkspaceId: ws}).InstallLink
	}
	// works checks that hash opens the Kit both through the index and the Kit.
	works := func(t *testing.T, kit string, hash []byte) *kitpb.OpenInstallLinkReply {
		t.Helper()
		got, err := actors.KitByInstallLink(n.env, hash)
		noErr(t, err)
		if got != kit {
			t.Fatalf("index names %s, want %s", got, kit)
		}
		r, err := open(kit, hash)
		noErr(t, err)
		return r
	}
	// gone checks that hash is no longer indexed, so it finds no Kit, and
	// that the Kit refuses it too.
	gone := func(t *testing.T, kit string, hash []byte) {
		t.Helper()
		_, err := actors.KitByInstallLink(n.env, hash)
		wantCode(t, err, kiterr.NotFound)
		_, err = open(kit, hash)
		wantCode(t, err, kiterr.NotFound)
	}
	// unlisted is a Kit with version 1.0.0 published as unlisted.
	unlisted := func(t *testing.T) (ws, kit, slug string) {
		w := n.workspace(t, 1)
		slug = newSlug()
		r := n.mustUpload(t, w.id, withDistribution(t, manifestJSON(slug, "1.0.0", "messages:write"), "unlisted"), true)
		return w.id, r.Kit.Id, slug
	}

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a private Kit cannot have a link (409)", func(t *testing.T) {
			w := n.workspace(t, 1)
			r := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), true)
			_, err := create(w.id, r.Kit.Id, linkHash())
			wantCode(t, err, kiterr.Conflict)
		}},
		{"an unlisted Kit with drafts only cannot have a link (409)", func(t *testing.T) {
			w := n.workspace(t, 1)
			r := n.mustUpload(t, w.id, withDistribution(t, manifestJSON(newSlug(), "1.0.0"), "unlisted"), false)
			_, err := create(w.id, r.Kit.Id, linkHash())
			wantCode(t, err, kiterr.Conflict)
		}},
		{"a new link is active and opens the latest published version, found by its hash", func(t *testing.T) {
			ws, kit, slug := unlisted(t)
			n.mustUpload(t, ws, withDistribution(t, manifestJSON(slug, "1.1.0"), "unlisted"), false) // a draft is not what the link installs
			h := linkHash()
			before := n.clk.Now().UnixNano()
			r, err := create(ws, kit, h)
			noErr(t, err)
			if !r.Active || r.CreatedAt < before || r.CreatedAt > n.clk.Now().UnixNano() {
				t.Fatalf("created %v", r)
			}
			if got := works(t, kit, h); got.Kit.Id != kit || got.Version.Version != "1.0.0" {
				t.Fatalf("opened %v", got)
			}
			if s := state(t, ws, kit); !s.Active || s.CreatedAt != r.CreatedAt {
				t.Fatalf("state %v", s)
			}
		}},
		{"replacing a link ends the old one at once", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			old := linkHash()
			_, err := create(ws, kit, old)
			noErr(t, err)
			next := linkHash()
			_, err = create(ws, kit, next)
			noErr(t, err)
			gone(t, kit, old)
			works(t, kit, next)
		}},
		{"deleting a link ends it; deleting again is not_found", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			h := linkHash()
			_, err := create(ws, kit, h)
			noErr(t, err)
			r := ask[*kitpb.InstallLinkReply](t, n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: ws})
			if r.Active || r.CreatedAt != 0 {
				t.Fatalf("deleted %v", r)
			}
			gone(t, kit, h)
			if s := state(t, ws, kit); s.Active || s.CreatedAt != 0 {
				t.Fatalf("state %v", s)
			}
			_, err = try[*kitpb.InstallLinkReply](n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: ws})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a Kit without a link has none active and nothing to delete", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			if s := state(t, ws, kit); s.Active {
				t.Fatalf("state %v", s)
			}
			_, err := try[*kitpb.InstallLinkReply](n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: ws})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"another workspace gets not_found for create, delete and state", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			h := linkHash()
			_, err := create(ws, kit, h)
			noErr(t, err)
			other := n.workspace(t, 1).id
			_, err = create(other, kit, linkHash())
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.InstallLinkReply](n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: other})
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.KitDetailReply](n, actors.KindKit, kit, &kitpb.GetKitDetail{WorkspaceId: other})
			wantCode(t, err, kiterr.NotFound)
			works(t, kit, h)
		}},
		{"a hash that is not the Kit's link opens nothing", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			_, err := create(ws, kit, linkHash())
			noErr(t, err)
			_, err = open(kit, linkHash())
			wantCode(t, err, kiterr.NotFound)
			_, err = actors.KitByInstallLink(n.env, linkHash())
			wantCode(t, err, kiterr.NotFound)
		}},
		{"an unknown Kit is not_found", func(t *testing.T) {
			_, err := create(ids.New(), ids.New(), linkHash())
			wantCode(t, err, kiterr.NotFound)
		}},
		{"a private publish ends the link for good; a new link works again", func(t *testing.T) {
			ws, kit, slug := unlisted(t)
			h := linkHash()
			_, err := create(ws, kit, h)
			noErr(t, err)
			n.mustUpload(t, ws, manifestJSON(slug, "1.1.0"), true)
			_, err = open(kit, h) // still indexed: the Kit refuses it
			wantCode(t, err, kiterr.NotFound)
			if s := state(t, ws, kit); s.Active {
				t.Fatalf("state after a private publish %v", s)
			}
			_, err = create(ws, kit, linkHash())
			wantCode(t, err, kiterr.Conflict)
			n.mustUpload(t, ws, withDistribution(t, manifestJSON(slug, "1.2.0"), "unlisted"), true)
			_, err = open(kit, h) // unlisted again: the old link stays ended
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.InstallLinkReply](n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: ws})
			wantCode(t, err, kiterr.NotFound)
			next := linkHash()
			_, err = create(ws, kit, next)
			noErr(t, err)
			gone(t, kit, h) // the new link replaced the ended one's index
			if got := works(t, kit, next); got.Version.Version != "1.2.0" {
				t.Fatalf("opened %v", got.Version)
			}
		}},
		{"create, replace, use and delete write audit entries", func(t *testing.T) {
			ws, kit, _ := unlisted(t)
			_, err := create(ws, kit, linkHash())
			noErr(t, err)
			_, err = create(ws, kit, linkHash())
			noErr(t, err)
			inst := ids.New()
			ask[*kitpb.Ok](t, n, actors.KindKit, kit, &kitpb.InstallLinkUsed{InstallationId: inst, Version: "1.0.0"})
			ask[*kitpb.InstallLinkReply](t, n, actors.KindKit, kit, &kitpb.DeleteInstallLink{WorkspaceId: ws})
			got := logEvents(t, n, kit)
			want := []string{"audit install_link.deleted ", "audit install_link.used 1.0.0", "audit install_link.created replaced", "audit install_link.created ",
				"audit version.published 1.0.0", "audit version.uploaded 1.0.0"}
			if !slices.Equal(got, want) {
				t.Fatalf("log %q, want %q", got, want)
			}
			entries, _, err := actors.ReadDevLog(n.env, kit, "", 10, func(e *kitpb.DevLogEntry) bool { return e.Event == "install_link.used" })
			noErr(t, err)
			if len(entries) != 1 || entries[0].InstallationId != inst || entries[0].Source != actors.LogSourceAudit {
				t.Fatalf("used entry %v", entries)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}
