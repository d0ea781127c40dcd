package actors

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Install links (docs/decisions.md "Install links"). A Kit has at most one:
// its record (installLinkKey: hash and creation time) and the index
// installLinkIndexKey → kit id let the install page find the Kit from the
// secret with one read. Both are written and deleted in one batch, so a
// replaced or deleted link stops working at the commit. The record is read
// on demand: links are rare next to the Kit's other requests.

// errLinkAbsent is the one answer for an install link that does not work:
// unknown, replaced, deleted or ended by a private publish look the same.
var errLinkAbsent = kiterr.Absent("install link")

// handleInstallLink answers the kit actor's install link requests; ok is
// false for any other request.
func (a *kitActor) handleInstallLink(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.CreateInstallLink:
		if m.WorkspaceId != a.kit.WorkspaceId {
			return nil, true, kiterr.Absent("kit")
		}
		reply, err = a.createInstallLink(m)
	case *kitpb.DeleteInstallLink:
		if m.WorkspaceId != a.kit.WorkspaceId {
			return nil, true, kiterr.Absent("kit")
		}
		reply, err = a.deleteInstallLink()
	case *kitpb.OpenInstallLink:
		reply, err = a.openInstallLink(m)
	case *kitpb.InstallLinkUsed:
		reply, err = a.installLinkUsed(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// privatePublishes counts the Kit's published private versions. Published
// versions are immutable, so the count only grows.
func (a *kitActor) privatePublishes() int32 {
	var n int32
	for _, v := range a.versions {
		if v.Published && v.Distribution == "private" {
			n++
		}
	}
	return n
}

// shareable reports whether another workspace may install the Kit, the
// rule of installable: a private Kit installs only in its own workspace.
func (a *kitActor) shareable() bool {
	return a.kit.LatestPublishedVersion != "" && a.kit.Distribution != "private"
}

// currentLink returns the stored link (nil: none) and whether it works. A
// private publish after the link was made ends it for good: making the Kit
// private is how a developer stops sharing it, and publishing it unlisted
// again must not bring old URLs back.
func (a *kitActor) currentLink() (*kitpb.InstallLink, bool, error) {
	l := &kitpb.InstallLink{}
	found, err := load(a.env.Store, installLinkKey(a.id), l)
	if err != nil {
		return nil, false, fmt.Errorf("load install link of %s: %w", a.id, err)
	}
	if !found {
		return nil, false, nil
	}
	return l, a.shareable() && a.privatePublishes() == l.PrivatePublishes, nil
}

func (a *kitActor) createInstallLink(m *kitpb.CreateInstallLink) (proto.Message, error) {
	if !a.shareable() {
		return nil, kiterr.New(kiterr.Conflict, "an install link needs a published unlisted or directory version: a private Kit installs only in its own workspace")
	}
	if len(m.LinkHash) != len(ids.Hash("")) {
		return nil, fmt.Errorf("install link of %s: hash of %d bytes", a.id, len(m.LinkHash))
	}
	cur, active, err := a.currentLink()
	if err != nil {
		return nil, err
	}
	next := &kitpb.InstallLink{Hash: m.LinkHash, CreatedAt: nanos(a.env.Clock.Now()), PrivatePublishes: a.privatePublishes()}
	b := a.env.newBatch()
	if cur != nil {
		b.Delete(installLinkIndexKey(cur.Hash))
	}
	put(b, installLinkKey(a.id), next)
	b.Set(installLinkIndexKey(next.Hash), []byte(a.id))
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "install_link.created", "")
	if active {
		e.Status = "replaced"
	}
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("store install link of %s: %w", a.id, err)
	}
	return &kitpb.InstallLinkReply{Active: true, CreatedAt: next.CreatedAt}, nil
}

func (a *kitActor) deleteInstallLink() (proto.Message, error) {
	cur, active, err := a.currentLink()
	if err != nil {
		return nil, err
	}
	if !active {
		return nil, errLinkAbsent
	}
	b := a.env.newBatch()
	b.Delete(installLinkKey(a.id))
	b.Delete(installLinkIndexKey(cur.Hash))
	a.env.putLog(b, partition.Of(a.id), a.id, newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "install_link.deleted", ""))
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("delete install link of %s: %w", a.id, err)
	}
	return &kitpb.InstallLinkReply{}, nil
}

func (a *kitActor) installLinkState() (*kitpb.InstallLinkReply, error) {
	cur, active, err := a.currentLink()
	if err != nil || !active {
		return &kitpb.InstallLinkReply{}, err
	}
	return &kitpb.InstallLinkReply{Active: true, CreatedAt: cur.CreatedAt}, nil
}

// openInstallLink answers what a working link installs: the latest
// published version.
func (a *kitActor) openInstallLink(m *kitpb.OpenInstallLink) (proto.Message, error) {
	cur, active, err := a.currentLink()
	if err != nil {
		return nil, err
	}
	if !active || !ids.Equal(cur.Hash, m.LinkHash) {
		return nil, errLinkAbsent
	}
	v := a.version(a.kit.LatestPublishedVersion)
	if v == nil {
		return nil, fmt.Errorf("latest published version %s of %s is missing", a.kit.LatestPublishedVersion, a.id)
	}
	return &kitpb.OpenInstallLinkReply{Kit: a.kit, Version: v}, nil
}

// installLinkUsed logs an install made through the link. The install is
// committed by the workspace and installation actors before this is asked
// (the kit actor may not call them), so the entry never reports an install
// that did not happen; a crash in between loses the entry, not the install.
func (a *kitActor) installLinkUsed(m *kitpb.InstallLinkUsed) (proto.Message, error) {
	b := a.env.newBatch()
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "install_link.used", m.InstallationId)
	e.Status = m.Version
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("log install link use of %s: %w", a.id, err)
	}
	return &kitpb.Ok{}, nil
}
