package actors_test

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

var (
	userKinds      = []string{"user.joined", "user.updated"}
	usersRead      = []string{"users:read"}
	usersReadEmail = []string{"users:read", "users:read.email"}
)

// userEventsKit uploads a Kit of the workspace whose version 1.0.0 has the
// bot scopes and event subscriptions given, and installs it.
func userEventsKit(t *testing.T, n *testNode, ws string, scopes, events []string) (kitID, slug string, inst *kitpb.Installation) {
	t.Helper()
	slug = newSlug()
	v := n.mustUpload(t, ws, eventsManifest(slug, "1.0.0", scopes, events), false)
	return v.Kit.Id, slug, n.install(t, ws, v.Kit.Id, "")
}

func deactivate(t *testing.T, n *testNode, ws, user string) {
	t.Helper()
	ask[*kitpb.Ok](t, n, actors.KindWorkspace, ws, &kitpb.DeactivateUser{UserId: user})
}

// user.joined and user.updated are emitted by the writes to a user record,
// to each installation of the workspace that subscribes to them, whose bot
// has users:read, and that is still installed.
func TestUserEventsEmittedByTheirWrites(t *testing.T) {
	n := shared
	for _, tc := range []struct {
		name           string
		scopes, events []string
		act            func(t *testing.T, ws *workspace, kitID, slug, inst string)
		want           []string
	}{
		{"user.joined when a member is added", usersRead, userKinds, func(t *testing.T, ws *workspace, _, _, _ string) {
			n.user(t, ws.id)
		}, []string{"user.joined"}},
		{"user.updated when a member is deactivated, once", usersRead, userKinds, func(t *testing.T, ws *workspace, _, _, _ string) {
			deactivate(t, n, ws.id, ws.users[0])
			deactivate(t, n, ws.id, ws.users[0]) // no change: no event
		}, []string{"user.updated"}},
		{"nothing for a user kind the Kit does not subscribe to", usersRead, []string{"user.updated"}, func(t *testing.T, ws *workspace, _, _, _ string) {
			n.user(t, ws.id)
		}, nil},
		{"nothing without a subscription to user events", usersRead, []string{"bot.added"}, func(t *testing.T, ws *workspace, _, _, _ string) {
			n.user(t, ws.id)
			deactivate(t, n, ws.id, ws.users[0])
		}, nil},
		{"nothing once an update drops users:read", usersRead, userKinds, func(t *testing.T, ws *workspace, kitID, slug, _ string) {
			n.mustUpload(t, ws.id, eventsManifest(slug, "1.0.1", []string{"messages:read"}, []string{"bot.added"}), false)
			n.install(t, ws.id, kitID, "1.0.1")
			n.user(t, ws.id)
		}, nil},
		{"user events once an update subscribes to them", usersRead, []string{"bot.added"}, func(t *testing.T, ws *workspace, kitID, slug, _ string) {
			n.mustUpload(t, ws.id, eventsManifest(slug, "1.0.1", usersRead, userKinds), false)
			n.install(t, ws.id, kitID, "1.0.1")
			n.user(t, ws.id)
		}, []string{"user.joined"}},
		{"nothing after uninstall", usersRead, userKinds, func(t *testing.T, ws *workspace, _, _, inst string) {
			ask[*kitpb.Ok](t, n, actors.KindInstallation, inst, &kitpb.Uninstall{})
			n.user(t, ws.id)
			deactivate(t, n, ws.id, ws.users[0])
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := n.workspace(t, 1)
			kitID, slug, inst := userEventsKit(t, n, ws.id, tc.scopes, tc.events)
			tc.act(t, ws, kitID, slug, inst.Id)
			if got := types(queued(t, n, inst.Id)); !slices.Equal(got, tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
		})
	}
}

// A user event carries the user as the Web API shows it to the Kit bot:
// its email only to a bot with users:read.email, never the password hash;
// every installation gets the same event id.
func TestUserEventCarriesTheUserAsTheBotSeesIt(t *testing.T) {
	n := shared
	ws := n.workspace(t, 0)
	_, _, plain := userEventsKit(t, n, ws.id, usersRead, userKinds)
	_, _, withEmail := userEventsKit(t, n, ws.id, usersReadEmail, userKinds)
	id := ids.New()
	ask[*kitpb.UserReply](t, n, actors.KindWorkspace, ws.id, &kitpb.CreateUser{
		UserId: id, DisplayName: "Ada", Email: "ada@example.com", Role: "admin", PasswordHash: []byte("$2a$10$hash"),
	})
	got := map[string]*kitpb.Event{}
	for name, inst := range map[string]string{"plain": plain.Id, "withEmail": withEmail.Id} {
		evs := queued(t, n, inst)
		if len(evs) != 1 || evs[0].Type != "user.joined" || evs[0].Sequence != 1 {
			t.Fatalf("%s: events %q", name, types(evs))
		}
		got[name] = evs[0]
	}
	for name, want := range map[string]string{"plain": "", "withEmail": "ada@example.com"} {
		u := got[name].User
		if u.GetId() != id || u.DisplayName != "Ada" || u.Role != "admin" || u.Email != want || len(u.PasswordHash) != 0 || u.WorkspaceId != ws.id {
			t.Errorf("%s: user %v, want email %q and no password hash", name, u, want)
		}
	}
	if got["plain"].Id != got["withEmail"].Id || !ids.Valid(got["plain"].Id) {
		t.Errorf("event ids %s and %s, want one id", got["plain"].Id, got["withEmail"].Id)
	}
}

// The workspace's knowledge of its installations is durable, and so is a
// user event whose notice was lost: after a restart the event is
// sequenced, and new members still reach the installation.
func TestUserEventsSurviveARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewMem()
	n, err := startNode(fs, nil)
	noErr(t, err)
	ws := n.workspace(t, 0)
	_, _, inst := userEventsKit(t, n, ws.id, usersRead, userKinds)
	queued(t, n, inst.Id) // the delivery actor is active: only a notice would reach it
	actors.DropNotices(n.env)
	lost := n.user(t, ws.id)
	if got := queued(t, n, inst.Id); len(got) != 0 {
		t.Fatalf("before the restart: %q, want none (the notice was lost)", types(got))
	}
	noErr(t, n.stop())

	n, err = startNode(fs, n.clk)
	noErr(t, err)
	t.Cleanup(func() { n.stop() })
	noErr(t, actors.WakeDeliveries(n.env))
	joined := n.user(t, ws.id)
	evs := queued(t, n, inst.Id)
	var got []string
	for i, e := range evs {
		if e.Sequence != uint64(i+1) {
			t.Errorf("event %d has sequence %d", i, e.Sequence)
		}
		got = append(got, e.User.GetId())
	}
	if !slices.Equal(got, []string{lost, joined}) {
		t.Fatalf("users of the events %q, want %q", got, []string{lost, joined})
	}
}
