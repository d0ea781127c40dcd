package deliveries

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/proto/kitpb"
)

// scopedKit answers GetLatestScopes with the bot scopes latest holds.
type scopedKit struct{ latest *atomic.Pointer[[]string] }

func (k scopedKit) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetLatestScopes); ok {
		ctx.Respond(&kitpb.LatestScopesReply{Version: "1.1.0", BotScopes: *k.latest.Load()})
	}
}

// scopedInstallation runs version 1.0.0 of k1, whose bot requests scopes.
type scopedInstallation struct{ scopes []string }

func (i scopedInstallation) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetInstallation); ok {
		ctx.Respond(&kitpb.InstallationReply{Installation: &kitpb.Installation{KitId: "k1", KitVersion: "1.0.0", BotScopes: i.scopes}})
	}
}

// docs/credentials.md "Effective scopes": a user event is sent with the
// email only while the bot holds users:read.email by its installed
// version and the Kit's latest one, at the time of the attempt; the
// stored event is left as it is.
func TestUserEmailFollowsTheBotsEffectiveScopes(t *testing.T) {
	withEmail := []string{"users:read", "users:read.email"}
	without := []string{"users:read"}
	for _, tc := range []struct {
		name              string
		installed, latest []string
		// then, when set, replaces the latest scopes between two sends,
		// and invalidate says whether the sender is told.
		then       []string
		invalidate bool
		test       bool
		want       string // the email of the second send
	}{
		{name: "both versions request it", installed: withEmail, latest: withEmail, want: "a@example.com"},
		{name: "the latest version dropped it", installed: withEmail, latest: without},
		{name: "the installed version does not request it", installed: without, latest: withEmail},
		{name: "an upload that drops it limits the next send", installed: withEmail, latest: withEmail, then: without, invalidate: true},
		{name: "an upload that brings it back gives it again", installed: withEmail, latest: without, then: withEmail, invalidate: true, want: "a@example.com"},
		{name: "a test event's example data is sent as it is", installed: without, latest: without, test: true, want: "a@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var latest atomic.Pointer[[]string]
			latest.Store(&tc.latest)
			node, err := cluster.Start(cluster.Config{},
				&cluster.Kind{Name: actors.KindKit, New: func(string) actor.Actor { return scopedKit{&latest} }},
				&cluster.Kind{Name: actors.KindInstallation, New: func(string) actor.Actor { return scopedInstallation{tc.installed} }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(node.Stop)
			s := New(Config{Node: node, Clock: clock.NewTest()})
			t.Cleanup(s.Close)
			stored := &kitpb.Event{Type: "user.joined", Test: tc.test, User: &kitpb.User{Id: "u1", Email: "a@example.com"}}
			for i := range 2 {
				if i == 1 && tc.then != nil {
					latest.Store(&tc.then)
					if tc.invalidate {
						s.KitVersionsChanged("k1")
					}
				}
				ev, err := s.asTheBotReads("i1", stored)
				if err != nil {
					t.Fatal(err)
				}
				if i == 1 && ev.User.Email != tc.want {
					t.Errorf("email %q sent, want %q", ev.User.Email, tc.want)
				}
			}
			if stored.User.Email != "a@example.com" {
				t.Errorf("the stored event lost its email: %q", stored.User.Email)
			}
		})
	}
}

// docs/deliveries.md "Events need their scope when sent": an event whose
// kind needs a bot scope (docs/manifest.md "events") is not sent while
// the bot lacks it by the Kit's latest version; kinds that need a bot or
// nothing, and test events, are sent.
func TestEventsNeedTheirScopeWhenSent(t *testing.T) {
	installed := []string{"conversations:read", "files:read", "messages:read", "users:read"}
	for _, tc := range []struct {
		name, typ string
		latest    []string
		test      bool
		missing   bool
	}{
		{name: "held by both versions", typ: "message.posted", latest: installed},
		{name: "dropped by the latest version", typ: "message.posted", latest: []string{"users:read"}, missing: true},
		{name: "a channel event without conversations:read", typ: "channel.archived", latest: []string{"messages:read"}, missing: true},
		{name: "a file event without files:read", typ: "file.shared", latest: []string{"messages:read"}, missing: true},
		{name: "a user event without users:read", typ: "user.joined", latest: []string{"messages:read"}, missing: true},
		{name: "a kind that needs a bot only", typ: "bot.added", latest: nil},
		{name: "a kind that needs nothing", typ: "installation.updated", latest: nil},
		{name: "a test event", typ: "message.posted", latest: nil, test: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var latest atomic.Pointer[[]string]
			latest.Store(&tc.latest)
			node, err := cluster.Start(cluster.Config{},
				&cluster.Kind{Name: actors.KindKit, New: func(string) actor.Actor { return scopedKit{&latest} }},
				&cluster.Kind{Name: actors.KindInstallation, New: func(string) actor.Actor { return scopedInstallation{installed} }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(node.Stop)
			s := New(Config{Node: node, Clock: clock.NewTest()})
			t.Cleanup(s.Close)
			_, err = s.asTheBotReads("i1", &kitpb.Event{Type: tc.typ, Test: tc.test})
			if got := errors.Is(err, errMissingScope); got != tc.missing || (err != nil && !got) {
				t.Fatalf("asTheBotReads: %v, want missing scope %v", err, tc.missing)
			}
			if tc.missing && targetErrorCode(err) != actors.MissingScope {
				t.Errorf("error code %q, want %q", targetErrorCode(err), actors.MissingScope)
			}
		})
	}
}
