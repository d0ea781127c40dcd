package actors

import (
	"slices"
	"testing"

	"github.com/kitd/kitd/internal/ids"
)

// A test event (kit trigger) carries an example of its kind's resource,
// in the field a real event of the kind carries (docs/deliveries.md's
// table).
func TestTestEventCarriesItsKindsData(t *testing.T) {
	for _, tc := range []struct {
		kinds []eventKind
		data  string
	}{
		{[]eventKind{eventMessagePosted, eventMessageEdited, eventMessageDeleted, eventBotMentioned}, "message"},
		{[]eventKind{eventReactionAdded, eventReactionRemoved}, "reaction"},
		{[]eventKind{eventFileShared}, "file"},
		{[]eventKind{eventChannelMemberJoined, eventChannelMemberLeft}, "conversation and member"},
		{[]eventKind{eventInstallationUpdated, eventInstallationUninstalled}, "installation"},
		{[]eventKind{eventUserJoined, eventUserUpdated}, "user"},
		{[]eventKind{eventBotAdded, eventBotRemoved, eventChannelArchived, eventChannelCreated, eventChannelRenamed}, "conversation"},
	} {
		for _, k := range tc.kinds {
			ev := testEvent(k, 1, "inst", "bot")
			var got string
			switch {
			case ev.Message != nil:
				got = "message"
			case ev.Reaction != nil:
				got = "reaction"
			case ev.File != nil:
				got = "file"
			case ev.Member != nil && ev.Conversation != nil:
				got = "conversation and member"
			case ev.Installation != nil:
				got = "installation"
			case ev.User != nil && ev.User.Id != "":
				got = "user"
			case ev.Conversation != nil:
				got = "conversation"
			}
			if got != tc.data {
				t.Errorf("%s: test event with %q, want %q", k, got, tc.data)
			}
		}
	}
}

// A test event's example data is what the API could send: SPEC's values
// and shapes (a reaction of SPEC's list, ids that are UUIDs, the deleted
// message a tombstone, the edited one edited).
func TestTestEventDataIsWhatTheAPICouldSend(t *testing.T) {
	reactions := []string{"thumbs_up", "heart", "laugh", "celebrate", "eyes", "thinking", "thanks", "check"}
	bot := ids.New()
	for _, k := range []eventKind{eventReactionAdded, eventReactionRemoved} {
		if r := testEvent(k, 1, ids.New(), bot).Reaction; !slices.Contains(reactions, r.Reaction) {
			t.Errorf("%s: reaction %q is none of SPEC's values", k, r.Reaction)
		}
	}
	if f := testEvent(eventFileShared, 1, ids.New(), bot).File; !ids.Valid(f.UploadedByUserId) {
		t.Errorf("file.shared: uploadedByUserId %q is not a uuid", f.UploadedByUserId)
	}
	for _, k := range []eventKind{eventInstallationUpdated, eventInstallationUninstalled} {
		in := testEvent(k, 1, ids.New(), bot).Installation
		if !ids.Valid(in.WorkspaceId) || in.WorkspaceName == "" || in.KitSlug == "" || in.KitVersion == "" {
			t.Errorf("%s: workspace {id %q, name %q}, kit {slug %q, version %q}", k, in.WorkspaceId, in.WorkspaceName, in.KitSlug, in.KitVersion)
		}
	}
	for _, k := range []eventKind{eventInstallationUpdated, eventInstallationUninstalled} {
		// botId is shown only for an installation that has a bot (HasBot,
		// docs/decisions.md "A Kit without a bot"): a Kit's bot id for a
		// Kit with one, null for a Kit without (the trigger sends no id).
		if in := testEvent(k, 1, ids.New(), bot).Installation; !HasBot(in) || in.BotId != bot {
			t.Errorf("%s of a Kit with a bot: botId %q shown %v, want %q", k, in.BotId, HasBot(in), bot)
		}
		if in := testEvent(k, 1, ids.New(), "").Installation; HasBot(in) {
			t.Errorf("%s of a Kit without a bot: shows a bot %q", k, in.BotId)
		}
	}
	for _, k := range []eventKind{eventMessagePosted, eventMessageEdited, eventMessageDeleted, eventBotMentioned} {
		if m := testEvent(k, 1, ids.New(), "").Message; !ids.Valid(m.AuthorId) {
			t.Errorf("%s of a Kit without a bot: authorId %q is not a uuid", k, m.AuthorId)
		}
	}
	if m := testEvent(eventMessageDeleted, 1, ids.New(), bot).Message; m.DeletedAt == 0 {
		t.Errorf("message.deleted: deletedAt null, text %q: not a tombstone", m.Text)
	}
	if m := testEvent(eventMessageEdited, 1, ids.New(), bot).Message; m.EditedAt == 0 {
		t.Error("message.edited: editedAt null")
	}
}
