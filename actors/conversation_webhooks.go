package actors

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Why a conversation refuses a webhook's post. Either disables the webhook
// for good (410 gone); the webhook tells them apart by message.
var (
	errHookChannelArchived = kiterr.New(kiterr.Gone, "the webhook's channel is archived")
	errHookBotRemoved      = kiterr.New(kiterr.Gone, "the Kit bot is not in the webhook's channel")
)

// handleWebhooks answers what incoming webhooks ask of a conversation; ok is
// false for any other request. A post arrives forwarded by its webhook with
// the hooks host as sender: the answer goes to the hooks host, except a
// refusal that disables the webhook, which goes to the webhook (same
// sender) so that it is stored before the 410 leaves.
func (a *conversationActor) handleWebhooks(msg proto.Message) (reply proto.Message, ok bool, err error) {
	m, ok := msg.(*kitpb.PostAsWebhook)
	if !ok {
		return nil, false, nil
	}
	reply, err = a.postAsWebhook(m)
	if m.WebhookId == "" || err == nil {
		return reply, true, err
	}
	switch {
	case errors.Is(err, errHookChannelArchived):
		return nil, true, forward(KindWebhook, m.WebhookId, &kitpb.WebhookRefused{Reason: DisabledArchived, Limit: m.Limit})
	case errors.Is(err, errHookBotRemoved):
		return nil, true, forward(KindWebhook, m.WebhookId, &kitpb.WebhookRefused{Reason: DisabledBotRemoved, Limit: m.Limit})
	}
	// Nobody else sees this outcome: the delivery log entry is written here.
	e := m.Log
	code := kiterr.CodeOf(err)
	e.Level, e.Status = LogLevelError, "failed"
	if code == kiterr.Validation {
		e.Status = "rejected"
	} else {
		code = kiterr.Internal
	}
	e.ErrorCode, e.HttpStatus = string(code), proto.Int32(int32(code.Status()))
	if m.KitId != "" {
		writeLogAsync(a.env, partition.OfTag(a.tag), m.KitId, e)
	}
	if code == kiterr.Validation {
		// The post spent its webhook's token: the 400 shows the bucket.
		// A failed write gave it back (postAsWebhook).
		err = kiterr.Spending(err, m.Limit)
	}
	return nil, true, err
}

// postAsWebhook posts as the Kit bot for an incoming webhook. Unlike
// POST /messages it takes no post_message bucket (the webhook has its own),
// has no idempotency key or thread, and always removes interactive
// elements. The delivery's log entry commits with the message.
func (a *conversationActor) postAsWebhook(m *kitpb.PostAsWebhook) (proto.Message, error) {
	if a.conv.Archived {
		return nil, errHookChannelArchived
	}
	if _, ok := a.bots[m.BotId]; !ok || a.conv.WorkspaceId != m.WorkspaceId {
		return nil, errHookBotRemoved
	}
	caller := &kitpb.Caller{Kind: CallerBot, WorkspaceId: m.WorkspaceId, BotId: m.BotId, Interactive: false}
	content, err := a.checkBlocks(caller, m.Blocks)
	if err != nil {
		return nil, err
	}
	seq, err := a.nextSeq()
	if err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	msg := &kitpb.Message{
		Id: ids.NewMessage(now, a.tag, seq), ConversationId: a.id, AuthorKind: "bot", AuthorId: m.BotId,
		Text: m.Text, Blocks: content, CreatedAt: nanos(now), Seq: seq,
	}
	b := a.env.newBatch()
	// A post into the conversation, as POST /messages: it sweeps the
	// expired Idempotency records too, or a channel a webhook feeds
	// after its keyed posts stopped would keep their records.
	sweepAt, err := a.sweepIdempotency(b, nanos(now))
	if err != nil {
		b.Close()
		err = fmt.Errorf("sweep idempotency records of %s: %w", a.id, err)
	} else {
		rec := a.putMessage(b, msg)
		if a.eventMask != 0 {
			a.emitPosted(b, msg, rec)
		}
		if m.Log != nil && m.KitId != "" {
			a.env.putLog(b, partition.OfTag(a.tag), m.KitId, m.Log)
		}
		err = a.applyPost(b, msg, seq)
	}
	if err != nil {
		if m.WebhookId != "" && m.Limit != nil {
			// A post that failed (503, to retry) posted nothing: its
			// webhook's token goes back. The webhook took it before the
			// post came here, and a forward that never arrived comes
			// again under the same post id without a take of its own,
			// so no token is given back twice. Asked from a goroutine of
			// its own: the conversation waits for no other actor.
			host, hook := a.env.Host, m.WebhookId
			go func() {
				_, _ = cluster.Call[*kitpb.Ok](host, KindWebhook, hook, &kitpb.ReturnToken{Bucket: string(limits.Webhook)})
			}()
		}
		return nil, fmt.Errorf("webhook post into %s: %w", a.id, err)
	}
	a.idemSweepAt = sweepAt
	if m.WebhookId != "" {
		return &kitpb.HookPostReply{Limit: m.Limit}, nil
	}
	return &kitpb.MessageReply{Message: msg}, nil
}
