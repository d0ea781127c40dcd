package actors_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func setKitState(t *testing.T, n *testNode, kitID, state string) *kitpb.Kit {
	t.Helper()
	k := ask[*kitpb.KitReply](t, n, actors.KindKit, kitID, &kitpb.SetKitState{State: state}).Kit
	if k.State != state {
		t.Fatalf("state %q, want %q", k.State, state)
	}
	return k
}

// What a suspended Kit is refused (docs/api.md "Kit state"), each refused
// while it is suspended and allowed again once it is resumed.
func TestSuspendedKitRefuses(t *testing.T) {
	n := ownNode(t)
	f := n.actionFixture(t)
	tools := n.toolEnv(t)
	// A responseUrl granted before the suspension.
	g := ask[*kitpb.MemberActionGrant](t, n, actors.KindInstallation, f.inst.Id, f.command(f.member))
	respHash := ids.Hash(g.ResponseToken)
	rules := []struct {
		rule  string
		kitID func() string
		do    func() error
	}{
		{"a slash command is not sent to it", func() string { return f.inst.KitId }, func() error {
			_, err := try[*kitpb.MemberActionGrant](n, actors.KindInstallation, f.inst.Id, f.command(f.member))
			return err
		}},
		{"an interaction is not sent to it", func() string { return f.inst.KitId }, func() error {
			_, err := try[*kitpb.MemberActionGrant](n, actors.KindInstallation, f.inst.Id, f.interaction(f.member))
			return err
		}},
		{"its responseUrl posts nothing", func() string { return f.inst.KitId }, func() error {
			n.clk.Advance(2e9) // the conversation's post bucket
			_, err := try[*kitpb.UseResponseURLReply](n, actors.KindInstallation, f.inst.Id, &kitpb.UseResponseURL{TokenHash: respHash[:], Text: "done"})
			return err
		}},
		{"a tool call is not sent to it", func() string { return tools.inst.KitId }, func() error {
			_, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, tools.inst.Id, tools.invoke(tools.alice, tools.conv, "lookup"))
			return err
		}},
		{"it is not installed again nor updated", func() string { return tools.inst.KitId }, func() error {
			_, err := try[*kitpb.InstallationReply](n, actors.KindWorkspace, tools.ws, &kitpb.Install{KitId: tools.inst.KitId})
			return err
		}},
	}
	for _, tc := range rules {
		t.Run(tc.rule, func(t *testing.T) {
			setKitState(t, n, tc.kitID(), actors.KitSuspended)
			wantCode(t, tc.do(), kiterr.Forbidden)
			setKitState(t, n, tc.kitID(), actors.KitActive)
			noErr(t, tc.do())
		})
	}
	t.Run("an unknown Kit is not found", func(t *testing.T) {
		_, err := try[*kitpb.KitReply](n, actors.KindKit, ids.New(), &kitpb.SetKitState{State: actors.KitSuspended})
		wantCode(t, err, kiterr.NotFound)
	})
}

// A suspension is written before it is answered: a crash right after the
// answer finds the Kit suspended.
func TestKitSuspensionIsDurable(t *testing.T) {
	n, fs := crashableNode(t)
	w := n.workspace(t, 1)
	v := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0", chatScopes...), true)
	setKitState(t, n, v.Kit.Id, actors.KitSuspended)
	cut := fs.CrashClone(vfs.CrashCloneCfg{})
	noErr(t, n.stop())
	r, err := startNode(cut, n.clk)
	noErr(t, err)
	t.Cleanup(func() { _ = r.stop() })
	if k := ask[*kitpb.KitReply](t, r, actors.KindKit, v.Kit.Id, &kitpb.GetKit{}).Kit; k.State != actors.KitSuspended {
		t.Fatalf("after a crash the Kit is %q", k.State)
	}
}
