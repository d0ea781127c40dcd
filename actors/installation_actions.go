package actors

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Member action kinds: the type of the delivery's body, and the developer
// log's event (<kind>.delivery).
const (
	ActionCommand     = "command"
	ActionInteraction = "interaction"
)

// ResponseTokenPrefix starts every responseUrl token.
const ResponseTokenPrefix = "kresp_"

// ResponseURL is the responseUrl of token under the public origin base:
// the only place the token is ever shown (the delivery's body).
func ResponseURL(base, installationID, token string) string {
	return base + "/hooks/v1/responses/" + installationID + "/" + token
}

// ErrResponseURLNotFound is the one answer of a responseUrl that cannot be
// used: unknown, used up, expired, or of an uninstalled Kit.
var ErrResponseURLNotFound = kiterr.Absent("response URL")

// errKitUnavailable answers a member action whose Kit gave no usable
// answer; the developer log says why.
var errKitUnavailable = kiterr.New(kiterr.KitUnavailable, "the Kit did not answer within 3 seconds, or answered with an error")

// ErrorInFlightLimit is the errorCode of a call not made: its installation's
// 10 deliveries in flight, or its Kit's 50, were all held until its
// deadline (docs/deliveries.md "Member actions").
const ErrorInFlightLimit = "in_flight_limit"

// errKitBusy answers a member action whose call was not made for want of
// a slot: the same 502, said as it is, since the Kit was never asked.
var errKitBusy = kiterr.New(kiterr.KitUnavailable, "the Kit has as many calls and events in flight as it may take; try again in a moment")

// Developer log errorCodes of a 2xx answer the service could not use.
const (
	// ErrorInvalidAnswer: the body is not JSON of the answer's shape, or
	// its message breaks a rule of POST /messages.
	ErrorInvalidAnswer = "invalid_answer"
	// errorAnswerRefused: the conversation refused the Kit bot's post (it
	// is not in the conversation, or the conversation was archived).
	errorAnswerRefused = "answer_refused"
)

// handleMemberActions answers what member actions ask of an installation
// (docs/deliveries.md "Member actions"); ok is false for any other request.
func (a *installationActor) handleMemberActions(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.BeginMemberAction:
		reply, err = a.beginMemberAction(m)
	case *kitpb.FinishMemberAction:
		reply, err = a.finishMemberAction(m)
	case *kitpb.UseResponseURL:
		reply, err = a.useResponseURL(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// beginMemberAction lets the HTTP layer call the Kit: the installed
// version takes this action (it declares the command, or interactivity),
// the member's bucket has a token, and a responseUrl token is stored,
// hashed, before its only copy leaves in the reply.
func (a *installationActor) beginMemberAction(m *kitpb.BeginMemberAction) (proto.Message, error) {
	if a.inst.WorkspaceId != m.WorkspaceId {
		return nil, kiterr.Absent("installation")
	}
	if !a.inst.ActionsKnown {
		if err := a.learnMemberActions(); err != nil {
			return nil, err
		}
	}
	var url string
	var bucket limits.Name
	var key string
	switch m.Kind {
	case ActionCommand:
		if !slices.Contains(a.inst.Commands, m.Command) {
			return nil, kiterr.Absent("command")
		}
		url, bucket, key = a.inst.CommandsUrl, limits.SlashCommands, m.UserId+"\x00"+m.Command
	case ActionInteraction:
		url, bucket, key = a.inst.InteractivityUrl, limits.Interactions, m.UserId
	default:
		return nil, fmt.Errorf("installation %s: unknown member action %q", a.id, m.Kind)
	}
	if url == "" {
		// An update dropped interactivity: older messages keep their
		// buttons, and no Kit takes them any more.
		return nil, kiterr.Absent("action")
	}
	// Only once the action is the Kit's: a command is asked of every
	// installation of the workspace in turn, and another Kit's must not
	// find a suspended one in its way.
	if err := refuseIfSuspended(a.env, a.inst.KitId); err != nil {
		return nil, err // nothing is sent to a suspended Kit
	}
	now := a.env.Clock.Now()
	b := a.env.newBatch()
	pruned, err := a.pruneResponseURLs(b, now)
	if err != nil {
		return nil, err
	}
	var limit *kitpb.Decision
	if d, on := a.buckets.take(bucket, key, now); on {
		if !d.OK {
			return nil, kiterr.OverLimit(d)
		}
		limit = d.Wire()
	}
	token := ids.NewSecret(ResponseTokenPrefix)
	hash := ids.Hash(token)
	put(b, responseURLKey(a.id, hash[:]), &kitpb.ResponseURL{
		ConversationId: m.ConversationId, MessageId: m.MessageId,
		ExpiresAt: nanos(now.Add(limits.ResponseURLLifetime)),
	})
	if err := b.Commit(); err != nil {
		a.buckets.giveBack(bucket, key, now)
		return nil, fmt.Errorf("store response URL of %s: %w", a.id, err)
	}
	if pruned {
		a.responsesPruned = now
	}
	return &kitpb.MemberActionGrant{
		KitId: a.inst.KitId, Url: url, ResponseToken: token, Limit: limit,
		BotId: a.inst.BotId, Interactive: a.inst.Interactive,
	}, nil
}

// pruneResponseURLs deletes, in b, the responseUrl records that expired
// before they were used up (a used-up one is deleted by its last use), at
// most once per lifetime of a token: each scan then finds about one
// lifetime's worth. It reports whether it scanned.
func (a *installationActor) pruneResponseURLs(b batch, now time.Time) (bool, error) {
	if !a.responsesPruned.IsZero() && now.Sub(a.responsesPruned) < limits.ResponseURLLifetime {
		return false, nil
	}
	lower := responseURLsPrefix(a.id)
	rec := &kitpb.ResponseURL{}
	var err error
	scanErr := a.env.Store.Scan(lower, persistence.PrefixEnd(lower), false, func(k, v []byte) bool {
		if err = proto.Unmarshal(v, rec); err != nil {
			return false
		}
		if nanos(now) >= rec.ExpiresAt {
			b.Delete(bytes.Clone(k))
		}
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return false, fmt.Errorf("prune response URLs of %s: %w", a.id, err)
	}
	return true, nil
}

// setMemberActions writes into inst what member actions its installed
// version man takes.
func setMemberActions(inst *kitpb.Installation, man *manifest.Manifest) {
	inst.Commands, inst.CommandsUrl, inst.InteractivityUrl = nil, man.Endpoints.Commands, ""
	for _, c := range man.Commands {
		inst.Commands = append(inst.Commands, c.Name)
	}
	if man.Interactivity != nil {
		inst.InteractivityUrl = man.Interactivity.URL
	}
	inst.ActionsKnown = true
}

// learnMemberActions derives the member actions of an installation that
// an older build recorded without them, from its installed version's
// manifest, and saves them: once, on the first action that needs them.
func (a *installationActor) learnMemberActions() error {
	man, err := a.installedManifest()
	if err != nil {
		return err
	}
	next := proto.Clone(a.inst).(*kitpb.Installation)
	setMemberActions(next, man)
	return a.save(next, nil)
}

// botCaller is the installation's bot as the author of a post.
func (a *installationActor) botCaller() *kitpb.Caller {
	return &kitpb.Caller{
		Kind: CallerBot, WorkspaceId: a.inst.WorkspaceId, InstallationId: a.id,
		BotId: a.inst.BotId, Interactive: a.inst.Interactive,
	}
}

// finishMemberAction posts the Kit's answer as its bot, when it has one,
// and logs the attempt in one synced batch before the member gets the
// answer: 502 kit_unavailable for any failure, the Kit's or its answer's.
func (a *installationActor) finishMemberAction(m *kitpb.FinishMemberAction) (proto.Message, error) {
	code := m.ErrorCode
	var posted *kitpb.Message
	if code == "" && m.Post {
		r, err := cluster.Call[*kitpb.MessageReply](a.env.Host, KindConversation, m.ConversationId,
			&kitpb.PostMessage{Caller: a.botCaller(), Text: m.Text, Blocks: m.Blocks})
		switch {
		case err == nil:
			posted = r.Message
		case kiterr.CodeOf(err) == kiterr.Validation:
			code = ErrorInvalidAnswer
		case kiterr.CodeOf(err) == kiterr.NotFound, kiterr.CodeOf(err) == kiterr.Conflict, kiterr.CodeOf(err) == kiterr.RateLimited:
			code = errorAnswerRefused
		default:
			return nil, err
		}
	}
	e := newLogEntry(a.env, LogSourceDelivery, LogLevelInfo, m.Kind+".delivery", a.id)
	e.Status, e.ErrorCode, e.SubjectId = "delivered", code, m.ConversationId
	if code != "" {
		e.Level, e.Status = LogLevelError, "failed"
	}
	if m.HttpStatus != 0 {
		e.HttpStatus = proto.Int32(m.HttpStatus)
	}
	e.Attempt, e.DurationMs = proto.Int32(1), proto.Int64(m.DurationMs)
	b := a.env.newBatch()
	a.env.putLog(b, partition.Of(a.id), a.inst.KitId, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("log %s of %s: %w", m.Kind, a.id, err)
	}
	switch code {
	case "":
	case ErrorKitSuspended:
		return nil, ErrKitSuspended // suspended while the call waited: the 403 of "Kit state"
	case ErrorInFlightLimit:
		return nil, errKitBusy
	default:
		return nil, errKitUnavailable
	}
	return &kitpb.MessageReply{Message: posted}, nil
}

// useResponseURL posts (or replaces the original message) as the Kit bot
// through a responseUrl, then counts the use in a synced batch before the
// reply: a refused post (a bad body) spends no use. Every way the token
// cannot be used answers the same 404.
func (a *installationActor) useResponseURL(m *kitpb.UseResponseURL) (proto.Message, error) {
	k := responseURLKey(a.id, m.TokenHash)
	rec := &kitpb.ResponseURL{}
	found, err := load(a.env.Store, k, rec)
	if err != nil {
		return nil, fmt.Errorf("load response URL of %s: %w", a.id, err)
	}
	now := a.env.Clock.Now()
	// A used-up token's record is gone (below).
	if !found || nanos(now) >= rec.ExpiresAt {
		return nil, ErrResponseURLNotFound
	}
	if err := refuseIfSuspended(a.env, a.inst.KitId); err != nil {
		return nil, err // and the use is not counted
	}
	var limit *kitpb.Decision
	if d, on := a.buckets.take(limits.ResponseURL, "", now); on {
		if !d.OK {
			return nil, kiterr.OverLimit(d)
		}
		limit = d.Wire()
	}
	var req proto.Message = &kitpb.PostMessage{Caller: a.botCaller(), Text: m.Text, Blocks: m.Blocks, ThreadParentId: ""}
	if m.ReplaceOriginal && rec.MessageId != "" {
		req = &kitpb.EditMessage{Caller: a.botCaller(), MessageId: rec.MessageId, Text: m.Text, Blocks: m.Blocks}
	}
	if _, err := cluster.Call[*kitpb.MessageReply](a.env.Host, KindConversation, rec.ConversationId, req); err != nil {
		if limit != nil && kiterr.CodeOf(err) == kiterr.RateLimited {
			// The conversation's post bucket refused it: a refused
			// request spends no token of any bucket (docs/decisions.md
			// "Rate limits").
			a.buckets.giveBack(limits.ResponseURL, "", now)
			return nil, err
		}
		// Any other refusal spent the token: its answer shows the bucket.
		return nil, kiterr.Spending(err, limit)
	}
	rec.Uses++
	b := a.env.newBatch()
	if rec.Uses >= limits.ResponseURLUses {
		b.Delete(k) // used up: nothing of it is needed any more
	} else {
		put(b, k, rec)
	}
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("count a use of a response URL of %s: %w", a.id, err)
	}
	return &kitpb.UseResponseURLReply{Limit: limit}, nil
}
