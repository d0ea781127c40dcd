package actors

import "google.golang.org/protobuf/proto"

// handleWebhooks answers the installation's webhook requests; ok is false
// for any other request.
func (a *installationActor) handleWebhooks(msg proto.Message) (reply proto.Message, ok bool, err error) {
	return nil, false, nil
}
