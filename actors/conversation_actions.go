package actors

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/blocks"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// errNoSuchAction is the one 404 of an interaction the member may not make:
// a message it cannot see, a deleted one, one that no Kit bot of this
// conversation wrote, or no element with that actionId.
var errNoSuchAction = kiterr.Absent("message")

// handleMemberActions answers what a member's slash command or interaction
// asks of a conversation (docs/deliveries.md "Member actions"); ok is
// false for any other request. Both need a conversation the member may
// write in: the Kit's answer is posted there.
func (a *conversationActor) handleMemberActions(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.SeeConversation:
		if err := a.writable(m.Caller); err != nil {
			return nil, true, err
		}
		return &kitpb.Ok{}, true, nil
	case *kitpb.FindAction:
		reply, err = a.findAction(m)
		return reply, true, err
	}
	return nil, false, nil
}

// findAction finds the element the member acts on, the installation whose
// bot wrote its message (a bot that left the conversation no longer gets
// its interactions), and the value its Kit receives: a button's own, or
// the option the member chose, which must be one of the element's.
func (a *conversationActor) findAction(m *kitpb.FindAction) (proto.Message, error) {
	if err := a.writable(m.Caller); err != nil {
		if kiterr.CodeOf(err) == kiterr.NotFound {
			return nil, errNoSuchAction
		}
		return nil, err
	}
	msg, err := a.messageByID(m.MessageId)
	if err != nil {
		if kiterr.CodeOf(err) == kiterr.NotFound {
			return nil, errNoSuchAction
		}
		return nil, err
	}
	// A tombstone keeps no blocks: it has no element to find.
	bot, isBot := a.bots[msg.AuthorId]
	if msg.AuthorKind != "bot" || !isBot {
		return nil, errNoSuchAction
	}
	el, found := blocks.FindElement(msg.Blocks, m.ActionId)
	if !found {
		return nil, errNoSuchAction
	}
	value := el.Value
	if el.Type != "button" {
		if m.Value == nil || !slices.Contains(el.Options, *m.Value) {
			return nil, kiterr.Invalid("value", "must be the value of one of the element's options")
		}
		value = *m.Value
	}
	return &kitpb.ActionReply{InstallationId: bot.InstallationId, Value: value}, nil
}
