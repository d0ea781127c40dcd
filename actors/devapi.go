package actors

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The developer API's reads (SPEC.md 4.10; docs/decisions.md "Developer
// API"): GET /dev/me, POST /dev/kits/validate, GET /dev/kits and
// GET /dev/kits/{kitId}.

// handleDevAPI answers the workspace's developer API requests; ok is false
// for any other request.
func (a *workspaceActor) handleDevAPI(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.GetDeveloperToken:
		r, err := a.developerToken(m.TokenId)
		return r, true, err
	case *kitpb.TouchDeveloperToken:
		r, err := a.touchDeveloperToken(m)
		return r, true, err
	}
	return nil, false, nil
}

func (a *workspaceActor) developerToken(tokenID string) (*kitpb.DeveloperTokenReply, error) {
	_, cred, err := a.loadDeveloperToken(tokenID)
	if err != nil {
		return nil, err
	}
	return &kitpb.DeveloperTokenReply{Credential: cred, Sandbox: a.ws.Sandbox}, nil
}

// LastUsedGranularity is how stale a developer token's lastUsedAt may be:
// each node records a use at most this often per token, so tracking costs
// one small write per token and minute, not one per request.
const LastUsedGranularity = time.Minute

func (a *workspaceActor) touchDeveloperToken(m *kitpb.TouchDeveloperToken) (proto.Message, error) {
	hash, cred, err := a.loadDeveloperToken(m.TokenId)
	if err != nil {
		return nil, err
	}
	if m.At <= cred.LastUsedAt {
		return &kitpb.Ok{}, nil
	}
	cred.LastUsedAt = m.At
	b := a.env.Store.NewBatch()
	put(b, credentialKey(hash), cred)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("record use of developer token %s: %w", m.TokenId, err)
	}
	return &kitpb.Ok{}, nil
}

func (a *workspaceActor) loadDeveloperToken(tokenID string) (hash []byte, cred *kitpb.Credential, err error) {
	hash, err = a.env.Store.Get(developerTokenKey(a.id, tokenID))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil, kiterr.Absent("developer token")
	}
	if err != nil {
		return nil, nil, err
	}
	cred = &kitpb.Credential{}
	found, err := load(a.env.Store, credentialKey(hash), cred)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, kiterr.Absent("developer token")
	}
	return hash, cred, nil
}

// kitDetail answers GetKitDetail: the Kit, its versions and the metadata of
// its secrets (hashes cleared), for the owning workspace only.
func (a *kitActor) kitDetail(m *kitpb.GetKitDetail) (proto.Message, error) {
	if m.WorkspaceId != a.kit.WorkspaceId {
		return nil, kiterr.Absent("kit")
	}
	link, err := a.installLinkState()
	if err != nil {
		return nil, err
	}
	r := &kitpb.KitDetailReply{Kit: a.kit, Versions: a.versions, Domains: a.domains, InstallLink: link}
	for _, which := range []string{SecretClient, SecretSigning} {
		k, _, err := a.secretKey(which)
		if err != nil {
			return nil, err
		}
		s := &kitpb.SecretState{}
		found, err := load(a.env.Store, k, s)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		meta := &kitpb.SecretState{CreatedAt: s.CreatedAt, Generation: s.Generation}
		if s.PreviousExpiresAt > nanos(a.env.Clock.Now()) {
			meta.PreviousExpiresAt = s.PreviousExpiresAt
		}
		if which == SecretClient {
			r.ClientSecret = meta
		} else {
			r.SigningSecret = meta
		}
	}
	return r, nil
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
	kit, err := cluster.Call[*kitpb.KitReply](a.env.Node, KindKit, a.owner.KitId, &kitpb.GetKit{WorkspaceId: m.WorkspaceId})
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

// WorkspaceKits returns the ids of the Kits the workspace owns, in creation
// order. It reads the kits/<ws>/<kit> index the kit actors write (each entry
// is committed before the upload that created it answers).
func WorkspaceKits(env *Env, workspaceID string) ([]string, error) {
	prefix := workspaceKitsPrefix(workspaceID)
	var out []string
	err := env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		out = append(out, string(k[len(prefix):]))
		return true
	})
	return out, err
}

// InstalledHere reports whether the workspace has an active installation of
// the Kit. It reads the workspace's ws/<ws>/k/<kit> record and the
// installation's record; both are committed before the calls that change
// them answer.
func InstalledHere(env *Env, workspaceID, kitID string) (bool, error) {
	id, err := InstallationHere(env, workspaceID, kitID)
	return id != "", err
}

// InstallationHere is the id of the workspace's active installation of the
// Kit; "" when it has none.
func InstallationHere(env *Env, workspaceID, kitID string) (string, error) {
	instID, err := env.Store.Get(installedKitKey(workspaceID, kitID))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	in := &kitpb.Installation{}
	found, err := load(env.Store, installationKey(string(instID)), in)
	if err != nil || !found || in.Uninstalled {
		return "", err
	}
	return in.Id, nil
}
