package api

import (
	"regexp"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/kitclient"
	"github.com/kitd/kitd/proto/kitpb"
)

// rotateBotToken: POST /auth/rotate (docs/api.md "Auth").
func (s *Server) rotateBotToken(in call) (reply, error) {
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	token, _ := bearer(in.ctx)
	oldHash := ids.Hash(string(token))
	secret := ids.NewSecret(ids.BotToken)
	newHash := ids.Hash(secret)
	r, err := ask[*kitpb.RotateBotTokenReply](s, actors.KindInstallation, in.p.Caller.InstallationId,
		&kitpb.RotateBotToken{OldHash: oldHash[:], NewHash: newHash[:]})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		err = kiterr.New(kiterr.InvalidToken, "the token is missing, malformed, expired or revoked")
	}
	if err != nil {
		return reply{}, err
	}
	in.carriesSecret()
	return jsonReply(fasthttp.StatusOK, kitclient.Rotation{Token: secret, PreviousTokenExpiresAt: isoTime(r.PreviousExpiresAt)})
}

// codeVerifierShape is RFC 7636's code_verifier (docs/api.md "Auth").
var codeVerifierShape = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

type kitAccessBody struct {
	GrantType    *string `json:"grantType"`
	ClientID     *string `json:"clientId"`
	ClientSecret *string `json:"clientSecret"`
	Code         *string `json:"code"`
	RedirectURI  *string `json:"redirectUri"`
	CodeVerifier *string `json:"codeVerifier"`
	RefreshToken *string `json:"refreshToken"`
}

func (b *kitAccessBody) check() error {
	err := input.FirstError(
		input.RequireString("grantType", b.GrantType, 1, 40),
		input.RequireUUID("clientId", b.ClientID),
		input.RequireString("clientSecret", b.ClientSecret, 1, 512),
	)
	if err == nil {
		err = input.OneOf("grantType", *b.GrantType, "authorization_code", "refresh_token")
	}
	if err != nil {
		return err
	}
	if *b.GrantType == "refresh_token" {
		return input.RequireString("refreshToken", b.RefreshToken, 1, 512)
	}
	err = input.FirstError(input.RequireString("code", b.Code, 1, 512), input.RequireString("redirectUri", b.RedirectURI, 1, 2000))
	if err == nil && b.CodeVerifier != nil && !codeVerifierShape.MatchString(*b.CodeVerifier) {
		err = kiterr.Invalid("codeVerifier", "must be 43 to 128 characters of A-Z a-z 0-9 . _ ~ -")
	}
	return err
}

// kitAccess: POST /oauth/kit.access (docs/api.md "Auth"). Order of checks: body
// shape (400), client credentials (401 invalid_credentials), then the code
// or refresh token (400 naming its field).
func (s *Server) kitAccess(in call) (reply, error) {
	in.carriesSecret() // and its refusals too: no answer of kit.access is stored (docs/credentials.md)
	var body kitAccessBody
	err := in.decode(&body)
	if err == nil {
		err = body.check()
	}
	if err != nil {
		return reply{}, err
	}
	kitID := *body.ClientID
	secretHash := ids.Hash(*body.ClientSecret)
	if !ids.WellFormed(*body.ClientSecret, ids.ClientSecret) {
		return reply{}, kiterr.New(kiterr.InvalidCredentials, "client credentials are not valid")
	}
	if _, err := ask[*kitpb.Ok](s, actors.KindKit, kitID, &kitpb.CheckClientSecret{SecretHash: secretHash[:]}); err != nil {
		if kiterr.CodeOf(err) == kiterr.NotFound {
			err = kiterr.New(kiterr.InvalidCredentials, "client credentials are not valid")
		}
		return reply{}, err
	}
	grant, path := *body.GrantType, "code"
	secret := ""
	if grant == "refresh_token" {
		path, secret = "refreshToken", *body.RefreshToken
	} else {
		secret = *body.Code
	}
	badGrant := kiterr.Invalid(path, actors.BadGrantReason)
	instID, err := actors.GrantOwner(s.env, secret)
	if kiterr.CodeOf(err) == kiterr.NotFound {
		err = badGrant
	}
	if err != nil {
		return reply{}, err
	}
	hash := ids.Hash(secret)
	access := ids.NewSecret(ids.UserToken)
	refresh := ids.NewSecret(ids.RefreshToken)
	accessHash, refreshHash := ids.Hash(access), ids.Hash(refresh)
	var bot string
	var r *kitpb.GrantReply
	if grant == "refresh_token" {
		r, err = ask[*kitpb.GrantReply](s, actors.KindInstallation, instID, &kitpb.RefreshGrant{
			RefreshHash: hash[:], KitId: kitID, AccessHash: accessHash[:], NewRefreshHash: refreshHash[:],
		})
	} else {
		bot = ids.NewSecret(ids.BotToken)
		botHash := ids.Hash(bot)
		req := &kitpb.ExchangeCode{
			CodeHash: hash[:], KitId: kitID, RedirectUri: *body.RedirectURI,
			BotHash: botHash[:], AccessHash: accessHash[:], RefreshHash: refreshHash[:],
		}
		if body.CodeVerifier != nil {
			req.CodeVerifier = *body.CodeVerifier
		}
		r, err = ask[*kitpb.GrantReply](s, actors.KindInstallation, instID, req)
	}
	if kiterr.CodeOf(err) == kiterr.NotFound {
		err = badGrant // uninstalled since
	}
	if err != nil {
		return reply{}, err
	}
	// kitclient.Grant leaves out the members of the other kind of grant:
	// a bot grant always has its bot id, a user grant its user id, refresh
	// token and lifetime, so exactly those are left out.
	g := kitclient.Grant{
		InstallationID: r.InstallationId, Workspace: kitclient.WorkspaceRef{ID: r.WorkspaceId, Name: r.WorkspaceName},
		Scopes: nonNil(r.Scopes),
	}
	if r.TokenType == actors.CallerBot {
		g.TokenType, g.AccessToken, g.BotID = "bot", bot, r.BotId
	} else {
		g.TokenType, g.AccessToken, g.RefreshToken, g.ExpiresIn, g.UserID = "user", access, refresh, int(r.ExpiresIn), r.UserId
	}
	return jsonReply(fasthttp.StatusOK, g)
}

func (s *Server) authTest(in call) (reply, error) {
	return jsonReply(fasthttp.StatusOK, kitclient.AuthTest{OK: true, TokenType: in.p.TokenType,
		WorkspaceID: in.p.Caller.WorkspaceId, InstallationID: in.p.Caller.InstallationId, KitSlug: in.p.KitSlug,
		BotID: optString(in.p.Caller.BotId), UserID: optString(in.p.Caller.UserId), Scopes: nonNil(in.p.Scopes)})
}
