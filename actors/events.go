package actors

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Events to Kits (docs/deliveries.md). The actor whose write causes an
// event records it in the same batch as the write, in the outbox of each
// installation that gets it (outboxKey), and after applying the batch sends
// the installation's delivery actor a notice. The delivery actor takes the
// event out of the outbox and gives it the installation's next sequence
// (delivery.go). So a post never waits on another actor, and an event
// exists exactly when its write does.

// eventKind is an event kind of docs/manifest.md. Its value is its bit in
// the stored masks (BotMember.events, Installation.events): append only.
type eventKind uint8

const (
	eventBotAdded eventKind = iota
	eventBotMentioned
	eventBotRemoved
	eventChannelArchived
	eventChannelCreated
	eventChannelMemberJoined
	eventChannelMemberLeft
	eventChannelRenamed
	eventFileShared
	eventInstallationUninstalled
	eventInstallationUpdated
	eventMessageDeleted
	eventMessageEdited
	eventMessagePosted
	eventReactionAdded
	eventReactionRemoved
	eventUserJoined
	eventUserUpdated
	numEventKinds
)

// eventNames are the kinds' names, in the order of their values.
var eventNames = [numEventKinds]string{
	"bot.added", "bot.mentioned", "bot.removed",
	"channel.archived", "channel.created", "channel.member_joined", "channel.member_left", "channel.renamed",
	"file.shared", "installation.uninstalled", "installation.updated",
	"message.deleted", "message.edited", "message.posted", "reaction.added", "reaction.removed",
	"user.joined", "user.updated",
}

func (k eventKind) String() string { return eventNames[k] }

func (k eventKind) bit() uint32 { return 1 << k }

// eventMask is the set of kinds man subscribes to that its bot may see:
// each kind's need (a bot, a bot scope) must be met. Parse refuses a
// manifest that subscribes to more, but a stored manifest is not trusted
// to have been checked by the rules of today.
func eventMask(man *manifest.Manifest) uint32 {
	var mask uint32
	for _, name := range man.Events {
		k, ok := eventKindOf(name)
		if !ok {
			continue
		}
		needs, _ := manifest.EventNeeds(name)
		switch {
		case needs == "":
		case man.Bot == nil:
			continue
		case needs != "bot" && !containsString(man.Bot.Scopes, needs):
			continue
		}
		mask |= k.bit()
	}
	return mask
}

func eventKindOf(name string) (eventKind, bool) {
	for k, n := range eventNames {
		if n == name {
			return eventKind(k), true
		}
	}
	return 0, false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Event data is stored as protobuf; a message's is the very bytes of its
// record, appended as field eventMessageField (protobuf lets fields follow
// one another in any order, and a message field is its bytes).
const (
	eventMessageField  = 10
	eventSequenceField = 5
)

// encodeEvent is the outbox record of ev, with the stored message record
// msg (nil when the event is not about a message).
func encodeEvent(ev *kitpb.Event, msg []byte) []byte {
	v := marshal(ev)
	if msg != nil {
		v = protowire.AppendTag(v, eventMessageField, protowire.BytesType)
		v = protowire.AppendBytes(v, msg)
	}
	return v
}

// withSequence is the outbox record rec with its sequence, in a new slice:
// rec may be shared by the notices of several installations.
func withSequence(rec []byte, seq uint64) []byte {
	v := make([]byte, 0, len(rec)+1+protowire.SizeVarint(seq))
	v = append(v, rec...)
	v = protowire.AppendTag(v, eventSequenceField, protowire.VarintType)
	return protowire.AppendVarint(v, seq)
}

// outboxNotice is a notice for a delivery actor, kept until the batch that
// wrote its event is applied.
type outboxNotice struct {
	inst       string
	after, pos uint64
	rec        []byte
}

// outbox is what an emitting actor keeps to write its events.
type outbox struct {
	source string // the emitting actor's identity
	pos    uint64 // the last position written
	// last is, by installation, the position of the last entry written
	// for it, or 0 when none is left from earlier activations (resume):
	// what a notice vouches nothing lies between it and its own.
	last    map[string]uint64
	notices []outboxNotice
}

// add writes rec for inst in b at the outbox's next position. Positions
// follow the clock (unix nanoseconds, at) where it is ahead, so that a
// source that reactivates with an empty outbox never reuses a position
// whose deletion may still be on its way from the delivery actor.
func (o *outbox) add(b batch, inst string, rec []byte, at int64) {
	o.pos = max(o.pos+1, uint64(max(at, 0)))
	b.Set(outboxKey(inst, o.source, o.pos), rec)
	// An installation not resumed vouches for nothing: the delivery
	// actor reads what lies before the entry. (A batch that fails leaves
	// last past positions never written, which vouches for no less.)
	after, known := o.last[inst]
	if !known {
		after = o.pos - 1
	}
	o.remember(inst, o.pos)
	o.notices = append(o.notices, outboxNotice{inst: inst, after: after, pos: o.pos, rec: rec})
}

func (o *outbox) remember(inst string, pos uint64) {
	if o.last == nil {
		o.last = make(map[string]uint64)
	}
	o.last[inst] = pos
}

// applied sends the notices of a batch once it is applied (or committed).
// Pebble's WAL keeps the order of writes, so a delivery actor's commit of
// what it takes makes the write that caused it durable too: an event is
// never sequenced for a write the node could lose.
func (o *outbox) applied(env *Env) {
	for i, n := range o.notices {
		if env.testHookDropNotices.Load() {
			continue
		}
		env.Host.Send(KindDelivery, n.inst, &kitpb.OutboxNotice{Source: o.source, Pos: n.pos, After: n.after, Event: n.rec})
		o.notices[i] = outboxNotice{}
	}
	o.notices = o.notices[:0]
}

// failed forgets the notices of a batch that was not applied.
func (o *outbox) failed() {
	clear(o.notices)
	o.notices = o.notices[:0]
}

// resume sets the outbox's position past whatever it still holds for the
// installations insts, so that new events follow them.
func (o *outbox) resume(store *persistence.Store, insts []string) error {
	for _, inst := range insts {
		if _, known := o.last[inst]; known {
			continue // this activation wrote it, or resumed it already
		}
		prefix := outboxSourcePrefix(inst, o.source)
		var last uint64 // none left: every earlier entry was delivered
		err := store.Scan(prefix, persistence.PrefixEnd(prefix), true, func(k, _ []byte) bool {
			last = decodeSeq(k[len(prefix):])
			return false
		})
		if err != nil {
			return err
		}
		o.pos = max(o.pos, last)
		o.remember(inst, last)
	}
	return nil
}

// Conversation events. A conversation emits to the Kit bots it holds, each
// for the kinds its installation subscribes to (BotMember.events); mask is
// their union, so that a write no bot listens to costs one test.

// emits reports whether any bot here gets events of kind k.
func (a *conversationActor) emits(k eventKind) bool { return a.eventMask&k.bit() != 0 }

// newEvent starts an event of this conversation.
func (a *conversationActor) newEvent(k eventKind, at int64) *kitpb.Event {
	return &kitpb.Event{Id: ids.NewAt(a.env.Clock.Now()), Type: k.String(), OccurredAt: at, ConversationId: a.id}
}

// emit writes ev (with the stored message record msg, if any) in b for
// every bot subscribed to k, or for the bot onlyBot alone when it is set.
func (a *conversationActor) emit(b batch, k eventKind, ev *kitpb.Event, msg []byte, onlyBot string) {
	var rec []byte
	for _, bm := range a.bots {
		if bm.Events&k.bit() == 0 || onlyBot != "" && bm.BotId != onlyBot {
			continue
		}
		if rec == nil {
			rec = encodeEvent(ev, msg)
		}
		a.outbox.add(b, bm.InstallationId, rec, ev.OccurredAt)
	}
}

// emitPosted writes message.posted, and bot.mentioned for each bot the
// text mentions (<@botId>, docs/blocks.md).
func (a *conversationActor) emitPosted(b batch, msg *kitpb.Message, rec []byte) {
	if a.emits(eventMessagePosted) {
		a.emit(b, eventMessagePosted, a.newEvent(eventMessagePosted, msg.CreatedAt), rec, "")
	}
	if !a.emits(eventBotMentioned) || !strings.Contains(msg.Text, "<@") {
		return
	}
	var ev *kitpb.Event
	for _, bm := range a.bots {
		if bm.Events&eventBotMentioned.bit() == 0 || !mentions(msg.Text, bm.BotId) {
			continue
		}
		if ev == nil {
			ev = a.newEvent(eventBotMentioned, msg.CreatedAt)
		}
		a.emit(b, eventBotMentioned, ev, rec, bm.BotId)
	}
}

// mentions reports whether text mentions id as <@id>.
func mentions(text, id string) bool {
	for {
		i := strings.Index(text, "<@")
		if i < 0 {
			return false
		}
		text = text[i+2:]
		// <@id> (docs/blocks.md) or <@user:id> (docs/api.md "Messages").
		rest, _ := strings.CutPrefix(text, "user:")
		if strings.HasPrefix(rest, id) && strings.HasPrefix(rest[len(id):], ">") {
			return true
		}
	}
}

// refreshEventMask recomputes the union of the bots' kinds.
func (a *conversationActor) refreshEventMask() {
	a.eventMask = 0
	for _, bm := range a.bots {
		a.eventMask |= bm.Events
	}
}

// botInstallations lists the installations of the bots here.
func (a *conversationActor) botInstallations() []string {
	out := make([]string, 0, len(a.bots))
	for _, bm := range a.bots {
		out = append(out, bm.InstallationId)
	}
	return out
}

// emitMember writes a channel.member_* event about mem.
func (a *conversationActor) emitMember(b batch, k eventKind, mem *kitpb.Member, at int64) {
	if !a.emits(k) || mem == nil {
		return
	}
	ev := a.newEvent(k, at)
	ev.Conversation, ev.Member = a.conv, mem
	a.emit(b, k, ev, nil, "")
}

// emitBot writes bot.added or bot.removed for bm's installation alone: the
// event is about its own bot. bm need not be in a.bots yet (or still).
func (a *conversationActor) emitBot(b batch, k eventKind, bm *kitpb.BotMember) {
	if bm.Events&k.bit() == 0 {
		return
	}
	at := nanos(a.env.Clock.Now())
	ev := a.newEvent(k, at)
	ev.Conversation = a.conv
	a.outbox.add(b, bm.InstallationId, encodeEvent(ev, nil), at)
}

// EventKinds are the names of every event kind, sorted (kit trigger's
// choices).
func EventKinds() []string { return slices.Clone(eventNames[:]) }
