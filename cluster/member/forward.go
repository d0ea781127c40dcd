package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// How a request for a partition this node does not lead reaches its
// leader: in one hop, to the leader this node's replica of the group last
// heard of. When that node does not lead it any more (it answers
// unavailable) or cannot be reached before the request was sent, the
// request goes once more, to whoever leads by then: a stale entry costs
// one more hop. During an election (no leader known) it waits up to
// leaderWait for one. A request whose connection broke after it was sent
// may have run: the client gets unavailable, and retries with its
// Idempotency-Key as after any 503.

const (
	forwardTimeout = 10 * time.Second      // one forwarded request, as cluster.Config.RequestTimeout
	leaderWait     = 2 * time.Second       // for an election to end
	leaderPoll     = 20 * time.Millisecond // how often a waiting request looks again
	retryPause     = 50 * time.Millisecond // before the one more hop
	kitpbPrefix    = "kit.v1."             // the only messages a member forwards
)

var _ cluster.Forwarder = (*Member)(nil)

// Forward sends a request to the leader of p and returns its reply.
func (m *Member) Forward(p partition.ID, kind, identity string, msg proto.Message) (proto.Message, error) {
	req, err := forwarded(kind, identity, msg, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	id := m.reqs.next()
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			time.Sleep(retryPause)
		}
		addr, here, err := m.leaderAddr(ctx, p)
		if here {
			return nil, cluster.ErrNotHosted // the caller runs it here
		}
		if err != nil {
			return nil, err
		}
		res, err := m.pt.Call(ctx, addr, req, id)
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, peer.ErrUnavailable) || kiterr.CodeOf(err) == kiterr.Unavailable:
			last = err // nothing ran: try whoever leads now
			continue
		case errors.Is(err, peer.ErrConnLost) || errors.Is(err, context.DeadlineExceeded):
			return nil, kiterr.Unreachable("the leader's connection broke: the request may have run")
		}
		return nil, err // the actor's answer (a kiterr) or a refusal
	}
	return nil, kiterr.Unreachable(fmt.Sprintf("partition %d: %v", p, last))
}

// Tell hands a notice to the actor on p's leader, without waiting for the
// actor (cluster.Node.Send). A lost notice is made good by the receiver.
func (m *Member) Tell(p partition.ID, kind, identity string, msg proto.Message) {
	req, err := forwarded(kind, identity, msg, true)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	addr, here, err := m.leaderAddr(ctx, p)
	if err != nil || here {
		return
	}
	if _, err := m.pt.Call(ctx, addr, req, m.reqs.next()); err != nil {
		m.log.Debug("notice not delivered", "kind", kind, "err", err)
	}
}

// leaderAddr is the node-to-node address of p's leader, waiting for an
// election to end; here reports that this node leads p.
func (m *Member) leaderAddr(ctx context.Context, p partition.ID) (addr string, here bool, err error) {
	deadline := time.Now().Add(leaderWait)
	for {
		var to uint64
		if r := m.started.Load(); r != nil {
			to, _ = r.Leader(p)
		}
		if to == m.id {
			return "", true, nil
		}
		if to != 0 {
			if a, ok := m.addr(to); ok {
				return a, false, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", false, kiterr.Unreachable(fmt.Sprintf("partition %d has no leader yet", p))
		}
		time.Sleep(leaderPoll)
	}
}

func forwarded(kind, identity string, msg proto.Message, tell bool) (*kitpb.Forwarded, error) {
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("member: forward %T: %w", msg, err)
	}
	return &kitpb.Forwarded{Kind: kind, Identity: identity, Request: b,
		RequestType: string(msg.ProtoReflect().Descriptor().FullName()), Tell: tell}, nil
}

// runForwarded runs a request another member forwarded, here and only
// here: a node that does not host its partition answers unavailable, and
// the sender asks the new leader.
func (m *Member) runForwarded(r *kitpb.Forwarded) (proto.Message, error) {
	msg, err := decodeKitpb(r.GetRequestType(), r.GetRequest())
	if err != nil {
		return nil, err
	}
	if r.GetTell() {
		m.cfg.Node.Send(r.GetKind(), r.GetIdentity(), msg)
		return &kitpb.Ok{}, nil
	}
	res, err := m.cfg.Node.RequestHere(r.GetKind(), r.GetIdentity(), msg)
	if errors.Is(err, cluster.ErrNotHosted) {
		return nil, kiterr.Unreachable("not the leader here")
	}
	return res, err
}

// decodeKitpb decodes a message of kitd's own package, and nothing else:
// a peer names the type, and must not make this node build any type the
// binary links.
func decodeKitpb(name string, b []byte) (proto.Message, error) {
	if !strings.HasPrefix(name, kitpbPrefix) {
		return nil, fmt.Errorf("member: refused to decode %q", name)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return nil, fmt.Errorf("member: unknown message %q", name)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(b, msg); err != nil {
		return nil, fmt.Errorf("member: decode %q: %w", name, err)
	}
	return msg, nil
}

// kitpbTypes is every message of kitd's package: the replies a forwarded
// request may come back with.
func kitpbTypes() []proto.Message {
	var out []proto.Message
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), kitpbPrefix) {
			out = append(out, mt.New().Interface())
		}
		return true
	})
	return out
}
