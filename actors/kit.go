package actors

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// kitActor owns one Kit: its record and its versions. A registered version
// is immutable; versions only increase; publishing makes a version
// installable and applies its distribution.
type kitActor struct {
	env  *Env
	life lifecycle

	id       string
	kit      *kitpb.Kit // nil: no version uploaded yet
	versions []*kitpb.KitVersion
	domains  []*kitpb.KitDomain // in domain order
	// signing is the stored signing secret state (sealed), read on the
	// first GetSigningSecrets: the sender asks for every batch of
	// deliveries, and only this actor rotates it.
	signing *kitpb.SecretState
	// latest is the scopes of the latest version, parsed on the first
	// GetLatestScopes since the last upload: an upload has every node
	// load its tokens of the Kit again, each asking.
	latest *kitpb.LatestScopesReply
}

func (a *kitActor) Receive(ctx actorContext) { receive(a, &a.life, a.env, ctx) }

func (a *kitActor) exists() bool { return a.kit != nil }

func (a *kitActor) activate(identity string) error {
	a.id = identity
	kit := &kitpb.Kit{}
	found, err := load(a.env.Store, kitKey(a.id), kit)
	if err != nil || !found {
		return err
	}
	a.kit = kit
	err = scanRecords(a.env.Store, versionsPrefix(a.id), func() proto.Message { return &kitpb.KitVersion{} }, func(m proto.Message) {
		a.versions = append(a.versions, m.(*kitpb.KitVersion))
	})
	if err != nil {
		return err
	}
	return scanRecords(a.env.Store, domainsPrefix(a.id), func() proto.Message { return &kitpb.KitDomain{} }, func(m proto.Message) {
		a.domains = append(a.domains, m.(*kitpb.KitDomain))
	})
}

func (a *kitActor) handle(msg proto.Message) (proto.Message, error) {
	if _, ok := msg.(*kitpb.UploadVersion); !ok && a.kit == nil {
		return nil, kiterr.Absent("kit")
	}
	switch m := msg.(type) {
	case *kitpb.UploadVersion:
		return a.upload(m)
	case *kitpb.PublishVersion:
		if m.WorkspaceId != a.kit.WorkspaceId {
			return nil, kiterr.Absent("kit")
		}
		v := a.version(m.Version)
		if v == nil {
			return nil, kiterr.Absent("version")
		}
		return a.publish(v)
	case *kitpb.GetKit:
		// Other workspaces see a Kit only once it is installable for them.
		if m.WorkspaceId != "" && m.WorkspaceId != a.kit.WorkspaceId && a.kit.LatestPublishedVersion == "" {
			return nil, kiterr.Absent("kit")
		}
		return &kitpb.KitReply{Kit: a.kit, Versions: a.versions, Domains: a.domains}, nil
	case *kitpb.GetKitDetail:
		return a.kitDetail(m)
	case *kitpb.GetLatestScopes:
		return a.latestScopes()
	}
	return askConcerns(a, KindKit, msg, kitConcerns[:])
}

// kitConcerns take the requests the switch of handle leaves, one
// concern (and file) each.
var kitConcerns = [...]concern[*kitActor]{
	(*kitActor).handleSecrets,
	(*kitActor).handleDomains,
	(*kitActor).handleInstallLink,
	(*kitActor).handleState,
}

func (a *kitActor) version(v string) *kitpb.KitVersion {
	for _, kv := range a.versions {
		if kv.Version == v {
			return kv
		}
	}
	return nil
}

// latestScopes answers the scopes the latest version, published or not,
// requests: they limit every token of the Kit's installations, whatever
// version each runs, so a version that drops a scope takes it from them
// at once (docs/api.md "Scopes"); one that adds a scope gives it to no
// token before a member consents to it.
func (a *kitActor) latestScopes() (proto.Message, error) {
	if a.latest != nil && a.latest.Version == a.kit.LatestVersion {
		return a.latest, nil
	}
	latest, err := scopesOfLatest(a.kit, a.versions)
	if err != nil {
		return nil, err
	}
	a.latest = latest
	return a.latest, nil
}

// scopesOfLatest are the scopes kit's latest version requests, among its
// versions.
func scopesOfLatest(kit *kitpb.Kit, versions []*kitpb.KitVersion) (*kitpb.LatestScopesReply, error) {
	i := slices.IndexFunc(versions, func(v *kitpb.KitVersion) bool { return v.Version == kit.LatestVersion })
	if i < 0 {
		return nil, fmt.Errorf("kit %s: its latest version %s is not among its versions", kit.Id, kit.LatestVersion)
	}
	v := versions[i]
	man, problems := manifest.Parse(v.Manifest)
	if len(problems) > 0 {
		return nil, fmt.Errorf("stored manifest of %s@%s no longer parses", kit.Id, v.Version)
	}
	return &kitpb.LatestScopesReply{Version: v.Version, BotScopes: man.BotScopes(), UserScopes: man.UserScopes()}, nil
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

// VersionProblem says why man may not be uploaded to kit (nil: a new Kit),
// where existing is its version of the same number (nil: none), or "":
// the same manifest again changes nothing and is allowed; another
// manifest under a registered number is not, nor a new number not higher
// than the latest registered. The upload (409) and the validate route (a
// problem at version) ask it alike.
func VersionProblem(kit *kitpb.Kit, existing *kitpb.KitVersion, man *manifest.Manifest) string {
	if existing != nil {
		if existing.ManifestHash != man.Hash() {
			return "is already registered with a different manifest"
		}
		return ""
	}
	if kit != nil && kit.LatestVersion != "" {
		latest, err := manifest.ParseVersion(kit.LatestVersion)
		if err == nil && man.Version.Compare(latest) <= 0 {
			return "must be higher than the latest registered version"
		}
	}
	return ""
}

func (a *kitActor) upload(m *kitpb.UploadVersion) (proto.Message, error) {
	man, problems := manifest.Parse(m.Manifest)
	if len(problems) > 0 {
		return nil, kiterr.Invalid(manifestPath(problems[0].Path), problems[0].Message)
	}
	if a.kit != nil && a.kit.WorkspaceId != m.WorkspaceId {
		return nil, kiterr.Absent("kit")
	}
	ver := man.Version.String()
	existing := a.version(ver)
	if p := VersionProblem(a.kit, existing, man); p != "" {
		return nil, kiterr.New(kiterr.Conflict, "version "+p)
	}
	if existing != nil {
		if m.Publish && !existing.Published {
			return a.publish(existing)
		}
		return &kitpb.VersionReply{Kit: a.kit, Version: existing}, nil
	}
	now := nanos(a.env.Clock.Now())
	kit := &kitpb.Kit{}
	if a.kit != nil {
		kit = proto.Clone(a.kit).(*kitpb.Kit)
	} else {
		kit = &kitpb.Kit{Id: a.id, Slug: man.Slug, Distribution: "private", State: "active", WorkspaceId: m.WorkspaceId, CreatedAt: now}
	}
	kit.DisplayName = man.DefaultDisplayName()
	kit.LatestVersion = ver
	v := &kitpb.KitVersion{
		Id: m.VersionId, KitId: a.id, Version: ver, CreatedAt: now,
		ConsentHash: man.ConsentHash(), ManifestHash: man.Hash(),
		Distribution: man.Distribution, Manifest: m.Manifest,
	}
	if m.Publish {
		if err := Publishable(man, VerifiedDomainNames(a.domains)); err != nil {
			return nil, err
		}
		v.Published, v.PublishedAt = true, now
		kit.LatestPublishedVersion, kit.Distribution = ver, man.Distribution
	}
	// The workspace's entry first, the Kit's records last: a kill between
	// leaves an entry that leads to no Kit, and an upload a retry does
	// whole.
	index, b := a.env.newBatch(), a.env.newBatch()
	if a.kit == nil {
		index.Set(workspaceKitKey(m.WorkspaceId, a.id), nil)
	}
	put(b, kitKey(a.id), kit)
	put(b, versionKey(a.id, man.Version), v)
	a.env.putLog(b, partition.Of(a.id), a.id, a.auditVersion("version.uploaded", ver))
	if v.Published {
		a.env.putLog(b, partition.Of(a.id), a.id, a.auditVersion("version.published", ver))
	}
	if err := a.env.commitInSteps(index, b); err != nil {
		return nil, fmt.Errorf("upload version %s of %s: %w", ver, a.id, err)
	}
	a.kit = kit
	a.versions = append(a.versions, v)
	// The new version limits every token of the Kit (latestScopes): the
	// principals cached anywhere are read again.
	a.env.Invalidator.KitVersionsChanged(a.id)
	return &kitpb.VersionReply{Kit: kit, Version: v, Created: true}, nil
}

func (a *kitActor) publish(v *kitpb.KitVersion) (proto.Message, error) {
	if v.Published {
		return &kitpb.VersionReply{Kit: a.kit, Version: v}, nil
	}
	man, problems := manifest.Parse(v.Manifest)
	if len(problems) > 0 {
		return nil, fmt.Errorf("stored manifest of %s@%s no longer parses", a.id, v.Version)
	}
	if err := Publishable(man, VerifiedDomainNames(a.domains)); err != nil {
		return nil, err
	}
	now := nanos(a.env.Clock.Now())
	nv := proto.Clone(v).(*kitpb.KitVersion)
	nv.Published, nv.PublishedAt = true, now
	kit := proto.Clone(a.kit).(*kitpb.Kit)
	// The Kit's distribution is its latest published version's: publishing
	// an older draft must not share (or stop sharing) the newer one.
	if cur, err := manifest.ParseVersion(kit.LatestPublishedVersion); err != nil || man.Version.Compare(cur) > 0 {
		kit.LatestPublishedVersion = nv.Version
		kit.Distribution = man.Distribution
	}
	b := a.env.newBatch()
	put(b, kitKey(a.id), kit)
	put(b, versionKey(a.id, man.Version), nv)
	a.env.putLog(b, partition.Of(a.id), a.id, a.auditVersion("version.published", nv.Version))
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("publish %s of %s: %w", v.Version, a.id, err)
	}
	a.kit = kit
	for i, kv := range a.versions {
		if kv.Version == nv.Version {
			a.versions[i] = nv
		}
	}
	return &kitpb.VersionReply{Kit: kit, Version: nv}, nil
}

// auditVersion is the developer log entry of an upload or publish; status
// is the version.
func (a *kitActor) auditVersion(event, version string) *kitpb.DevLogEntry {
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, event, "")
	e.Status = version
	return e
}

// Publishable checks the distribution rules of docs/api.md "Kit version": an
// unlisted or directory Kit needs a verified domain covering every endpoint
// host (409 naming the first uncovered host's index). A directory Kit also
// needs what manifest.DirectoryProblems lists (409 naming the first missing
// field). The front end asks it of a new Kit's first upload with publish
// (no domain verified yet) before the slug is claimed.
func Publishable(man *manifest.Manifest, verifiedDomains []string) error {
	if man.Distribution == "private" {
		return nil
	}
	if man.Distribution == "directory" {
		if p := man.DirectoryProblems(); len(p) > 0 {
			path := manifestPath(p[0].Path)
			return &kiterr.Error{Code: kiterr.Conflict, Path: path,
				Message: "a directory Kit needs more before it is published: " + path + ": " + p[0].Message}
		}
	}
	if n := len(UnverifiedHosts(man.EndpointHosts(), verifiedDomains)); n > 0 {
		return kiterr.New(kiterr.Conflict, fmt.Sprintf("every endpoint host needs a verified domain before an %s Kit is published; %d have none (see unverifiedHosts in the Kit detail)", man.Distribution, n))
	}
	return nil
}

// manifestPath places a manifest problem inside the request body.
func manifestPath(p string) string {
	if p == "" {
		return "manifest"
	}
	return "manifest." + p
}
