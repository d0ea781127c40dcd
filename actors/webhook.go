package actors

import (
	"crypto/subtle"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// WebhookScope is the bot scope a manifest requests to allow incoming
// webhooks.
const WebhookScope = "incoming-webhook"

// Webhook states (docs/api.md "Incoming webhook states"). active is the only
// state that posts; disabled answers 410 for good; revoked and uninstalled
// answer the same 404 as a URL that never existed. No state leads back to
// active.
const (
	WebhookActive      = "active"
	WebhookDisabled    = "disabled"
	WebhookRevoked     = "revoked"
	WebhookUninstalled = "uninstalled"
)

// Why a webhook was disabled.
const (
	DisabledArchived   = "archived"
	DisabledBotRemoved = "bot_removed"
)

var (
	// ErrHookNotFound is the one 404 of the hooks host: an unknown webhook,
	// a wrong secret or installation, a revoked webhook, an uninstalled Kit,
	// and (from the HTTP layer) a path that cannot be a webhook URL.
	ErrHookNotFound = kiterr.Absent("webhook")
	errHookGone     = kiterr.New(kiterr.Gone, "the webhook is disabled: its channel was archived or the Kit bot was removed from it")
)

// AbsentWebhook is the identity of the stand-in webhook actor: the one that
// answers the posts to every webhook id with no record (WebhookTargets).
// It is the nil UUID, which ids.New never makes.
const AbsentWebhook = "00000000-0000-0000-0000-000000000000"

// refusalLogInterval bounds the developer log entries of repeated refusals
// (429, 410) of one webhook: a sender stuck in a loop must not turn every
// refused request into a stored entry.
const refusalLogInterval = time.Second

// unknownSecret is compared against when the webhook does not exist, so
// that an unknown webhook costs the same comparison as a wrong secret.
var unknownSecret [32]byte

// webhookActor owns one incoming webhook: its record (the secret's hash,
// the channel, its state) and its rate bucket (docs/api.md "Limits": 1/second,
// burst 5, per webhook). A post is checked here and forwarded to the
// conversation, which writes the message and answers the hooks host; a
// refusal that disables the webhook comes back here first.
type webhookActor struct {
	env  *Env
	life lifecycle

	id      string
	hook    *kitpb.Webhook // nil: no such webhook
	conv    cluster.Route  // to the webhook's conversation, set on the first post
	buckets bucketSet
	// lastRefusalLog is when a refusal with this code was last logged.
	lastRefusalLog map[kiterr.Code]time.Time
	// forwarded is the post forwarded last and the rate decision it got:
	// the same post coming again is the cluster's retry after a dead
	// letter, not a new request, so it takes no second token.
	forwarded struct {
		postID uint64
		limit  *kitpb.Decision
	}
}

func (a *webhookActor) Receive(ctx actorContext) { receive(a, &a.life, a.env, ctx) }

// exists keeps the stand-in active like a real webhook, so that a post to
// a made-up id takes the path of a post to a live one (WebhookTargets).
func (a *webhookActor) exists() bool { return a.hook != nil || a.id == AbsentWebhook }

func (a *webhookActor) activate(identity string) error {
	a.id = identity
	a.buckets.table = a.env.Limits
	a.lastRefusalLog = make(map[kiterr.Code]time.Time)
	h := &kitpb.Webhook{}
	found, err := load(a.env.Store, webhookKey(a.id), h)
	if err != nil || !found {
		return err
	}
	a.hook = h
	return nil
}

func (a *webhookActor) handle(msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *kitpb.HookPost:
		return a.post(m)
	case *kitpb.OpenWebhook:
		return a.open(m)
	case *kitpb.ForgetWebhook:
		return a.forget()
	}
	if a.hook == nil {
		return nil, ErrHookNotFound
	}
	// A ReturnToken comes from the conversation whose write of a post
	// failed (postAsWebhook).
	if reply, ok := a.buckets.answer(msg, a.env.Clock); ok {
		return reply, nil
	}
	switch m := msg.(type) {
	case *kitpb.GetWebhook:
		return &kitpb.WebhookReply{Webhook: a.hook}, nil
	case *kitpb.EndWebhook:
		return a.end(m.State, m.Reason)
	case *kitpb.WebhookRefused:
		return a.refused(m)
	}
	return nil, unknownRequest(KindWebhook, msg)
}

// open stores the webhook its installation created.
func (a *webhookActor) open(m *kitpb.OpenWebhook) (proto.Message, error) {
	if a.hook != nil {
		return nil, kiterr.New(kiterr.Conflict, "webhook already exists")
	}
	h := proto.Clone(m.Webhook).(*kitpb.Webhook)
	h.Id, h.State = a.id, WebhookActive
	b := a.env.newBatch()
	put(b, webhookKey(a.id), h)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("open webhook %s: %w", a.id, err)
	}
	a.hook = h
	return &kitpb.WebhookReply{Webhook: h}, nil
}

// forget deletes the record of the webhook, ended (revoked, or by its
// installation's uninstall), for the purge of that installation (installation_purge.go):
// its URL answers the 404 of an unknown webhook, as it did. One that is
// gone already is forgotten again, for a purge a kill cut short.
func (a *webhookActor) forget() (proto.Message, error) {
	if a.hook == nil || a.id == AbsentWebhook {
		return &kitpb.Ok{}, nil
	}
	if a.hook.State == WebhookActive {
		return nil, kiterr.New(kiterr.Conflict, "an active webhook is not forgotten")
	}
	b := a.env.newBatch()
	b.Delete(webhookKey(a.id))
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("forget webhook %s: %w", a.id, err)
	}
	a.hook = nil
	return &kitpb.Ok{}, nil
}

// end moves the webhook out of active. revoked and uninstalled are final;
// disabled may still become revoked or uninstalled (both answer 404, which
// says less than 410). entries are logged in the same batch.
func (a *webhookActor) end(state, reason string, entries ...*kitpb.DevLogEntry) (proto.Message, error) {
	switch state {
	case WebhookDisabled, WebhookRevoked, WebhookUninstalled:
	default:
		return nil, fmt.Errorf("webhook %s: cannot end in state %q", a.id, state)
	}
	cur := a.hook.State
	if cur == WebhookRevoked || cur == WebhookUninstalled || cur == state {
		return &kitpb.WebhookReply{Webhook: a.hook}, nil
	}
	next := proto.Clone(a.hook).(*kitpb.Webhook)
	next.State = state
	if state == WebhookDisabled {
		next.Reason = reason
	}
	now := nanos(a.env.Clock.Now())
	if next.EndedAt == 0 {
		next.EndedAt = now
	}
	audit := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, "webhook."+state, a.hook.InstallationId)
	audit.Status, audit.SubjectId = state, a.id
	if state == WebhookDisabled {
		audit.Status = reason
	}
	b := a.env.newBatch()
	put(b, webhookKey(a.id), next)
	a.env.putLog(b, partition.Of(a.id), a.hook.KitId, audit)
	for _, e := range entries {
		e.Id = ids.NewAt(a.env.Clock.Now()) // after the audit entry: the state change comes first in the log
		a.env.putLog(b, partition.Of(a.id), a.hook.KitId, e)
	}
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("end webhook %s: %w", a.id, err)
	}
	a.hook = next
	return &kitpb.WebhookReply{Webhook: next}, nil
}

// post answers one POST to the webhook URL. Every way of not being this
// webhook (unknown, wrong secret or installation, revoked, uninstalled)
// does the same work and gives the same error, so that neither the answer
// nor its timing tells them apart: both comparisons always run, in
// constant time, before any branch on what they found.
func (a *webhookActor) post(m *kitpb.HookPost) (proto.Message, error) {
	stored, inst := unknownSecret[:], ""
	if a.hook != nil {
		stored, inst = a.hook.SecretHash, a.hook.InstallationId
	}
	secretOK := subtle.ConstantTimeCompare(m.SecretHash, stored)
	instOK := subtle.ConstantTimeCompare([]byte(m.InstallationId), []byte(inst))
	if secretOK&instOK != 1 || a.hook == nil {
		return nil, ErrHookNotFound
	}
	switch a.hook.State {
	case WebhookActive:
	case WebhookDisabled:
		a.logRefusal(kiterr.Gone, "disabled")
		return nil, errHookGone
	default:
		return nil, ErrHookNotFound
	}
	// A suspended Kit's webhook stays active (a resume restores it) and
	// spends no token of its bucket.
	if err := refuseIfSuspended(a.env, a.hook.KitId); err != nil {
		return nil, err
	}
	var limit *kitpb.Decision
	took := false
	if m.PostId != 0 && m.PostId == a.forwarded.postID {
		limit = a.forwarded.limit
	} else if d, on := a.buckets.take(limits.Webhook, "", a.env.Clock.Now()); on {
		if !d.OK {
			a.logRefusal(kiterr.RateLimited, "rate_limited")
			return nil, kiterr.OverLimit(d)
		}
		limit, took = d.Wire(), true
	}
	if m.Invalid != nil {
		// State comes before the body: a channel archived since the last
		// post disabled the webhook (SPEC.md 3), which only the
		// conversation knows. Asked on this path alone, as a post that
		// reaches the conversation finds it out; the conversation never
		// waits for a webhook, so nothing waits in a cycle.
		archived, err := a.channelArchived()
		if err != nil {
			if took { // nothing was judged: the retry takes its own
				a.buckets.giveBack(limits.Webhook, "", a.env.Clock.Now())
			}
			return nil, err
		}
		if archived {
			return a.refused(&kitpb.WebhookRefused{Reason: DisabledArchived, Limit: limit})
		}
		writeLogAsync(a.env, partition.Of(a.id), a.hook.KitId, a.outcome(LogLevelError, "rejected", kiterr.Validation))
		// The token is spent (docs/webhooks.md): the 400 shows the bucket.
		return nil, kiterr.Spending(kiterr.FromFailure(m.Invalid), limit)
	}
	// The conversation answers the hooks host itself: the webhook does not
	// wait for the post and its sync (see kitpb.PostAsWebhook).
	a.forwarded.postID, a.forwarded.limit = m.PostId, limit
	if a.conv.Identity == "" {
		a.conv = cluster.Route{Kind: KindConversation, Identity: a.hook.ConversationId}
	}
	return nil, forwardVia(&a.conv, &kitpb.PostAsWebhook{
		BotId: a.hook.BotId, WorkspaceId: a.hook.WorkspaceId,
		Text: m.Text, Blocks: m.Blocks, KitId: a.hook.KitId,
		Log: a.outcome(LogLevelInfo, "posted", ""), WebhookId: a.id, Limit: limit,
	})
}

// refused disables the webhook whose channel refused a post for good
// (archived, or the Kit bot left: even if the bot is added again later),
// then answers the post 410.
func (a *webhookActor) refused(m *kitpb.WebhookRefused) (proto.Message, error) {
	if a.hook.State == WebhookActive {
		if _, err := a.end(WebhookDisabled, m.Reason, a.outcome(LogLevelError, "disabled", kiterr.Gone)); err != nil {
			return nil, err
		}
		a.lastRefusalLog[kiterr.Gone] = a.env.Clock.Now()
	}
	// The refused post took a token; the 410 shows the bucket.
	return nil, kiterr.Spending(errHookGone, m.Limit)
}

// channelArchived asks the webhook's conversation whether it is archived.
func (a *webhookActor) channelArchived() (bool, error) {
	r, err := cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, a.hook.ConversationId,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerOperator}})
	if err != nil {
		return false, fmt.Errorf("webhook %s: read its channel: %w", a.id, err)
	}
	return r.Conversation.GetArchived(), nil
}

// outcome is the developer log entry of one delivery that ended with code
// ("" for posted); its httpStatus is the one the hooks host answers.
func (a *webhookActor) outcome(level, status string, code kiterr.Code) *kitpb.DevLogEntry {
	e := newLogEntry(a.env, LogSourceDelivery, level, "webhook.post", a.hook.InstallationId)
	e.Status, e.ErrorCode, e.SubjectId = status, string(code), a.id
	e.HttpStatus = proto.Int32(int32(code.Status()))
	return e
}

// logRefusal logs a refusal, at most one per code and refusalLogInterval.
func (a *webhookActor) logRefusal(code kiterr.Code, status string) {
	now := a.env.Clock.Now()
	if last, ok := a.lastRefusalLog[code]; ok && now.Sub(last) < refusalLogInterval {
		return
	}
	a.lastRefusalLog[code] = now
	writeLogAsync(a.env, partition.Of(a.id), a.hook.KitId, a.outcome(LogLevelError, status, code))
}

// WebhookURL is the URL of a webhook under the public origin base: the
// only place its secret is ever shown (docs/api.md "Incoming webhooks").
func WebhookURL(base, installationID, webhookID, secret string) string {
	return base + "/hooks/v1/" + installationID + "/" + webhookID + "/" + secret
}

// HookSecretHash is the stored form of a webhook secret, and the form in
// which the HTTP layer hands a presented secret to the actor.
func HookSecretHash(secret string) []byte {
	h := ids.Hash(secret)
	return h[:]
}
