package actors

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// A Kit's state (docs/api.md "Kit state"): an operator suspends an
// abusive Kit and resumes it later. Suspension is not revocation: nothing
// of the Kit is deleted or ended, and resuming restores all of it.
const (
	KitActive    = "active"
	KitSuspended = "suspended"
)

// ErrKitSuspended is the answer to whatever a suspended Kit (its tokens,
// its client credentials, its webhooks) or a member (an install, an
// authorization, an action) asks of it.
var ErrKitSuspended = kiterr.New(kiterr.Forbidden, "the Kit is suspended")

// ErrorKitSuspended is the developer log's errorCode of a call (a
// command, an interaction, a tool run) that waited for a slot and found
// its Kit suspended: it was not made.
const ErrorKitSuspended = "kit_suspended"

// handleState answers SetKitState: the only way a Kit's state changes.
func (a *kitActor) handleState(msg proto.Message) (reply proto.Message, ok bool, err error) {
	if m, is := msg.(*kitpb.SetKitState); is {
		reply, err = a.setState(m.State)
		return reply, true, err
	}
	return nil, false, nil
}

// setState stores the Kit's new state, durably, before every node is told
// (Invalidator.KitStateChanged) and the operator answered. The same state
// again writes nothing and answers the Kit as it is, but tells the nodes
// again: the node that changed it may have been killed before it told
// them.
func (a *kitActor) setState(state string) (proto.Message, error) {
	if state != KitActive && state != KitSuspended {
		return nil, fmt.Errorf("kit %s: unknown state %q", a.id, state)
	}
	if a.kit.State == state {
		a.env.Invalidator.KitStateChanged(a.id)
		return &kitpb.KitReply{Kit: a.kit}, nil
	}
	kit := proto.Clone(a.kit).(*kitpb.Kit)
	kit.State = state
	event := "kit.suspended"
	if state == KitActive {
		event = "kit.resumed"
		kit.ResumedAt = nanos(a.env.Clock.Now())
	}
	b := a.env.newBatch()
	put(b, kitKey(a.id), kit)
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, event, "")
	e.Status = state
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("set state of %s: %w", a.id, err)
	}
	a.kit = kit
	a.env.Invalidator.KitStateChanged(a.id)
	return &kitpb.KitReply{Kit: kit}, nil
}

// kitStateTTL bounds how long a node keeps a Kit's state: invalidations
// drop it the moment it changes; the bound is for a member that missed
// one (as the sender's lookups).
const kitStateTTL = time.Minute

// kitStates is what a node keeps of Kits' states: the authenticator, the
// webhooks, the member actions and the sender ask it for each use, and
// only a suspension or a resume changes it.
type kitStates struct {
	mu sync.RWMutex
	m  map[string]kitStateEntry
	// gen counts invalidations: a read that began before one keeps
	// nothing, since it may have read what the invalidation replaced.
	gen uint64
}

type kitStateEntry struct {
	KitState
	until int64 // unix nanoseconds, service clock
}

// KitState is what the nodes need of a Kit's state: whether it is
// suspended, and when it was last resumed (Kit.resumed_at; 0: never).
type KitState struct {
	Suspended bool
	ResumedAt int64 // service clock, unix nanoseconds
}

// KitSuspended reports whether the Kit is suspended (KitStateOf).
func (e *Env) KitSuspended(kitID string) (bool, error) {
	st, err := e.KitStateOf(kitID)
	return st.Suspended, err
}

// KitStateOf is the Kit's state, from what this node keeps or else from
// the Kit's actor. An unknown Kit is active and never resumed.
func (e *Env) KitStateOf(kitID string) (KitState, error) {
	s := &e.kitStates
	now := nanos(e.Clock.Now())
	s.mu.RLock()
	v, ok := s.m[kitID]
	gen := s.gen
	s.mu.RUnlock()
	if ok && now < v.until {
		return v.KitState, nil
	}
	r, err := cluster.Call[*kitpb.KitReply](e.Host, KindKit, kitID, &kitpb.GetKit{})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return KitState{}, nil
	}
	if err != nil {
		return KitState{}, fmt.Errorf("load the state of kit %s: %w", kitID, err)
	}
	st := KitState{Suspended: r.Kit.State == KitSuspended, ResumedAt: r.Kit.ResumedAt}
	s.mu.Lock()
	if s.gen == gen {
		if s.m == nil || len(s.m) >= maxCached {
			s.m = make(map[string]kitStateEntry)
		}
		s.m[kitID] = kitStateEntry{st, now + int64(kitStateTTL)}
	}
	s.mu.Unlock()
	return st, nil
}

// forget drops what the node keeps of the Kit's state.
func (s *kitStates) forget(kitID string) {
	s.mu.Lock()
	s.gen++
	delete(s.m, kitID)
	s.mu.Unlock()
}

// refuseIfSuspended answers ErrKitSuspended for a suspended Kit.
func refuseIfSuspended(env *Env, kitID string) error {
	suspended, err := env.KitSuspended(kitID)
	if err == nil && suspended {
		err = ErrKitSuspended
	}
	return err
}
