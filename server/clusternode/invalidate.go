package clusternode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster/membership"
	"github.com/kitd/kitd/proto/kitpb"
)

// invalidateTimeout bounds the wait for every member's word that it
// dropped what it cached. It is longer than a raft lease (under a second
// with the default tick): a member that did not answer in time cannot
// answer a request either, for it can neither reach a leader nor keep a
// lease of its own.
const invalidateTimeout = 2 * time.Second

// Invalidator makes every change of actors.Invalidator reach every
// member before it is answered: a token revoked through one node is
// refused through any other on the next request (docs/cluster.md
// "Goals"). local is this node's own authenticator.
func (m *Node) Invalidator(local actors.Invalidator) actors.Invalidator {
	m.local.Store(&local)
	return broadcaster{m}
}

type broadcaster struct{ m *Node }

func (b broadcaster) InstallationChanged(id string) { b.send("installation", []byte(id)) }
func (b broadcaster) CredentialRevoked(hash []byte) { b.send("credential", hash) }
func (b broadcaster) UserChanged(id string)         { b.send("user", []byte(id)) }
func (b broadcaster) SessionEnded(id string)        { b.send("session", []byte(id)) }
func (b broadcaster) SigningSecretsChanged(kitID string) {
	b.send("signing", []byte(kitID))
}
func (b broadcaster) KitVersionsChanged(kitID string) { b.send("kit_versions", []byte(kitID)) }
func (b broadcaster) KitStateChanged(kitID string)    { b.send("kit_state", []byte(kitID)) }

// send applies the change here, then tells every other member that may
// serve requests, at once, and waits for them all.
func (b broadcaster) send(kind string, id []byte) {
	m := b.m
	if err := m.invalidateHere(kind, id); err != nil {
		m.log.Error("invalidate", "err", err)
	}
	req := &kitpb.Invalidate{Kind: kind, Id: id}
	ctx, cancel := context.WithTimeout(context.Background(), invalidateTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, mb := range m.ms.Nodes() {
		if mb.Name == m.cfg.NodeName || mb.Meta.PeerAddr == "" || mb.State == membership.StateDead || mb.State == membership.StateLeft {
			continue
		}
		wg.Add(1)
		go func(name, addr string) {
			defer wg.Done()
			if _, err := m.pt.Call(ctx, addr, req, m.reqs.next()); err != nil {
				m.log.Warn("a member did not confirm an invalidation", "member", name, "kind", kind, "err", err)
			}
		}(mb.Name, mb.Meta.PeerAddr)
	}
	wg.Wait()
}

// invalidateHere applies a change to this node's authenticator.
func (m *Node) invalidateHere(kind string, id []byte) error {
	l := m.local.Load()
	if l == nil {
		return nil
	}
	switch local := *l; kind {
	case "installation":
		local.InstallationChanged(string(id))
	case "credential":
		if len(id) != 32 {
			return fmt.Errorf("member: a credential hash of %d bytes", len(id))
		}
		local.CredentialRevoked(id)
	case "user":
		local.UserChanged(string(id))
	case "session":
		local.SessionEnded(string(id))
	case "signing":
		local.SigningSecretsChanged(string(id))
	case "kit_versions":
		local.KitVersionsChanged(string(id))
	case "kit_state":
		local.KitStateChanged(string(id))
	default:
		return fmt.Errorf("member: unknown invalidation %q", kind)
	}
	return nil
}
