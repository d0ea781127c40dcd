package cluster

import (
	"errors"

	"google.golang.org/protobuf/proto"
)

// Send delivers msg to the actor of kind with identity without a sender
// and without waiting: a tell, for notices whose loss the receiver makes
// good by other means (an actor that scans for what a lost notice named).
// It reports whether the actor could be located; a notice for a partition
// another member leads goes there (EnableForwarding), on a goroutine of its
// own. A message that reaches an activation after it stopped is dropped
// all the same.
func (h *Host) Send(kind, identity string, msg proto.Message) bool {
	pid, err := h.pid(kind, identity)
	if errors.Is(err, ErrNotHosted) && h.fwd.Load() != nil {
		go h.tell(kind, identity, msg)
		return true
	}
	if pid == nil || err != nil {
		return false
	}
	h.system.Root.Send(pid, msg)
	return true
}
