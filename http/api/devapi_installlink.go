package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/app"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Install links (docs/api.md "Kit detail" installLink; docs/decisions.md
// "Install links"): the developer makes one shareable URL per unlisted or
// directory Kit, and an admin of any workspace who opens it sees the Kit's
// consent summary and installs it. The secret is shown once, in the create
// answer; the kit actor keeps its SHA-256 only.

type installLinkView struct {
	Active    bool    `json:"active"`
	CreatedAt *string `json:"createdAt"`
	URL       string  `json:"url,omitempty"` // only in the create answer
}

func installLinkReply(status int, v installLinkView) (reply, error) {
	return jsonReply(status, struct {
		InstallLink installLinkView `json:"installLink"`
	}{v})
}

// createInstallLink makes a new link, replacing the current one: the old
// URL stops working when the kit actor commits the new one.
func (s *Server) createInstallLink(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	secret := ids.NewSecret(ids.InstallLink)
	h := ids.Hash(secret)
	r, err := ask[*kitpb.InstallLinkReply](s, actors.KindKit, kitID, &kitpb.CreateInstallLink{WorkspaceId: in.p.Caller.WorkspaceId, LinkHash: h[:]})
	if err != nil {
		return reply{}, err
	}
	in.carriesSecret() // the only answer that carries the link's secret
	return installLinkReply(fasthttp.StatusCreated, installLinkView{
		Active: true, CreatedAt: optTime(r.CreatedAt), URL: s.publicURL + app.InstallPath + "?link=" + secret,
	})
}

func (s *Server) deleteInstallLink(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	if _, err := ask[*kitpb.InstallLinkReply](s, actors.KindKit, kitID, &kitpb.DeleteInstallLink{WorkspaceId: in.p.Caller.WorkspaceId}); err != nil {
		return reply{}, err
	}
	return installLinkReply(fasthttp.StatusOK, installLinkView{})
}
