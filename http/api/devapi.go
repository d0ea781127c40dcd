package api

import (
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/kitclient/dev"
	"github.com/kitd/kitd/proto/kitpb"
)

// The developer API's reads (docs/api.md "Developer API"): /dev/me, /dev/kits/validate,
// /dev/kits, /dev/kits/{kitId} and its logs (docs/decisions.md "Developer
// API"). Domains and dev-install are in devapi_domains.go.

func (s *Server) devMe(in call) (reply, error) {
	r, err := ask[*kitpb.DeveloperTokenReply](s, actors.KindWorkspace, in.p.Caller.WorkspaceId, &kitpb.GetDeveloperToken{TokenId: in.p.TokenID})
	if err != nil {
		return reply{}, err
	}
	c := r.Credential
	return jsonReply(fasthttp.StatusOK, dev.Me{WorkspaceID: c.WorkspaceId, UserID: c.UserId, Sandbox: r.Sandbox, Token: dev.DevToken{
		ID: c.TokenId, Name: c.Name, CreatedAt: isoTime(c.CreatedAt), ExpiresAt: isoTime(c.ExpiresAt),
		LastUsedAt: optTime(c.LastUsedAt), // minute granularity (actors.LastUsedGranularity)
		RevokedAt:  optTime(c.RevokedAt),
	}})
}

// validateManifest checks a manifest as an upload would, without changing
// anything: the schema, the slug (reserved, another workspace's), the
// consent summary and the consent difference to the latest published
// version of the workspace's Kit of that slug.
func (s *Server) validateManifest(in call) (reply, error) {
	var body struct {
		Manifest *string `json:"manifest"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireString("manifest", body.Manifest, minManifestLen, maxManifestLen)
	}
	if err != nil {
		return reply{}, err
	}
	res := dev.Validation{Problems: manifest.Problems{}, Warnings: manifest.Problems{}, Hosts: []string{}, UnverifiedHosts: []string{}}
	man, problems := manifest.Parse(*body.Manifest)
	if len(problems) > 0 {
		res.Problems = problems
		return jsonReply(fasthttp.StatusOK, res)
	}
	chk, err := ask[*kitpb.SlugCheckReply](s, actors.KindSlug, man.Slug, &kitpb.CheckSlug{WorkspaceId: in.p.Caller.WorkspaceId})
	if err != nil {
		return reply{}, err
	}
	switch {
	case chk.Reserved:
		res.Problems = append(res.Problems, manifest.Problem{Path: "slug", Message: "is reserved"})
	case chk.Taken:
		res.Problems = append(res.Problems, manifest.Problem{Path: "slug", Message: "belongs to another Kit"})
	}
	installed := false
	if chk.KitId != "" {
		res.ExistingKitID = &chk.KitId
		if installed, err = actors.InstalledHere(s.env, in.p.Caller.WorkspaceId, chk.KitId); err != nil {
			return reply{}, err
		}
		// As an upload would: a version number taken by another manifest,
		// or not past the latest.
		k, err := ask[*kitpb.KitReply](s, actors.KindKit, chk.KitId, &kitpb.GetKit{WorkspaceId: in.p.Caller.WorkspaceId})
		if err != nil {
			return reply{}, err
		}
		var existing *kitpb.KitVersion
		for _, v := range k.Versions {
			if v.Version == man.Version.String() {
				existing = v
			}
		}
		if p := actors.VersionProblem(k.Kit, existing, man); p != "" {
			res.Problems = append(res.Problems, manifest.Problem{Path: "version", Message: p})
		}
	}
	if w := man.Warnings(); len(w) > 0 {
		res.Warnings = w
	}
	owned := true
	consent := man.ConsentSummary(manifest.SummaryOptions{Available: true, Installed: installed, OwnedByWorkspace: &owned})
	res.Consent = &consent
	if hosts := man.EndpointHosts(); len(hosts) > 0 {
		res.Hosts = hosts
		res.UnverifiedHosts = actors.UnverifiedHosts(hosts, chk.VerifiedDomains)
	}
	if chk.PublishedManifest != "" {
		if prev := s.published.Parse(chk.KitId, chk.PublishedVersion, chk.PublishedManifest); prev != nil {
			d := manifest.Diff(prev, man)
			res.Diff = &d
		}
	}
	res.Valid = len(res.Problems) == 0
	return jsonReply(fasthttp.StatusOK, res)
}

func (s *Server) listKits(in call) (reply, error) {
	ws := in.p.Caller.WorkspaceId
	kitIDs, err := actors.WorkspaceKits(s.env, ws)
	if err != nil {
		return reply{}, err
	}
	kits := make([]kitView, 0, len(kitIDs))
	for _, id := range kitIDs {
		r, err := ask[*kitpb.KitReply](s, actors.KindKit, id, &kitpb.GetKit{WorkspaceId: ws})
		if kiterr.CodeOf(err) == kiterr.NotFound {
			continue // an entry a kill left of an upload that never landed (docs/cluster.md, "Global indexes")
		}
		if err != nil {
			return reply{}, err
		}
		here, err := actors.InstalledHere(s.env, ws, id)
		if err != nil {
			return reply{}, err
		}
		kits = append(kits, viewKit(r.Kit, here))
	}
	return jsonReply(fasthttp.StatusOK, dev.KitList{Kits: kits})
}

type secretMetaView struct {
	Generation        int32   `json:"generation"`
	CreatedAt         string  `json:"createdAt"`
	PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
}

type kitDetailView struct {
	Kit         kitView       `json:"kit"`
	Versions    []versionView `json:"versions"`
	Domains     []domainView  `json:"domains"`
	Credentials struct {
		ClientSecret *struct {
			CreatedAt string `json:"createdAt"`
		} `json:"clientSecret,omitempty"`
		SigningSecret *secretMetaView `json:"signingSecret,omitempty"`
	} `json:"credentials"`
	InstallLink struct {
		Active    bool    `json:"active"`
		CreatedAt *string `json:"createdAt"`
	} `json:"installLink"`
	EndpointHosts   []string `json:"endpointHosts"`
	UnverifiedHosts []string `json:"unverifiedHosts"`
}

func (s *Server) kitDetail(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	ws := in.p.Caller.WorkspaceId
	r, err := ask[*kitpb.KitDetailReply](s, actors.KindKit, kitID, &kitpb.GetKitDetail{WorkspaceId: ws})
	if err != nil {
		return reply{}, err
	}
	here, err := actors.InstalledHere(s.env, ws, kitID)
	if err != nil {
		return reply{}, err
	}
	d := kitDetailView{Kit: viewKit(r.Kit, here), Versions: make([]versionView, len(r.Versions)), Domains: make([]domainView, 0, len(r.Domains)),
		EndpointHosts: []string{}, UnverifiedHosts: []string{}}
	for i, v := range r.Versions {
		d.Versions[i] = viewVersion(v)
		if v.Version == r.Kit.LatestVersion {
			if man, problems := manifest.Parse(v.Manifest); len(problems) == 0 {
				if hosts := man.EndpointHosts(); len(hosts) > 0 {
					d.EndpointHosts, d.UnverifiedHosts = hosts, actors.UnverifiedHosts(hosts, actors.VerifiedDomainNames(r.Domains))
				}
			}
		}
	}
	for _, dom := range r.Domains {
		d.Domains = append(d.Domains, viewDomain(r.Kit.Id, dom))
	}
	if c := r.ClientSecret; c != nil {
		d.Credentials.ClientSecret = &struct {
			CreatedAt string `json:"createdAt"`
		}{isoTime(c.CreatedAt)}
	}
	if c := r.SigningSecret; c != nil {
		d.Credentials.SigningSecret = &secretMetaView{Generation: c.Generation, CreatedAt: isoTime(c.CreatedAt), PreviousExpiresAt: optTime(c.PreviousExpiresAt)}
	}
	if l := r.InstallLink; l != nil {
		d.InstallLink.Active, d.InstallLink.CreatedAt = l.Active, optTime(l.CreatedAt) // never the URL: its secret is shown once
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Detail kitDetailView `json:"detail"`
	}{d})
}

// logSources are the sources of the developer log (docs/api.md "Developer log entry"), listed in
// every logs response.
var logSources = []string{actors.LogSourceToolCall, actors.LogSourceAudit, actors.LogSourceDelivery}

const maxLogLimit = 100

func (s *Server) kitLogs(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	list := "devlog:" + kitID
	pg, err := parsePage(in.ctx, list, maxLogLimit)
	if err == nil {
		err = idPosition(pg.position)
	}
	rawSource, sourceErr := queryParam(in.ctx.QueryArgs(), "source")
	rawLevel, levelErr := queryParam(in.ctx.QueryArgs(), "level")
	source, level := string(rawSource), string(rawLevel)
	switch {
	case err != nil:
	case sourceErr != nil:
		err = sourceErr
	case levelErr != nil:
		err = levelErr
	case rawSource != nil && !slices.Contains(logSources, source):
		err = kiterr.Invalid("source", "must be one of tool_call, audit, delivery")
	case rawLevel != nil && level != actors.LogLevelInfo && level != actors.LogLevelError:
		err = kiterr.Invalid("level", "must be info or error")
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.KitReply](s, actors.KindKit, kitID, &kitpb.GetKit{WorkspaceId: in.p.Caller.WorkspaceId})
	if err == nil && r.Kit.WorkspaceId != in.p.Caller.WorkspaceId {
		err = kiterr.Absent("kit")
	}
	if err != nil {
		return reply{}, err
	}
	var keep func(*kitpb.DevLogEntry) bool
	if source != "" || level != "" {
		keep = func(e *kitpb.DevLogEntry) bool {
			return (source == "" || e.Source == source) && (level == "" || e.Level == level)
		}
	}
	entries, more, err := actors.ReadDevLog(s.env, kitID, pg.position, pg.limit, keep)
	if err != nil {
		return reply{}, err
	}
	out := make([]logEntryView, len(entries))
	for i, e := range entries {
		out[i] = viewLogEntry(e)
	}
	var next *string
	if len(entries) > 0 {
		next = cursorFor(list, entries[len(entries)-1].Id, more)
	}
	return jsonReply(fasthttp.StatusOK, dev.LogPage{Entries: out, NextCursor: next, Sources: logSources})
}
