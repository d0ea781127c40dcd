package actors

import "testing"

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
