package actors

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// MaxKitDomains bounds the domains one Kit may claim (docs/decisions.md
// "Domains").
const MaxKitDomains = 20

// Domain verification methods.
const (
	DomainMethodDNS       = "dns"
	DomainMethodWellKnown = "well_known"
)

// handleDomains answers the kit actor's domain requests and the dev-install
// report; ok is false for any other request. Domains live in memory beside
// the versions (at most MaxKitDomains) and under domainKey. Proof
// checks run outside the actor: it only records their outcome.
func (a *kitActor) handleDomains(msg proto.Message) (reply proto.Message, ok bool, err error) {
	var ws string
	switch m := msg.(type) {
	case *kitpb.AddDomain:
		ws = m.WorkspaceId
	case *kitpb.GetDomain:
		ws = m.WorkspaceId
	case *kitpb.RecordDomainCheck:
		ws = m.WorkspaceId
	case *kitpb.RemoveDomain:
		ws = m.WorkspaceId
	case *kitpb.DevInstalled:
		ws = m.WorkspaceId
	default:
		return nil, false, nil
	}
	// A Kit's domains are its own workspace's business only.
	if ws != a.kit.WorkspaceId {
		return nil, true, kiterr.Absent("kit")
	}
	switch m := msg.(type) {
	case *kitpb.AddDomain:
		reply, err = a.addDomain(m)
	case *kitpb.GetDomain:
		d := a.domain(m.Domain)
		if d == nil {
			return nil, true, kiterr.Absent("domain")
		}
		reply = &kitpb.DomainReply{Domain: d, KitId: a.id}
	case *kitpb.RecordDomainCheck:
		reply, err = a.recordDomainCheck(m)
	case *kitpb.RemoveDomain:
		reply, err = a.removeDomain(m)
	case *kitpb.DevInstalled:
		reply, err = a.devInstalled(m)
	}
	return reply, true, err
}

func (a *kitActor) domain(name string) *kitpb.KitDomain {
	i := slices.IndexFunc(a.domains, func(d *kitpb.KitDomain) bool { return d.Domain == name })
	if i < 0 {
		return nil
	}
	return a.domains[i]
}

func (a *kitActor) addDomain(m *kitpb.AddDomain) (proto.Message, error) {
	if cur := a.domain(m.Domain); cur != nil {
		if cur.Method == m.Method {
			return &kitpb.DomainReply{Domain: cur, KitId: a.id}, nil
		}
		next := proto.Clone(cur).(*kitpb.KitDomain)
		next.Method = m.Method
		if err := a.commitDomain(next, a.domainEntry("domain.method_changed", next, LogLevelInfo)); err != nil {
			return nil, err
		}
		return &kitpb.DomainReply{Domain: next, KitId: a.id}, nil
	}
	if len(a.domains) >= MaxKitDomains {
		return nil, kiterr.New(kiterr.Conflict, fmt.Sprintf("a Kit has at most %d domains", MaxKitDomains))
	}
	d := &kitpb.KitDomain{Domain: m.Domain, Method: m.Method, Challenge: m.Challenge, CreatedAt: nanos(a.env.Clock.Now())}
	if err := a.commitDomain(d, a.domainEntry("domain.added", d, LogLevelInfo)); err != nil {
		return nil, err
	}
	return &kitpb.DomainReply{Domain: d, KitId: a.id, Created: true}, nil
}

func (a *kitActor) recordDomainCheck(m *kitpb.RecordDomainCheck) (proto.Message, error) {
	cur := a.domain(m.Domain)
	// The domain was removed (or removed and added again, with a new
	// challenge) while its proof was checked: the check proved nothing
	// about what is stored now.
	if cur == nil || cur.Challenge != m.Challenge {
		return nil, kiterr.Absent("domain")
	}
	if cur.Verified {
		return &kitpb.DomainReply{Domain: cur, KitId: a.id}, nil
	}
	if !m.Ok {
		b := a.env.newBatch()
		a.env.putLog(b, partition.Of(a.id), a.id, a.domainEntry("domain.verify_failed", cur, LogLevelError))
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("log failed check of %s for %s: %w", m.Domain, a.id, err)
		}
		return &kitpb.DomainReply{Domain: cur, KitId: a.id}, nil
	}
	next := proto.Clone(cur).(*kitpb.KitDomain)
	next.Verified, next.VerifiedAt = true, nanos(a.env.Clock.Now())
	if err := a.commitDomain(next, a.domainEntry("domain.verified", next, LogLevelInfo)); err != nil {
		return nil, err
	}
	return &kitpb.DomainReply{Domain: next, KitId: a.id}, nil
}

func (a *kitActor) removeDomain(m *kitpb.RemoveDomain) (proto.Message, error) {
	cur := a.domain(m.Domain)
	if cur == nil {
		return nil, kiterr.Absent("domain")
	}
	b := a.env.newBatch()
	b.Delete(domainKey(a.id, cur.Domain))
	a.env.putLog(b, partition.Of(a.id), a.id, a.domainEntry("domain.removed", cur, LogLevelInfo))
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("remove domain %s of %s: %w", m.Domain, a.id, err)
	}
	a.domains = slices.DeleteFunc(a.domains, func(d *kitpb.KitDomain) bool { return d.Domain == cur.Domain })
	return &kitpb.Ok{}, nil
}

// commitDomain stores d with its log entry and then keeps it in memory, in
// domain order.
func (a *kitActor) commitDomain(d *kitpb.KitDomain, entry *kitpb.DevLogEntry) error {
	b := a.env.newBatch()
	put(b, domainKey(a.id, d.Domain), d)
	a.env.putLog(b, partition.Of(a.id), a.id, entry)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("store domain %s of %s: %w", d.Domain, a.id, err)
	}
	i, found := slices.BinarySearchFunc(a.domains, d.Domain, func(x *kitpb.KitDomain, name string) int {
		return strings.Compare(x.Domain, name)
	})
	if found {
		a.domains[i] = d
	} else {
		a.domains = slices.Insert(a.domains, i, d)
	}
	return nil
}

// domainEntry is the audit entry of a domain change; status is the method.
func (a *kitActor) domainEntry(event string, d *kitpb.KitDomain, level string) *kitpb.DevLogEntry {
	e := newLogEntry(a.env, LogSourceAudit, level, event, "")
	e.Status = d.Method
	return e
}

// VerifiedDomainNames lists the names of the verified domains among ds.
func VerifiedDomainNames(ds []*kitpb.KitDomain) []string {
	var out []string
	for _, d := range ds {
		if d.Verified {
			out = append(out, d.Domain)
		}
	}
	return out
}

// UnverifiedHosts lists the hosts that no verified domain covers, in the
// order given.
func UnverifiedHosts(hosts, verifiedDomains []string) []string {
	out := []string{}
	for _, h := range hosts {
		if !slices.ContainsFunc(verifiedDomains, func(d string) bool { return domainproof.Covers(d, h) }) {
			out = append(out, h)
		}
	}
	return out
}

// devInstalled logs a dev-install and makes the Kit's first signing secret
// when it has none, in one batch.
func (a *kitActor) devInstalled(m *kitpb.DevInstalled) (proto.Message, error) {
	k, _, err := a.secretKey(SecretSigning)
	if err != nil {
		return nil, err
	}
	cur := &kitpb.SecretState{}
	found, err := load(a.env.Store, k, cur)
	if err != nil {
		return nil, err
	}
	b := a.env.newBatch()
	reply := &kitpb.DevInstalledReply{}
	if !found && len(m.SigningSecretHash) > 0 {
		reply.SigningSecret = &kitpb.SecretState{Hash: m.SigningSecretHash, CreatedAt: nanos(a.env.Clock.Now()), Generation: 1}
		if reply.SigningSecret.Sealed, err = a.env.seal(m.SigningSecret); err != nil {
			return nil, err
		}
		put(b, k, reply.SigningSecret)
	}
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "dev_install", m.InstallationId)
	e.Status = m.Version
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("record dev-install of %s: %w", a.id, err)
	}
	if reply.SigningSecret != nil {
		// What signingSecrets read before, none, is stale now.
		a.signing = reply.SigningSecret
		a.env.Invalidator.SigningSecretsChanged(a.id)
	}
	return reply, nil
}
