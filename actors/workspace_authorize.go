package actors

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

// handleAuthorize answers the app host's authorize page (check, then
// approve). ok is false for any other request.
func (a *workspaceActor) handleAuthorize(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.Authorize:
		reply, err = a.authorize(m)
		return reply, true, err
	}
	return nil, false, nil
}

// authorize checks an authorize request of OPERATIONS.md section 3 for the
// signed-in member: the Kit is installed here, redirect_uri is one of the
// installed manifest's oauth.redirectUrls (exact), a user authorization has
// user scopes and a code_challenge, a bot authorization is made by an admin
// or owner. With issue set it then asks the installation to record a code.
// Every failure is one the page shows; none leads to a redirect. Without a
// member (no session yet, or a denial) the member's checks are left out.
func (a *workspaceActor) authorize(m *kitpb.Authorize) (proto.Message, error) {
	var u *kitpb.User
	if m.UserId != "" || m.Issue {
		var err error
		if u, err = a.activeUser(m.UserId); err != nil {
			return nil, kiterr.New(kiterr.Forbidden, "the signed-in member is not active in this workspace")
		}
	}
	instID, installed := a.kits[m.KitId]
	if !installed {
		return nil, kiterr.Absent("kit")
	}
	inst, err := cluster.Call[*kitpb.InstallationReply](a.env.Host, KindInstallation, instID, &kitpb.GetInstallation{})
	if kiterr.CodeOf(err) == kiterr.NotFound || (err == nil && inst.Installation.Uninstalled) {
		return nil, kiterr.Absent("kit")
	}
	if err != nil {
		return nil, err
	}
	in := inst.Installation
	kit, err := cluster.Call[*kitpb.KitReply](a.env.Host, KindKit, m.KitId, &kitpb.GetKit{WorkspaceId: a.id})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, kiterr.Absent("kit")
	}
	if err != nil {
		return nil, err
	}
	if kit.Kit.State == KitSuspended {
		return nil, ErrKitSuspended
	}
	var man *manifest.Manifest
	for _, v := range kit.Versions {
		if v.Version == in.KitVersion {
			parsed, problems := manifest.Parse(v.Manifest)
			if len(problems) > 0 {
				return nil, fmt.Errorf("installed manifest %s@%s no longer parses", m.KitId, v.Version)
			}
			man = parsed
		}
	}
	if man == nil {
		return nil, fmt.Errorf("installed version %s of %s is missing", in.KitVersion, m.KitId)
	}
	if !man.AllowsRedirect(m.RedirectUri) {
		return nil, kiterr.Invalid("redirect_uri", "is not one of the Kit's registered redirect URLs")
	}
	scopes := in.BotScopes
	switch m.TokenType {
	case CallerUser:
		if !offersUserTokens(in) {
			return nil, kiterr.Invalid("token_type", "this Kit cannot be authorized for user tokens")
		}
		if m.CodeChallenge == "" {
			return nil, kiterr.Invalid("code_challenge", "is required for user tokens")
		}
		scopes = in.UserScopes
	case CallerBot:
		if !HasBot(in) {
			return nil, kiterr.Invalid("token_type", "this Kit has no bot: it cannot be authorized for bot tokens")
		}
		if u != nil && u.Role != "admin" && u.Role != "owner" {
			return nil, kiterr.New(kiterr.Forbidden, "a bot authorization needs a workspace admin or owner")
		}
	default:
		return nil, kiterr.Invalid("token_type", "must be bot or user")
	}
	if m.Issue && m.CheckShown && !slices.Equal(m.ShownScopes, scopes) {
		// The installation changed since the consent page: the member
		// approves only what was shown (as the install page refuses a
		// version that is no longer the one shown).
		return nil, kiterr.New(kiterr.Conflict, "the Kit's permissions changed since the consent page was shown")
	}
	if m.Issue {
		if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindInstallation, instID, &kitpb.IssueCode{
			CodeHash: m.CodeHash, TokenType: m.TokenType, UserId: u.Id, SessionId: m.SessionId,
			RedirectUri: m.RedirectUri, CodeChallenge: m.CodeChallenge, GrantId: ids.New(),
		}); err != nil {
			return nil, err
		}
	}
	return &kitpb.AuthorizeReply{
		KitDisplayName: in.KitDisplayName, KitSlug: in.KitSlug, WorkspaceName: a.ws.Name,
		Scopes: scopes, InstallationId: instID, User: u,
	}, nil
}
