package actors

import "google.golang.org/protobuf/proto"

// handleWebhooks answers what incoming webhooks ask of a conversation; ok is
// false for any other request.
func (a *conversationActor) handleWebhooks(msg proto.Message) (reply proto.Message, ok bool, err error) {
	return nil, false, nil
}
