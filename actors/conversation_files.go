package actors

import "google.golang.org/protobuf/proto"

// handleFiles answers the conversation's file and reaction requests; ok is
// false for any other request.
func (a *conversationActor) handleFiles(msg proto.Message) (reply proto.Message, ok bool, err error) {
	return nil, false, nil
}
