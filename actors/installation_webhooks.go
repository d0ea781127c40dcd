package actors

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// The installation keeps a WebhookRef per webhook it created
// (webhookRefKey) so that it can count them against
// incomingWebhooks.maxPerInstallation and end them on uninstall or when the
// Kit bot leaves their channel. The state of each webhook lives in its own
// actor, which the installation asks: a webhook that disabled itself
// (its channel was archived) stops counting without telling anyone.

// handleWebhooks answers the installation's webhook requests; ok is false
// for any other request.
func (a *installationActor) handleWebhooks(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.CreateWebhook:
		reply, err = a.createWebhook(m)
	case *kitpb.RevokeWebhook:
		reply, err = a.revokeWebhook(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// Creator roles allowed to create a webhook (OPERATIONS.md section 2).
var webhookCreatorRoles = []string{"admin", "owner"}

// createWebhook checks, in order: the installed manifest allows webhooks,
// the creator is an active admin or owner of this workspace and a member
// of the channel, the channel is a live channel, fewer than
// maxPerInstallation webhooks are active (docs/webhooks.md); then it
// adds the Kit bot to the channel, has the webhook actor store the webhook
// and records it here. The webhook is stored before the installation
// records it: a crash in between leaves a webhook whose URL nobody was
// shown, which can never be used.
func (a *installationActor) createWebhook(m *kitpb.CreateWebhook) (proto.Message, error) {
	if !slices.Contains(a.inst.BotScopes, WebhookScope) || a.inst.MaxWebhooks < 1 {
		return nil, kiterr.New(kiterr.MissingScope, "the installed manifest does not request bot scope "+WebhookScope)
	}
	c := m.Creator
	if c == nil || c.WorkspaceId != a.inst.WorkspaceId || !c.Active {
		return nil, kiterr.Absent("user")
	}
	if !slices.Contains(webhookCreatorRoles, c.Role) {
		return nil, kiterr.New(kiterr.Forbidden, "createdByUserId: only an admin or owner can create a webhook")
	}
	conv, err := a.workspaceConversation(m.ConversationId)
	if err != nil {
		return nil, err
	}
	_, err = cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, m.ConversationId,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerUser, WorkspaceId: c.WorkspaceId, UserId: c.Id}})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, kiterr.New(kiterr.Forbidden, "createdByUserId: the creator must be a member of the channel")
	}
	if err != nil {
		return nil, err
	}
	// The channel's own refusals (the conversation's AddBot makes them
	// again) come before the count: revoking a webhook would not fix them.
	if conv.Kind != "channel" {
		return nil, kiterr.Invalid("conversationId", "must be a channel")
	}
	if conv.Archived {
		return nil, errArchived
	}
	active, err := a.activeWebhooks()
	if err != nil {
		return nil, err
	}
	if active >= int(a.inst.MaxWebhooks) {
		return nil, kiterr.New(kiterr.Conflict, fmt.Sprintf("the installation already has %d active webhooks, the most its manifest allows (incomingWebhooks.maxPerInstallation)", active))
	}
	// webhook.created reports the bot joining the channel too.
	if _, err := a.addChannel(m.ConversationId, ""); err != nil {
		return nil, err
	}
	now := nanos(a.env.Clock.Now())
	opened, err := cluster.Call[*kitpb.WebhookReply](a.env.Host, KindWebhook, m.WebhookId, &kitpb.OpenWebhook{Webhook: &kitpb.Webhook{
		InstallationId: a.id, WorkspaceId: a.inst.WorkspaceId, KitId: a.inst.KitId,
		ConversationId: m.ConversationId, BotId: a.inst.BotId, SecretHash: m.SecretHash,
		CreatedByUserId: c.Id, CreatedAt: now,
	}})
	if err != nil {
		return nil, err
	}
	audit := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "webhook.created", a.id)
	audit.Status, audit.SubjectId = WebhookActive, m.WebhookId
	b := a.env.newBatch()
	put(b, webhookRefKey(a.id, m.WebhookId), &kitpb.WebhookRef{WebhookId: m.WebhookId, ConversationId: m.ConversationId, CreatedAt: now})
	put(b, locatorKey(m.WebhookId), &kitpb.Locator{Kind: KindInstallation, Owner: a.id})
	a.env.putLog(b, partition.Of(a.id), a.inst.KitId, audit)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("record webhook %s of %s: %w", m.WebhookId, a.id, err)
	}
	return opened, nil
}

func (a *installationActor) revokeWebhook(m *kitpb.RevokeWebhook) (proto.Message, error) {
	ref := &kitpb.WebhookRef{}
	if err := loadExisting(a.env.Store, webhookRefKey(a.id, m.WebhookId), ref, "webhook"); err != nil {
		return nil, err
	}
	if _, err := cluster.Call[*kitpb.WebhookReply](a.env.Host, KindWebhook, m.WebhookId,
		&kitpb.EndWebhook{State: WebhookRevoked}); err != nil {
		return nil, err
	}
	return &kitpb.Ok{}, nil
}

// webhookRefs reads the installation's webhooks (at most a few dozen: the
// manifest allows 20 active, and ended ones stay listed).
func (a *installationActor) webhookRefs() ([]*kitpb.WebhookRef, error) {
	var refs []*kitpb.WebhookRef
	err := scanRecords(a.env.Store, webhookRefsPrefix(a.id), func() proto.Message { return &kitpb.WebhookRef{} }, func(m proto.Message) {
		refs = append(refs, m.(*kitpb.WebhookRef))
	})
	if err != nil {
		return nil, fmt.Errorf("list webhooks of %s: %w", a.id, err)
	}
	return refs, nil
}

// activeWebhooks counts the installation's webhooks that are still active.
func (a *installationActor) activeWebhooks() (int, error) {
	refs, err := a.webhookRefs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range refs {
		h, err := a.webhookNow(r)
		if err != nil {
			return 0, err
		}
		if h != nil && h.State == WebhookActive {
			n++
		}
	}
	return n, nil
}

// webhookNow is the webhook of r as it stands (nil: stored by no webhook
// actor). One whose channel was archived is disabled (SPEC.md 3) whether
// or not a post found it out since: it is ended here, so that it frees its
// place and is listed disabled, and why.
func (a *installationActor) webhookNow(r *kitpb.WebhookRef) (*kitpb.Webhook, error) {
	h, err := cluster.Call[*kitpb.WebhookReply](a.env.Host, KindWebhook, r.WebhookId, &kitpb.GetWebhook{})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if h.Webhook.State != WebhookActive {
		return h.Webhook, nil
	}
	c, err := cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, r.ConversationId,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerOperator}})
	if err != nil || !c.Conversation.Archived {
		return h.Webhook, err
	}
	if h, err = cluster.Call[*kitpb.WebhookReply](a.env.Host, KindWebhook, r.WebhookId,
		&kitpb.EndWebhook{State: WebhookDisabled, Reason: DisabledArchived}); err != nil {
		return nil, err
	}
	return h.Webhook, nil
}

// endWebhooks ends the installation's webhooks in the conversation ("" =
// all of them) with state and reason. Ending is idempotent, so a retried
// uninstall or channel removal ends what a crash left active.
func (a *installationActor) endWebhooks(conversationID, state, reason string) error {
	refs, err := a.webhookRefs()
	if err != nil {
		return err
	}
	for _, r := range refs {
		if conversationID != "" && r.ConversationId != conversationID {
			continue
		}
		_, err := cluster.Call[*kitpb.WebhookReply](a.env.Host, KindWebhook, r.WebhookId, &kitpb.EndWebhook{State: state, Reason: reason})
		if err != nil && kiterr.CodeOf(err) != kiterr.NotFound {
			return fmt.Errorf("end webhook %s of %s: %w", r.WebhookId, a.id, err)
		}
	}
	return nil
}
