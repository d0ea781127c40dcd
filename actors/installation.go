package actors

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// installationActor owns one installation of a Kit in a workspace: the
// installed version and its scopes, the Kit bot and the channels it was
// added to, the bot tokens issued for it, and the read/write/files buckets
// of docs/api.md "Limits" that are counted per installation.
type installationActor struct {
	env  *Env
	life lifecycle

	id      string
	inst    *kitpb.Installation // nil: not installed (yet)
	buckets bucketSet
	outbox  outbox // installation.* events (events.go)
	// toolCache is what the installed version declares of its tools
	// (installation_runs.go); nil until a tool is called.
	toolCache *installedTools
	// inFlight are the runs this activation queued whose outcome is not
	// in yet, by creation time (keepActive).
	inFlight map[string]time.Time
	// responsesPruned is when expired responseUrl records were last
	// deleted (installation_actions.go); zero: not since activation.
	responsesPruned time.Time
	// grantSweep is where and when the next sweep of dead grant
	// credentials starts (installation_grants_sweep.go).
	grantSweep sweepCursor
	// botTokenSweep is where and when the next sweep of dead bot tokens
	// starts (installation_bottokens_sweep.go).
	botTokenSweep sweepCursor
	// runSweep is where and when the next sweep of finished runs starts
	// (installation_runs_sweep.go).
	runSweep sweepCursor
	// purge is where the deletion of an uninstalled installation's
	// records stands (installation_purge.go).
	purge purgeState
}

func (a *installationActor) Receive(ctx actorContext) {
	if _, ok := ctx.Message().(purgeNext); ok {
		a.life.asked++
		a.purgeBatch()
	} else {
		receive(a, &a.life, a.env, ctx)
	}
	a.purgeAfter(ctx)
}

func (a *installationActor) exists() bool { return a.inst != nil }

func (a *installationActor) activate(identity string) error {
	a.id = identity
	a.outbox.source = identity
	a.buckets.table = a.env.Limits
	inst := &kitpb.Installation{}
	found, err := load(a.env.Store, installationKey(a.id), inst)
	if err != nil || !found {
		return err
	}
	a.inst = inst
	if err := a.interruptRuns(); err != nil {
		return err
	}
	// What a purge a kill cut short left, or an uninstall by a build
	// before the purge (installation_purge.go).
	a.purge.due = inst.Uninstalled
	return a.outbox.resume(a.env.Store, []string{a.id})
}

func (a *installationActor) handle(msg proto.Message) (proto.Message, error) {
	if _, ok := msg.(*kitpb.ApplyInstall); !ok && a.inst == nil {
		return nil, kiterr.Absent("installation")
	}
	switch m := msg.(type) {
	case *kitpb.ApplyInstall:
		return a.apply(m)
	case *kitpb.GetInstallation:
		return &kitpb.InstallationReply{Installation: a.inst}, nil
	case *kitpb.FinishRun:
		// A call made before an uninstall still ends: the Kit did the
		// work, and its developer log shows the call.
		return a.finishRun(m)
	}
	// Everything below changes a live installation.
	if a.inst.Uninstalled {
		return nil, kiterr.Absent("installation")
	}
	if reply, ok := a.buckets.answer(msg, a.env.Clock); ok {
		return reply, nil
	}
	switch m := msg.(type) {
	case *kitpb.Uninstall:
		return a.uninstall()
	case *kitpb.AddChannel:
		if !HasBot(a.inst) {
			return nil, ErrNoBot
		}
		return a.addChannel(m.ConversationId, "channel.added")
	case *kitpb.RemoveChannel:
		return a.removeChannel(m)
	case *kitpb.CreateBotToken:
		if !HasBot(a.inst) {
			return nil, ErrNoBot
		}
		return a.createBotToken(m)
	case *kitpb.RevokeCredential:
		return a.revoke(m)
	}
	return askConcerns(a, KindInstallation, msg, installationConcerns[:])
}

// installationConcerns take the requests the switch of handle leaves, one
// concern (and file) each.
var installationConcerns = [...]concern[*installationActor]{
	(*installationActor).handleAPIAccess,
	(*installationActor).handleWebhooks,
	(*installationActor).handleGrants,
	(*installationActor).handleRuns,
	(*installationActor).handleMemberActions,
}

// apply installs the version, or updates this installation to it. Scopes
// the new version no longer requests leave every token at once: tokens keep
// the scopes granted at issue, and authentication intersects them with the
// installation's current scopes.
func (a *installationActor) apply(m *kitpb.ApplyInstall) (proto.Message, error) {
	man, problems := manifest.Parse(m.Version.Manifest)
	if len(problems) > 0 {
		return nil, fmt.Errorf("installed manifest %s@%s no longer parses: %s", m.Kit.Id, m.Version.Version, problems[0].Message)
	}
	next := &kitpb.Installation{}
	if a.inst != nil {
		if a.inst.Uninstalled {
			return nil, kiterr.New(kiterr.Conflict, "installation was uninstalled")
		}
		next = proto.Clone(a.inst).(*kitpb.Installation)
	} else {
		next.Id = a.id
		next.WorkspaceId = m.WorkspaceId
		next.KitId = m.Kit.Id
		next.BotId = ids.New()
		next.CreatedAt = nanos(a.env.Clock.Now())
	}
	next.WorkspaceName = m.WorkspaceName
	next.KitSlug = man.Slug
	next.KitVersion = m.Version.Version
	next.KitDisplayName = man.DefaultDisplayName()
	next.BotDisplayName = man.BotDisplayName()
	next.BotScopes, next.UserScopes, next.MaxWebhooks = nil, nil, 0
	if man.Bot != nil {
		next.BotScopes = slices.Clone(man.Bot.Scopes)
	}
	if man.OAuth != nil {
		next.UserScopes = slices.Clone(man.OAuth.UserScopes)
	}
	if man.IncomingWebhooks != nil {
		next.MaxWebhooks = int32(man.IncomingWebhooks.MaxPerInstallation)
	}
	next.Interactive = man.Interactivity != nil
	setMemberActions(next, man)
	next.Events = 0
	if man.Bot != nil || len(man.Events) > 0 {
		next.Events = eventMask(man)
	}
	updated := a.inst != nil
	if updated && next.Events != a.inst.Events {
		if err := a.setBotEvents(next.Events); err != nil {
			return nil, err
		}
	}
	if !updated {
		return &kitpb.InstallationReply{Installation: next}, a.save(next, nil)
	}
	newVersion := next.KitVersion != a.inst.KitVersion
	if webhooksAllowed(a.inst) && !webhooksAllowed(next) {
		// The version no longer requests incoming-webhook: the webhook URLs,
		// credentials of that scope, lose it at once as tokens lose a
		// dropped scope (SPEC.md 5), for good as on uninstall. Ended before
		// the record is saved: a crash in between leaves the old version
		// installed, and the retried update ends them again.
		if err := a.endWebhooks("", WebhookRevoked, ""); err != nil {
			return nil, err
		}
	}
	if HasBot(a.inst) && !HasBot(next) {
		// The version drops the bot: it leaves its channels (their
		// webhooks ended above, with the scope incoming-webhook), as on
		// uninstall; a version that brings it back starts it in none.
		// Its tokens stop at authentication while the version has no bot.
		if err := a.removeBotEverywhere(); err != nil {
			return nil, err
		}
		next.ChannelIds = nil
	}
	if err := a.saveWithEvent(next, nil, eventInstallationUpdated); err != nil {
		return nil, err
	}
	if newVersion {
		// A new version resumes a paused endpoint (docs/deliveries.md). A
		// crash before the notice arrives leaves it paused until a
		// redelivery succeeds.
		a.env.Host.Send(KindDelivery, a.id, &kitpb.ResumeDeliveries{KitId: next.KitId})
	}
	return &kitpb.InstallationReply{Installation: next}, nil
}

// HasBot reports whether the installed version declares a bot (manifest
// `bot`, which a Kit without one leaves out). BotDisplayName is the
// manifest's BotDisplayName(), empty only then. The installation keeps its
// bot id either way, so a later version that declares a bot gets it.
func HasBot(inst *kitpb.Installation) bool { return inst.BotDisplayName != "" }

// offersUserTokens reports whether the installed version can be
// authorized for user tokens: its manifest requests oauth.userScopes.
func offersUserTokens(inst *kitpb.Installation) bool { return len(inst.UserScopes) > 0 }

// ErrNoBot refuses what only a bot can have (a bot token, a channel) to an
// installation whose version has none (docs/decisions.md "A Kit without a
// bot").
var ErrNoBot = kiterr.New(kiterr.Conflict, "this Kit has no bot: its installed version's manifest leaves `bot` out")

// webhooksAllowed reports whether the installed version allows incoming
// webhooks: bot scope incoming-webhook and a maxPerInstallation.
func webhooksAllowed(inst *kitpb.Installation) bool {
	return slices.Contains(inst.BotScopes, WebhookScope) && inst.MaxWebhooks > 0
}

// setBotEvents tells every channel of the bot which events it now gets.
// It runs before the installation saves the change: a crash in between
// leaves channels ahead of the record, which the retried call repairs.
func (a *installationActor) setBotEvents(mask uint32) error {
	for _, conv := range a.inst.ChannelIds {
		if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindConversation, conv,
			&kitpb.SetBotEvents{BotId: a.inst.BotId, Events: mask}); err != nil {
			return err
		}
	}
	return nil
}

// removeBotEverywhere takes the Kit bot out of every channel it was
// added to. It runs before the installation saves the change: a crash in
// between leaves channels that no longer have the bot listed, which the
// retried update removes again (RemoveBot of an absent bot is a no-op).
func (a *installationActor) removeBotEverywhere() error {
	for _, conv := range a.inst.ChannelIds {
		if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindConversation, conv,
			&kitpb.RemoveBot{BotId: a.inst.BotId}); err != nil {
			return err
		}
	}
	return nil
}

// save commits next, with the audit entry that reports the change when
// there is one (nil: none).
func (a *installationActor) save(next *kitpb.Installation, audit *kitpb.DevLogEntry) error {
	return a.commit(next, audit, nil, nil)
}

// saveWithEvent is save with the installation event k about next in the
// same batch, when the installation subscribes to k.
func (a *installationActor) saveWithEvent(next *kitpb.Installation, audit *kitpb.DevLogEntry, k eventKind) error {
	return a.commit(next, audit, &k, nil)
}

// commit is save and saveWithEvent; also, when set, adds more to the batch.
func (a *installationActor) commit(next *kitpb.Installation, audit *kitpb.DevLogEntry, k *eventKind, also func(batch)) error {
	b := a.env.newBatch()
	put(b, installationKey(a.id), next)
	if also != nil {
		also(b)
	}
	if audit != nil {
		a.env.putLog(b, partition.Of(a.id), next.KitId, audit)
	}
	if k != nil && (next.Events&k.bit() != 0 || a.inst.Events&k.bit() != 0) {
		now := nanos(a.env.Clock.Now())
		ev := &kitpb.Event{Id: ids.NewAt(a.env.Clock.Now()), Type: k.String(), OccurredAt: now, Installation: next}
		if next.Events&k.bit() == 0 {
			// Only the version before subscribes: it is told at its own
			// endpoint, which the new version may not have.
			ev.EndpointVersion = a.inst.KitVersion
		}
		a.outbox.add(b, a.id, encodeEvent(ev, nil), now)
	}
	if err := b.Commit(); err != nil {
		a.outbox.failed()
		return fmt.Errorf("save installation %s: %w", a.id, err)
	}
	a.outbox.applied(a.env)
	a.inst = next
	a.env.Invalidator.InstallationChanged(a.id)
	return nil
}

func (a *installationActor) uninstall() (proto.Message, error) {
	// Webhooks end first: a crash in between leaves the Kit installed,
	// and the retried uninstall finishes (see installation_webhooks.go).
	if err := a.endWebhooks("", WebhookUninstalled, ""); err != nil {
		return nil, err
	}
	// Its bot gets nothing more from its channels, nor from its workspace
	// (user.* events). The workspace may be waiting on this installation
	// (an install of the same Kit at the same moment): the request then
	// times out and the uninstall fails, to be retried.
	if err := a.setBotEvents(0); err != nil {
		return nil, err
	}
	if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindWorkspace, a.inst.WorkspaceId,
		&kitpb.ForgetInstallationEvents{InstallationId: a.id}); err != nil {
		return nil, err
	}
	next := proto.Clone(a.inst).(*kitpb.Installation)
	next.Uninstalled = true
	// The purge of what it accumulated follows the answer, its marker in
	// the uninstall's batch (installation_purge.go).
	marker := func(b batch) { b.Set(purgeKey(a.id), nil) }
	uninstalled := eventInstallationUninstalled
	if err := a.commit(next, newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "installation.uninstalled", a.id), &uninstalled, marker); err != nil {
		return nil, err
	}
	a.purge.due = true
	return &kitpb.Ok{}, nil
}

// checkWorkspaceConversation checks that id is a conversation of the
// installation's workspace; one of another workspace is not_found, as if
// absent.
func (a *installationActor) checkWorkspaceConversation(id string) error {
	_, err := a.workspaceConversation(id)
	return err
}

// workspaceConversation is the conversation id of the installation's
// workspace (see checkWorkspaceConversation).
func (a *installationActor) workspaceConversation(id string) (*kitpb.Conversation, error) {
	r, err := cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, id,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerOperator}})
	if err != nil {
		return nil, err
	}
	if r.Conversation.WorkspaceId != a.inst.WorkspaceId {
		return nil, kiterr.Absent("conversation")
	}
	return r.Conversation, nil
}

// addChannel adds the Kit bot to a channel of this workspace, and logs
// event when the bot was not there yet ("": the caller's own entry says
// it). The conversation records the bot first, so that a crash in between
// leaves the bot able to see a channel the installation does not list
// yet, which the retry of the same call repairs.
func (a *installationActor) addChannel(conversationID, event string) (proto.Message, error) {
	if err := a.checkWorkspaceConversation(conversationID); err != nil {
		return nil, err
	}
	if _, err := cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, conversationID,
		&kitpb.AddBot{BotId: a.inst.BotId, InstallationId: a.id, Events: a.inst.Events}); err != nil {
		return nil, err
	}
	if !slices.Contains(a.inst.ChannelIds, conversationID) {
		next := proto.Clone(a.inst).(*kitpb.Installation)
		next.ChannelIds = append(next.ChannelIds, conversationID)
		if err := a.save(next, a.channelEntry(event, conversationID)); err != nil {
			return nil, err
		}
	}
	return &kitpb.InstallationReply{Installation: a.inst}, nil
}

func (a *installationActor) removeChannel(m *kitpb.RemoveChannel) (proto.Message, error) {
	if !slices.Contains(a.inst.ChannelIds, m.ConversationId) {
		return nil, kiterr.Absent("channel")
	}
	if err := a.endWebhooks(m.ConversationId, WebhookDisabled, DisabledBotRemoved); err != nil {
		return nil, err
	}
	if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindConversation, m.ConversationId,
		&kitpb.RemoveBot{BotId: a.inst.BotId}); err != nil {
		return nil, err
	}
	next := proto.Clone(a.inst).(*kitpb.Installation)
	next.ChannelIds = slices.DeleteFunc(next.ChannelIds, func(id string) bool { return id == m.ConversationId })
	if err := a.save(next, a.channelEntry("channel.removed", m.ConversationId)); err != nil {
		return nil, err
	}
	return &kitpb.InstallationReply{Installation: a.inst}, nil
}

// channelEntry is the audit entry of the Kit bot joining or leaving a
// channel; nil for no event.
func (a *installationActor) channelEntry(event, conversationID string) *kitpb.DevLogEntry {
	if event == "" {
		return nil
	}
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, event, a.id)
	e.SubjectId = conversationID
	return e
}

func (a *installationActor) createBotToken(m *kitpb.CreateBotToken) (proto.Message, error) {
	cred := &kitpb.Credential{
		Kind: CallerBot, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id, BotId: a.inst.BotId,
		Scopes: slices.Clone(a.inst.BotScopes), CreatedAt: nanos(a.env.Clock.Now()),
	}
	swept, b := a.env.newBatch(), a.env.newBatch()
	sweep, err := a.sweepBotTokens(swept, b, cred.CreatedAt)
	if err != nil {
		closeAll([]batch{swept, b})
		return nil, err
	}
	a.putBotToken(b, m.SecretHash, cred)
	a.audit(b, "token.issued", LogLevelInfo, CallerBot, "")
	if err := a.env.commitInSteps(swept, b); err != nil {
		return nil, fmt.Errorf("create bot token for %s: %w", a.id, err)
	}
	a.botTokenSweep = sweep
	return &kitpb.CredentialReply{Credential: cred}, nil
}

// revoke revokes one credential of the installation, named by its hash or,
// for a bot token listed on the API access page, by its token id.
func (a *installationActor) revoke(m *kitpb.RevokeCredential) (proto.Message, error) {
	hash := m.SecretHash
	if m.TokenId != "" {
		var err error
		if hash, err = a.botTokenHash(m.TokenId); err != nil {
			return nil, err
		}
	}
	cred := &kitpb.Credential{}
	found, err := a.env.loadOwn(credentialKey(hash), cred)
	if err != nil {
		return nil, err
	}
	if !found || cred.InstallationId != a.id {
		return nil, kiterr.Absent("token")
	}
	if cred.RevokedAt == 0 {
		cred.RevokedAt = nanos(a.env.Clock.Now())
		b := a.env.newBatch()
		put(b, credentialKey(hash), cred)
		a.audit(b, "token.revoked", LogLevelInfo, cred.Kind, "")
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("revoke token of %s: %w", a.id, err)
		}
	}
	a.env.Invalidator.CredentialRevoked(hash)
	if cred.Kind == credRefresh && cred.GrantId != "" {
		// RFC 7009 2.1: a revoked refresh token takes the access tokens of
		// its grant with it.
		if err := a.revokeGrant(cred.GrantId); err != nil {
			return nil, err
		}
	}
	return &kitpb.Ok{}, nil
}
