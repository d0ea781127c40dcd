package app

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// privateChannel makes a private channel of f's workspace named name whose
// only member is the user member, and returns its id.
func (f *fixture) privateChannel(t *testing.T, name, member string) string {
	t.Helper()
	id := ids.New()
	call[*kitpb.ConversationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateConversation{
		ConversationId: id, Kind: "channel", Visibility: "private", Name: &name, MemberIds: []string{member},
	})
	return id
}

// docs/decisions.md "Home and API access pages": "channels offered | for
// the Kit bot and for a webhook: the admin's own live channels ... The
// operator API may add the bot to any channel of the workspace". The form
// takes only what the page offers: an admin cannot add the Kit bot (and so
// the Kit's backend) to a private channel they are not a member of by
// posting its id.
func TestAddChannelOffersOnlyTheAdminsChannels(t *testing.T) {
	f := newFixture(t)
	secret := f.privateChannel(t, "board-only", f.member) // the admin is not in it
	p := f.do((*Server).AddChannel, "POST", f.accessPath()+"/channels", f.adminCookie, url.Values{"conversation": {secret}})
	in := call[*kitpb.InstallationReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.GetInstallation{}).Installation
	if p.status == 200 || slices.Contains(in.ChannelIds, secret) {
		t.Fatalf("the admin added the Kit bot to a private channel they are not in: status %d, bot channels %v", p.status, in.ChannelIds)
	}
}

// The home page names the channels an installed Kit's bot is in as the
// member sees them: a private channel the member or guest is not in is
// counted, never named (members see their own conversations only:
// actors/conversation.go visible).
func TestHomeNamesOnlyTheMembersChannels(t *testing.T) {
	f := newFixture(t)
	guest := ids.New()
	call[*kitpb.UserReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateUser{UserId: guest, DisplayName: "Gus Guest", Role: "guest"})
	guestCookie := f.session(t, guest)
	secret := f.privateChannel(t, "layoffs-2025", f.admin)
	call[*kitpb.InstallationReply](t, f.s, actors.KindInstallation, f.inst.Id, &kitpb.AddChannel{ConversationId: secret})
	for _, who := range []struct{ name, cookie string }{{"member", f.memberCookie}, {"guest", guestCookie}} {
		t.Run(who.name, func(t *testing.T) {
			p := f.do((*Server).Home, "GET", "/app/", who.cookie, nil)
			if p.status != 200 {
				t.Fatalf("status %d", p.status)
			}
			if strings.Contains(p.body, "layoffs-2025") {
				t.Fatalf("the home page of a %s names a private channel they are not in:\n%s", who.name, p.body)
			}
		})
	}
}

// docs/decisions.md "Home and API access pages": "channels offered | ...
// the admin's own live channels (kind channel, not archived), the first
// 200, looked for among the admin's first 1,000 conversations". Each row
// makes dms direct messages of the admin (they come first by creation),
// then a channel of the admin's.
func TestChannelsOffered(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		dms     int
		offered bool // the channel made after them
	}{
		{"the 200 are channels: many direct messages before them do not count", maxChannelChoices, true},
		{"a channel past the first 1,000 conversations is not offered: each read wakes a conversation", maxConversationsScanned, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f := newFixture(t)
			for range tc.dms {
				call[*kitpb.ConversationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateConversation{
					ConversationId: ids.New(), Kind: "dm", Visibility: "private", MemberIds: []string{f.admin, f.member},
				})
			}
			later, name := ids.New(), "ops"
			call[*kitpb.ConversationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.CreateConversation{
				ConversationId: later, Kind: "channel", Visibility: "public", Name: &name, MemberIds: []string{f.admin},
			})
			p := f.do((*Server).AccessPage, "GET", f.accessPath(), f.adminCookie, nil)
			if p.status != 200 || !strings.Contains(p.body, `<option value="`+f.channel+`">`) {
				t.Fatalf("status %d: the fixture's channel is not offered:\n%s", p.status, p.body)
			}
			if got := strings.Contains(p.body, `<option value="`+later+`">`); got != tc.offered {
				t.Fatalf("the channel after %d direct messages offered: %v, want %v", tc.dms, got, tc.offered)
			}
		})
	}
}
