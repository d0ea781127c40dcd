package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/blocks"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// KitCaller makes the synchronous signed call to a Kit's endpoint that a
// member action waits for (deliveries.Sender.Call): 2xx within 3 seconds,
// or a *deliveries.CallError whose Reason is the developer log's errorCode.
type KitCaller interface {
	Call(ctx context.Context, c deliveries.Call) (deliveries.Answer, time.Duration, error)
}

// maxCommandText bounds the text after a slash command: what a member
// types in one line of the message box.
const maxCommandText = 4000

type commandBody struct {
	ConversationID *string `json:"conversationId"`
	Command        *string `json:"command"`
	Text           *string `json:"text"`
}

// commandDelivery is the body a Kit's endpoints.commands receives.
type commandDelivery struct {
	Type           string `json:"type"`
	Command        string `json:"command"`
	Text           string `json:"text"`
	UserID         string `json:"userId"`
	ConversationID string `json:"conversationId"`
	InstallationID string `json:"installationId"`
	ResponseURL    string `json:"responseUrl"`
}

// memberCommand serves POST /app/api/commands: the conversation must be
// the member's, the first installation (oldest) whose installed version
// declares the command takes it, and its Kit must answer 2xx within 3 s.
func (s *Server) memberCommand(in call) (reply, error) {
	var body commandBody
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(
			input.RequireUUID("conversationId", body.ConversationID),
			input.RequireString("command", body.Command, 2, 33),
			input.RequireString("text", body.Text, 0, maxCommandText),
		)
	}
	if err == nil && !strings.HasPrefix(*body.Command, "/") {
		err = kiterr.Invalid("command", "must start with /")
	}
	if err != nil {
		return reply{}, err
	}
	caller := memberCaller(in.member)
	if _, err := ask[*kitpb.Ok](s, actors.KindConversation, *body.ConversationID, &kitpb.SeeConversation{Caller: caller}); err != nil {
		return reply{}, err
	}
	installs, err := ask[*kitpb.InstallationIdsReply](s, actors.KindWorkspace, in.member.WorkspaceID, &kitpb.ListInstallations{})
	if err != nil {
		return reply{}, err
	}
	begin := &kitpb.BeginMemberAction{
		Kind: actors.ActionCommand, WorkspaceId: in.member.WorkspaceID, UserId: in.member.UserID,
		ConversationId: *body.ConversationID, Command: *body.Command,
	}
	for _, inst := range installs.InstallationIds {
		grant, err := ask[*kitpb.MemberActionGrant](s, actors.KindInstallation, inst, begin)
		if kiterr.CodeOf(err) == kiterr.NotFound {
			continue // not live, or its version does not declare the command
		}
		if err != nil {
			return reply{}, err
		}
		return s.callKit(in, actors.ActionCommand, inst, *body.ConversationID, grant, commandDelivery{
			Type: actors.ActionCommand, Command: *body.Command, Text: *body.Text,
			UserID: in.member.UserID, ConversationID: *body.ConversationID, InstallationID: inst,
			ResponseURL: actors.ResponseURL(s.publicURL, inst, grant.ResponseToken),
		})
	}
	return reply{}, kiterr.Absent("command")
}

type interactionBody struct {
	MessageID *string `json:"messageId"`
	ActionID  *string `json:"actionId"`
	Value     *string `json:"value"`
}

// interactionDelivery is the body a Kit's interactivity.url receives.
type interactionDelivery struct {
	Type           string `json:"type"`
	ActionID       string `json:"actionId"`
	Value          string `json:"value"`
	MessageID      string `json:"messageId"`
	UserID         string `json:"userId"`
	ConversationID string `json:"conversationId"`
	InstallationID string `json:"installationId"`
	ResponseURL    string `json:"responseUrl"`
}

// memberInteraction serves POST /app/api/interactions: the member must see
// the message, a Kit bot of its conversation must have written it, and it
// must have an element with that actionId.
func (s *Server) memberInteraction(in call) (reply, error) {
	var body interactionBody
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(
			input.RequireUUID("messageId", body.MessageID),
			input.RequireString("actionId", body.ActionID, 1, 255),
		)
	}
	if err == nil && body.Value != nil {
		err = input.StringLen("value", *body.Value, 1, 2000)
	}
	if err != nil {
		return reply{}, err
	}
	convID, err := actors.LocateMessage(s.env, *body.MessageID)
	if err != nil {
		return reply{}, err
	}
	found, err := ask[*kitpb.ActionReply](s, actors.KindConversation, convID, &kitpb.FindAction{
		Caller: memberCaller(in.member), MessageId: *body.MessageID, ActionId: *body.ActionID, Value: body.Value,
	})
	if err != nil {
		return reply{}, err
	}
	inst := found.InstallationId
	grant, err := ask[*kitpb.MemberActionGrant](s, actors.KindInstallation, inst, &kitpb.BeginMemberAction{
		Kind: actors.ActionInteraction, WorkspaceId: in.member.WorkspaceID, UserId: in.member.UserID,
		ConversationId: convID, MessageId: *body.MessageID,
	})
	if err != nil {
		return reply{}, err
	}
	return s.callKit(in, actors.ActionInteraction, inst, convID, grant, interactionDelivery{
		Type: actors.ActionInteraction, ActionID: *body.ActionID, Value: found.Value, MessageID: *body.MessageID,
		UserID: in.member.UserID, ConversationID: convID, InstallationID: inst,
		ResponseURL: actors.ResponseURL(s.publicURL, inst, grant.ResponseToken),
	})
}

// memberCaller is the member of a session as the caller of a conversation.
func memberCaller(m *actors.WebSession) *kitpb.Caller {
	return &kitpb.Caller{Kind: actors.CallerUser, WorkspaceId: m.WorkspaceID, UserId: m.UserID}
}

// callKit makes the call grant allowed, has the installation log it and
// post the answer, and answers the member {ok, message}.
func (s *Server) callKit(in call, kind, inst, convID string, grant *kitpb.MemberActionGrant, delivery any) (reply, error) {
	if grant.Limit != nil {
		setRateHeaders(in.ctx, limits.FromWire(grant.Limit, s.limits))
	}
	finish := &kitpb.FinishMemberAction{Kind: kind, ConversationId: convID}
	var ephemeral *kitpb.Message
	body, err := json.Marshal(delivery)
	if err != nil {
		return reply{}, err
	}
	if s.kits == nil {
		finish.ErrorCode = deliveries.ReasonConnection
	} else {
		ans, took, err := s.kits.Call(in.ctx, deliveries.Call{KitID: grant.KitId, InstallationID: inst, URL: grant.Url, Body: body})
		finish.DurationMs = took.Milliseconds()
		var ce *deliveries.CallError
		switch {
		case errors.As(err, &ce):
			finish.ErrorCode, finish.HttpStatus = ce.Reason, int32(ce.Status)
		case err != nil:
			return reply{}, err
		default:
			finish.HttpStatus = int32(ans.Status)
			ephemeral = s.readAnswer(ans.Body, convID, grant, finish)
		}
	}
	posted, err := ask[*kitpb.MessageReply](s, actors.KindInstallation, inst, finish)
	if err != nil {
		return reply{}, err
	}
	msg := posted.Message
	if ephemeral != nil {
		msg = ephemeral
	}
	b := append(bodyBuffer(in.ctx), `{"ok":true,"message":`...)
	if msg == nil {
		b = append(b, "null"...)
	} else {
		b = appendMessage(b, msg)
	}
	return rawReply(fasthttp.StatusOK, append(b, '}'))
}

// kitAnswer is a Kit's 2xx answer to a member action. An empty body or
// {} posts nothing; other keys are ignored, so that a Kit may answer what
// its framework answers.
type kitAnswer struct {
	Text      *string         `json:"text"`
	Blocks    json.RawMessage `json:"blocks"`
	Ephemeral bool            `json:"ephemeral"`
}

// readAnswer reads the Kit's answer into finish (the message to post), or
// returns the ephemeral message it asks for, which is never stored: it
// reaches the member in the route's answer only. An answer that breaks a
// rule of POST /messages is the Kit failing (invalid_answer).
func (s *Server) readAnswer(raw []byte, convID string, grant *kitpb.MemberActionGrant, finish *kitpb.FinishMemberAction) *kitpb.Message {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var a kitAnswer
	// Read as every body is (input.DecodeJSON): a key given twice is
	// refused, so which text, or whether ephemeral, is never a guess.
	if input.DecodeJSON(raw, &a) != nil || (a.Text == nil && len(rawBlocks(a.Blocks)) > 0) {
		finish.ErrorCode = actors.ErrorInvalidAnswer
		return nil
	}
	if a.Text == nil {
		return nil
	}
	if messageText(a.Text) != nil {
		finish.ErrorCode = actors.ErrorInvalidAnswer
		return nil
	}
	if !a.Ephemeral {
		finish.Post, finish.Text, finish.Blocks = true, *a.Text, rawBlocks(a.Blocks)
		return nil
	}
	var stored []byte
	if raw := rawBlocks(a.Blocks); raw != nil {
		// No file is visible to a message that is not stored.
		out, err := blocks.Validate(raw, blocks.Policy{Interactive: grant.Interactive})
		if err != nil {
			finish.ErrorCode = actors.ErrorInvalidAnswer
			return nil
		}
		stored = out
	}
	return &kitpb.Message{
		Id: ids.New(), ConversationId: convID, AuthorKind: "bot", AuthorId: grant.BotId,
		Text: *a.Text, Blocks: stored, CreatedAt: s.env.Clock.Now().UnixNano(),
	}
}

type responseBody struct {
	Text            *string         `json:"text"`
	Blocks          json.RawMessage `json:"blocks"`
	ReplaceOriginal *bool           `json:"replaceOriginal"`
}

// responsePost serves POST {hooks_url}/v1/responses/{installationId}/{token}:
// the token is the credential. Its body is checked before the token (a 400
// for a body the token could not have carried either), and every way the
// token cannot be used answers the hooks host's one 404.
func (s *Server) responsePost(in call) (reply, error) {
	instID, token := in.param("installationId"), in.param("token")
	var body responseBody
	err := in.decode(&body)
	if err == nil {
		err = messageText(body.Text)
	}
	if err != nil {
		return reply{}, err
	}
	if !ids.Valid(instID) || !ids.WellFormed(token, actors.ResponseTokenPrefix) {
		return reply{}, actors.ErrResponseURLNotFound
	}
	hash := ids.Hash(token)
	r, err := ask[*kitpb.UseResponseURLReply](s, actors.KindInstallation, instID, &kitpb.UseResponseURL{
		TokenHash: hash[:], Text: *body.Text, Blocks: rawBlocks(body.Blocks),
		ReplaceOriginal: body.ReplaceOriginal != nil && *body.ReplaceOriginal,
	})
	if err != nil {
		return reply{}, err
	}
	if r.Limit != nil {
		setRateHeaders(in.ctx, limits.FromWire(r.Limit, s.limits))
	}
	return jsonReply(fasthttp.StatusOK, okBody)
}
