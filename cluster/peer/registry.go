package peer

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Registry is the set of messages a transport accepts, by full protobuf
// name. The receiver resolves a name only here, never in the global
// protobuf registry: a peer can make it build kitd's own request and reply
// types and nothing else, and an unknown name is refused, not a panic (as
// it is in protoactor's remote).
type Registry struct {
	types map[string]protoreflect.MessageType
}

// NewRegistry returns a registry of the types of the given messages (their
// values are not used: pass zero values, `&kitpb.GetUser{}`).
func NewRegistry(prototypes ...proto.Message) *Registry {
	r := &Registry{types: make(map[string]protoreflect.MessageType, len(prototypes))}
	for _, m := range prototypes {
		t := m.ProtoReflect().Type()
		r.types[string(t.Descriptor().FullName())] = t
	}
	return r
}

// lookup returns the type named name, or nil. Indexing a map by
// string(bytes) does not allocate.
func (r *Registry) lookup(name []byte) protoreflect.MessageType {
	return r.types[string(name)]
}
