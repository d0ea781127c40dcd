package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// The operator API's Kits and installations (OPERATIONS.md 2, "Kits and
// installations"): what the admin's install and API access pages do.

func (s *Server) opInstall(in call) (reply, error) {
	wsID := in.param("wsId")
	if err := validID("workspace", wsID); err != nil {
		return reply{}, err
	}
	var body struct {
		KitID   *string `json:"kitId"`
		Version *string `json:"version"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireUUID("kitId", body.KitID)
	}
	if err == nil && body.Version != nil {
		err = versionShape("version", *body.Version)
	}
	if err != nil {
		return reply{}, err
	}
	req := &kitpb.Install{KitId: *body.KitID}
	if body.Version != nil {
		req.Version = *body.Version
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindWorkspace, wsID, req)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusCreated, installationBody{viewInstallation(r.Installation)})
}

func (s *Server) opUninstall(in call) (reply, error) {
	instID := in.param("id")
	if err := validID("installation", instID); err != nil {
		return reply{}, err
	}
	_, err := ask[*kitpb.Ok](s, actors.KindInstallation, instID, &kitpb.Uninstall{})
	return okOr(err)
}

func installationReply(r *kitpb.InstallationReply, err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, installationBody{viewInstallation(r.Installation)})
}

func (s *Server) opAddChannel(in call) (reply, error) {
	instID := in.param("id")
	if err := validID("installation", instID); err != nil {
		return reply{}, err
	}
	var body struct {
		ConversationID *string `json:"conversationId"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireUUID("conversationId", body.ConversationID)
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.AddChannel{ConversationId: *body.ConversationID})
	return installationReply(r, err)
}

func (s *Server) opRemoveChannel(in call) (reply, error) {
	instID, convID := in.param("id"), in.param("conversationId")
	if err := validID("channel", instID, convID); err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.RemoveChannel{ConversationId: convID})
	return installationReply(r, err)
}

func (s *Server) opCreateBotToken(in call) (reply, error) {
	instID := in.param("id")
	if err := validID("installation", instID); err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	secret := ids.NewSecret(ids.BotToken)
	hash := ids.Hash(secret)
	if _, err := ask[*kitpb.CredentialReply](s, actors.KindInstallation, instID, &kitpb.CreateBotToken{SecretHash: hash[:]}); err != nil {
		return reply{}, err
	}
	in.carriesSecret()
	return jsonReply(fasthttp.StatusCreated, struct {
		Token string `json:"token"`
	}{secret})
}

func (s *Server) opRevoke(in call) (reply, error) {
	var body struct {
		Token *string `json:"token"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireString("token", body.Token, 1, 512)
	}
	if err == nil {
		err = s.auth.Revoke(*body.Token)
	}
	return okOr(err)
}

// opCreateWebhook: POST /ops/v1/installations/{id}/webhooks
// {conversationId, createdByUserId} → 201 {webhook, url}. The URL carries
// the only copy of the secret; the installation stores its hash.
func (s *Server) opCreateWebhook(in call) (reply, error) {
	instID := in.param("id")
	if err := validID("installation", instID); err != nil {
		return reply{}, err
	}
	var body struct {
		ConversationID  *string `json:"conversationId"`
		CreatedByUserID *string `json:"createdByUserId"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(input.RequireUUID("conversationId", body.ConversationID), input.RequireUUID("createdByUserId", body.CreatedByUserID))
	}
	if err != nil {
		return reply{}, err
	}
	// An unknown creator goes on as none: the installation checks the
	// scope before the creator (docs/webhooks.md "Decisions").
	var creator *kitpb.User
	ws, err := s.ownerOf(*body.CreatedByUserID, "user")
	if err == nil {
		var u *kitpb.UserReply
		if u, err = ask[*kitpb.UserReply](s, actors.KindWorkspace, ws, &kitpb.GetUser{UserId: *body.CreatedByUserID}); err == nil {
			creator = u.User
		}
	}
	if err != nil && kiterr.CodeOf(err) != kiterr.NotFound {
		return reply{}, err
	}
	secret := ids.NewSecret("")
	webhookID := ids.New()
	r, err := ask[*kitpb.WebhookReply](s, actors.KindInstallation, instID, &kitpb.CreateWebhook{
		WebhookId: webhookID, ConversationId: *body.ConversationID, Creator: creator,
		SecretHash: actors.HookSecretHash(secret),
	})
	if err != nil {
		if kiterr.CodeOf(err) == kiterr.MissingScope {
			in.ctx.Response.Header.Set("X-Service-Required-Scope", actors.WebhookScope)
		}
		return reply{}, err
	}
	type webhookView struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversationId"`
		CreatedAt      string `json:"createdAt"`
	}
	in.carriesSecret() // the URL holds the secret
	return jsonReply(fasthttp.StatusCreated, struct {
		Webhook webhookView `json:"webhook"`
		URL     string      `json:"url"`
	}{
		webhookView{r.Webhook.Id, r.Webhook.ConversationId, isoTime(r.Webhook.CreatedAt)},
		actors.WebhookURL(s.publicURL, instID, webhookID, secret),
	})
}

// opRevokeWebhook: DELETE /ops/v1/webhooks/{id}. The installation that
// created the webhook is found through its locator record.
func (s *Server) opRevokeWebhook(in call) (reply, error) {
	webhookID := in.param("id")
	if err := validID("webhook", webhookID); err != nil {
		return reply{}, err
	}
	kind, instID, err := actors.Locate(s.env, webhookID)
	if err == nil && kind != actors.KindInstallation {
		err = kiterr.Absent("webhook")
	}
	if kiterr.CodeOf(err) == kiterr.NotFound {
		err = kiterr.Absent("webhook")
	}
	if err == nil {
		_, err = ask[*kitpb.Ok](s, actors.KindInstallation, instID, &kitpb.RevokeWebhook{WebhookId: webhookID})
	}
	return okOr(err)
}

// opRotateClientSecret: POST /ops/v1/kits/{kitId}/client-secret.
func (s *Server) opRotateClientSecret(in call) (reply, error) {
	return s.opRotateKitSecret(in, actors.SecretClient)
}

// opRotateSigningSecret: POST /ops/v1/kits/{kitId}/signing-secret.
func (s *Server) opRotateSigningSecret(in call) (reply, error) {
	return s.opRotateKitSecret(in, actors.SecretSigning)
}

func (s *Server) opRotateKitSecret(in call, which string) (reply, error) {
	kitID := in.param("kitId")
	if err := validID("kit", kitID); err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	secret, rotate := actors.NewKitSecret(which)
	r, err := ask[*kitpb.KitSecretReply](s, actors.KindKit, kitID, rotate)
	if err != nil {
		return reply{}, err
	}
	in.carriesSecret()
	if which == actors.SecretClient {
		return jsonReply(fasthttp.StatusCreated, struct {
			ClientSecret string `json:"clientSecret"`
			CreatedAt    string `json:"createdAt"`
		}{secret, isoTime(r.Secret.CreatedAt)})
	}
	return jsonReply(fasthttp.StatusCreated, struct {
		SigningSecret     string  `json:"signingSecret"`
		Generation        int32   `json:"generation"`
		CreatedAt         string  `json:"createdAt"`
		PreviousExpiresAt *string `json:"previousExpiresAt"`
	}{secret, r.Secret.Generation, isoTime(r.Secret.CreatedAt), optTime(r.Secret.PreviousExpiresAt)})
}

// opSuspendKit: POST /ops/v1/kits/{kitId}/suspend → 200 {kit}, the Kit as
// the developer API shows it to its own workspace (docs/api.md "Kit
// state"). Suspending a suspended Kit answers the same 200.
func (s *Server) opSuspendKit(in call) (reply, error) {
	return s.opSetKitState(in, actors.KitSuspended)
}

// opResumeKit: POST /ops/v1/kits/{kitId}/resume, likewise.
func (s *Server) opResumeKit(in call) (reply, error) {
	return s.opSetKitState(in, actors.KitActive)
}

func (s *Server) opSetKitState(in call, state string) (reply, error) {
	kitID := in.param("kitId")
	if err := validID("kit", kitID); err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.KitReply](s, actors.KindKit, kitID, &kitpb.SetKitState{State: state})
	if err != nil {
		return reply{}, err
	}
	here, err := actors.InstalledHere(s.env, r.Kit.WorkspaceId, kitID)
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, struct {
		Kit kitView `json:"kit"`
	}{viewKit(r.Kit, here)})
}
