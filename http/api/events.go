package api

import (
	"encoding/json"

	"github.com/kitd/kitd/proto/kitpb"
)

// The body of an event delivery (docs/deliveries.md): data holds the
// resource in the views the Web API answers with, so a Kit reads an event
// with the same types as a GET.

type eventBody struct {
	EventID        string    `json:"eventId"`
	Sequence       uint64    `json:"sequence"`
	Type           string    `json:"type"`
	InstallationID string    `json:"installationId"`
	OccurredAt     string    `json:"occurredAt"`
	Data           eventData `json:"data"`
	// Test marks an event of kit trigger: its data names nothing stored.
	Test bool `json:"test,omitempty"`
}

type eventData struct {
	Message      *messageView      `json:"message,omitempty"`
	Conversation *conversationView `json:"conversation,omitempty"`
	Reaction     *reactionEvent    `json:"reaction,omitempty"`
	File         *fileView         `json:"file,omitempty"`
	Member       *memberView       `json:"member,omitempty"`
	Installation *installationView `json:"installation,omitempty"`
	User         *userView         `json:"user,omitempty"`
}

type reactionEvent struct {
	MessageID string `json:"messageId"`
	Reaction  string `json:"reaction"`
	UserID    string `json:"userId"`
}

// EventBody is the JSON body that delivers ev to the installation inst.
func EventBody(ev *kitpb.Event, inst string) ([]byte, error) {
	body := eventBody{
		EventID: ev.Id, Sequence: ev.Sequence, Type: ev.Type, InstallationID: inst,
		OccurredAt: isoTime(ev.OccurredAt), Test: ev.Test,
	}
	d := &body.Data
	if ev.Message != nil {
		v := viewMessage(ev.Message)
		d.Message = &v
	}
	if ev.Conversation != nil {
		v := viewConversation(ev.Conversation)
		d.Conversation = &v
	}
	if r := ev.Reaction; r != nil {
		d.Reaction = &reactionEvent{MessageID: r.MessageId, Reaction: r.Reaction, UserID: r.UserId}
	}
	if ev.File != nil {
		v := viewFile(ev.File)
		d.File = &v
	}
	if m := ev.Member; m != nil {
		d.Member = &memberView{UserID: m.UserId, JoinedAt: isoTime(m.JoinedAt)}
	}
	if ev.Installation != nil {
		v := viewInstallation(ev.Installation)
		d.Installation = &v
	}
	if ev.User != nil {
		// The workspace wrote the email only for a bot that may read it.
		v := viewUser(ev.User, true)
		d.User = &v
	}
	return json.Marshal(body)
}
