package actors

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

// slugActor owns one slug: which Kit it belongs to. One actor per slug makes
// the global uniqueness check a single lookup, never a scan.
type slugActor struct {
	env  *Env
	life lifecycle

	slug  string
	owner *kitpb.ClaimSlug // nil: free
}

func (a *slugActor) Receive(ctx actorContext) { receive(a, &a.life, a.env, ctx) }

func (a *slugActor) exists() bool { return a.owner != nil }

func (a *slugActor) activate(identity string) error {
	a.slug = identity
	owner := &kitpb.ClaimSlug{}
	found, err := load(a.env.Store, slugKey(identity), owner)
	if found {
		a.owner = owner
	}
	return err
}

func (a *slugActor) handle(msg proto.Message) (proto.Message, error) {
	if c, ok := msg.(*kitpb.CheckSlug); ok {
		return a.checkSlug(c)
	}
	m, ok := msg.(*kitpb.ClaimSlug)
	if !ok {
		return nil, unknownRequest(KindSlug, msg)
	}
	if a.owner == nil && manifest.ReservedSlug(a.slug) {
		// Only new claims: a Kit keeps a slug reserved after it claimed it.
		return nil, kiterr.Invalid("manifest.slug", "is reserved")
	}
	if a.owner != nil {
		if a.owner.WorkspaceId != m.WorkspaceId {
			return nil, &kiterr.Error{Code: kiterr.SlugTaken, Message: "manifest.slug: belongs to another Kit", Path: "manifest.slug"}
		}
		return &kitpb.SlugReply{KitId: a.owner.KitId}, nil
	}
	owner := &kitpb.ClaimSlug{Slug: a.slug, KitId: m.KitId, WorkspaceId: m.WorkspaceId}
	b := a.env.newBatch()
	put(b, slugKey(a.slug), owner)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("claim slug: %w", err)
	}
	a.owner = owner
	return &kitpb.SlugReply{KitId: m.KitId, Claimed: true}, nil
}

// checkSlug answers CheckSlug: whether the slug is reserved or another
// workspace's, and the asking workspace's Kit of it with its latest
// published manifest. It changes nothing.
func (a *slugActor) checkSlug(m *kitpb.CheckSlug) (proto.Message, error) {
	r := &kitpb.SlugCheckReply{}
	switch {
	case a.owner == nil:
		r.Reserved = manifest.ReservedSlug(a.slug)
		return r, nil
	case a.owner.WorkspaceId != m.WorkspaceId:
		r.Taken = true
		return r, nil
	}
	// The slug is claimed before the Kit's first version is stored: a
	// failed first upload leaves a claim without a Kit.
	kit, err := cluster.Call[*kitpb.KitReply](a.env.Host, KindKit, a.owner.KitId, &kitpb.GetKit{WorkspaceId: m.WorkspaceId})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("check slug %s: %w", a.slug, err)
	}
	r.KitId = kit.Kit.Id
	r.VerifiedDomains = VerifiedDomainNames(kit.Domains)
	if pub := kit.Kit.LatestPublishedVersion; pub != "" {
		for _, v := range kit.Versions {
			if v.Version == pub {
				r.PublishedManifest, r.PublishedVersion = v.Manifest, v.Version
			}
		}
	}
	return r, nil
}
