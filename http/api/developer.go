package api

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

const (
	minManifestLen = 2
	maxManifestLen = 65536
)

var developerOnly = []string{actors.CallerDeveloper}

// developer serves the developer API under /api/v1/dev (SPEC.md 4.10).
func (s *Server) developer(ctx *fasthttp.RequestCtx, seg []string) {
	method := string(ctx.Method())
	switch {
	case method == "GET" && route(seg, "me"):
		s.devMe(ctx)
	case method == "POST" && route(seg, "kits", "validate"):
		s.validateManifest(ctx)
	case method == "GET" && route(seg, "kits"):
		s.listKits(ctx)
	case method == "GET" && route(seg, "kits", "*"):
		s.kitDetail(ctx, seg[1])
	case method == "GET" && route(seg, "kits", "*", "logs"):
		s.kitLogs(ctx, seg[1])
	case method == "POST" && route(seg, "kits", "versions"):
		s.uploadVersion(ctx)
	case method == "POST" && route(seg, "kits", "*", "versions", "*", "publish"):
		s.publishVersion(ctx, seg[1], seg[3])
	case s.domainsAPI(ctx, method, seg):
	case s.installLinkAPI(ctx, method, seg):
	default:
		s.fail(ctx, kiterr.Absent("route"))
	}
}

type versionResponse struct {
	KitID          string      `json:"kitId"`
	Created        bool        `json:"created"`
	Version        versionView `json:"version"`
	InstallationID *string     `json:"installationId"`
}

func (s *Server) uploadVersion(ctx *fasthttp.RequestCtx) {
	p := s.authorize(ctx, developerOnly, "", limits.Developer)
	if p == nil {
		return
	}
	var body struct {
		Manifest *string `json:"manifest"`
		Publish  *bool   `json:"publish"`
	}
	err := s.decode(ctx, &body, maxJSONBody, false)
	if err == nil {
		err = requireString("manifest", body.Manifest, minManifestLen, maxManifestLen)
	}
	var man *manifest.Manifest
	if err == nil {
		man, err = parseManifest(*body.Manifest)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	r, err := s.registerVersion(p.Caller.WorkspaceId, man, *body.Manifest, body.Publish != nil && *body.Publish)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeVersion(ctx, fasthttp.StatusCreated, p.Caller.WorkspaceId, r)
}

// parseManifest parses a manifest of a request body: the first problem is
// a validation error at its path inside the body.
func parseManifest(text string) (*manifest.Manifest, error) {
	man, problems := manifest.Parse(text)
	if len(problems) > 0 {
		path := "manifest"
		if problems[0].Path != "" {
			path += "." + problems[0].Path
		}
		return nil, kiterr.Invalid(path, problems[0].Message)
	}
	return man, nil
}

// registerVersion claims the manifest's slug for the workspace's Kit (a
// new Kit on first use) and uploads text as a version of it.
func (s *Server) registerVersion(workspaceID string, man *manifest.Manifest, text string, publish bool) (*kitpb.VersionReply, error) {
	slug, err := ask[*kitpb.SlugReply](s, actors.KindSlug, man.Slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: workspaceID})
	if err != nil {
		return nil, err
	}
	return ask[*kitpb.VersionReply](s, actors.KindKit, slug.KitId, &kitpb.UploadVersion{
		KitId: slug.KitId, WorkspaceId: workspaceID, VersionId: ids.New(), Manifest: text, Publish: publish,
	})
}

func (s *Server) publishVersion(ctx *fasthttp.RequestCtx, kitID, version string) {
	p := s.authorize(ctx, developerOnly, "", limits.Developer)
	if p == nil {
		return
	}
	if err := versionShape("version", version); err != nil {
		s.fail(ctx, err)
		return
	}
	if !s.validID(ctx, "kit", kitID) {
		return
	}
	r, err := ask[*kitpb.VersionReply](s, actors.KindKit, kitID, &kitpb.PublishVersion{WorkspaceId: p.Caller.WorkspaceId, Version: version})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeVersion(ctx, fasthttp.StatusOK, p.Caller.WorkspaceId, r)
}

// writeVersion answers an upload or publish; installationId is the
// developer's workspace's active installation of the Kit, if it has one.
func (s *Server) writeVersion(ctx *fasthttp.RequestCtx, status int, workspaceID string, r *kitpb.VersionReply) {
	inst, err := actors.InstallationHere(s.env, workspaceID, r.Kit.Id)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeJSON(ctx, status, versionResponse{KitID: r.Kit.Id, Created: r.Created, Version: viewVersion(r.Version), InstallationID: optString(inst)})
}

func versionShape(path, v string) error {
	if _, err := manifest.ParseVersion(v); err != nil {
		return kiterr.Invalid(path, "must be MAJOR.MINOR.PATCH without leading zeros")
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }
