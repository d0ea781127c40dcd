package api

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/kitclient/dev"
	"github.com/kitd/kitd/proto/kitpb"
)

const (
	minManifestLen = 2
	maxManifestLen = 65536
)

func (s *Server) uploadVersion(in call) (reply, error) {
	var body struct {
		Manifest *string `json:"manifest"`
		Publish  *bool   `json:"publish"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireString("manifest", body.Manifest, minManifestLen, maxManifestLen)
	}
	var man *manifest.Manifest
	if err == nil {
		man, err = parseManifest(*body.Manifest)
	}
	if err != nil {
		return reply{}, err
	}
	r, err := s.registerVersion(in.p.Caller.WorkspaceId, man, *body.Manifest, body.Publish != nil && *body.Publish)
	if err != nil {
		return reply{}, err
	}
	return s.versionReply(fasthttp.StatusCreated, in.p.Caller.WorkspaceId, r)
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
	if publish {
		// A new Kit has no verified domain: a publish its first upload
		// cannot pass is refused before the slug is claimed, so that the
		// refusal changes nothing.
		chk, err := ask[*kitpb.SlugCheckReply](s, actors.KindSlug, man.Slug, &kitpb.CheckSlug{WorkspaceId: workspaceID})
		if err != nil {
			return nil, err
		}
		if chk.KitId == "" && !chk.Taken && !chk.Reserved {
			if err := actors.Publishable(man, nil); err != nil {
				return nil, err
			}
		}
	}
	slug, err := ask[*kitpb.SlugReply](s, actors.KindSlug, man.Slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: workspaceID})
	if err != nil {
		return nil, err
	}
	return ask[*kitpb.VersionReply](s, actors.KindKit, slug.KitId, &kitpb.UploadVersion{
		KitId: slug.KitId, WorkspaceId: workspaceID, VersionId: ids.New(), Manifest: text, Publish: publish,
	})
}

func (s *Server) publishVersion(in call) (reply, error) {
	kitID, version := in.param("kitId"), in.param("version")
	if err := versionShape("version", version); err != nil {
		return reply{}, err
	}
	if err := validID("kit", kitID); err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.VersionReply](s, actors.KindKit, kitID, &kitpb.PublishVersion{WorkspaceId: in.p.Caller.WorkspaceId, Version: version})
	if err != nil {
		return reply{}, err
	}
	return s.versionReply(fasthttp.StatusOK, in.p.Caller.WorkspaceId, r)
}

// versionReply answers an upload or publish; installationId is the
// developer's workspace's active installation of the Kit, if it has one.
func (s *Server) versionReply(status int, workspaceID string, r *kitpb.VersionReply) (reply, error) {
	inst, err := actors.InstallationHere(s.env, workspaceID, r.Kit.Id)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(status, dev.VersionResult{KitID: r.Kit.Id, Created: r.Created, Version: viewVersion(r.Version), InstallationID: optString(inst)})
}

func versionShape(path, v string) error {
	if _, err := manifest.ParseVersion(v); err != nil {
		return kiterr.Invalid(path, "must be MAJOR.MINOR.PATCH without leading zeros")
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }
