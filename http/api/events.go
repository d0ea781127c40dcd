package api

import (
	"encoding/json"
	"strconv"

	"github.com/kitd/kitd/internal/msgjson"
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
// The message events, nearly every event, are written by hand
// (appendMessage, as a post's answer is): encoding/json's reflection was
// 4% of a delivered event's CPU (bench/README.md, "Events on the write path"). The output is
// byte for byte eventBodyJSON's (TestEventBodyMatchesEncodingJSON).
func EventBody(ev *kitpb.Event, inst string) ([]byte, error) {
	if ev.Message != nil && ev.Conversation == nil && ev.Reaction == nil && ev.File == nil &&
		ev.Member == nil && ev.Installation == nil && ev.User == nil {
		return appendMessageEvent(make([]byte, 0, 512+len(ev.Message.Text)+len(ev.Message.Blocks)), ev, inst), nil
	}
	return eventBodyJSON(ev, inst)
}

// appendMessageEvent appends the body of ev, whose data is its message
// alone.
func appendMessageEvent(b []byte, ev *kitpb.Event, inst string) []byte {
	b = append(b, `{"eventId":`...)
	b = appendString(b, ev.Id)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, ev.Sequence, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"installationId":`...)
	b = appendString(b, inst)
	b = append(b, `,"occurredAt":`...)
	b = msgjson.AppendTime(b, ev.OccurredAt)
	b = append(b, `,"data":{"message":`...)
	b = appendMessage(b, ev.Message)
	b = append(b, '}')
	if ev.Test {
		b = append(b, `,"test":true`...)
	}
	return append(b, '}')
}

// eventBodyJSON is EventBody through encoding/json, for every kind.
func eventBodyJSON(ev *kitpb.Event, inst string) ([]byte, error) {
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
