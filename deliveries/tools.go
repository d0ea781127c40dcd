package deliveries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"unicode/utf8"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Tools runs the calls of tool runs (docs/deliveries.md "Tool calls and
// runs"): the installation records a run queued, and Tools marks it
// running, calls the Kit's endpoints.tools and reports the outcome. The
// installation decides and stores every status; Tools only speaks HTTP.
type Tools struct {
	sender *Sender
	node   *cluster.Host
	logger *slog.Logger
}

// NewTools is the runner of tool calls made through sender.
func NewTools(sender *Sender) *Tools {
	return &Tools{sender: sender, node: sender.cfg.Node, logger: sender.cfg.Logger}
}

// ToolCall is a queued run and what its call needs.
type ToolCall struct {
	Run            *kitpb.Run
	KitID          string
	InstallationID string
	Endpoint       string          // endpoints.tools of the installed version
	Arguments      json.RawMessage // a JSON object
}

// Reasons of a failed run beyond a call's own (CallError.Reason).
const (
	// ReasonInvalidAnswer: the 2xx answer is not a JSON object with a
	// result member.
	ReasonInvalidAnswer = "invalid_answer"
	// ReasonResultTooLarge: the result is longer than
	// limits.ToolResultBytes.
	ReasonResultTooLarge = "result_too_large"
)

// Start runs c's call in its own goroutine: the member was answered once
// the run was queued.
func (t *Tools) Start(c ToolCall) { go t.run(c) }

func (t *Tools) run(c ToolCall) {
	_, err := cluster.Call[*kitpb.RunReply](t.node, actors.KindInstallation, c.InstallationID, &kitpb.StartRun{RunId: c.Run.Id})
	if err != nil {
		// Not running: the call is not made. The run stays queued until
		// the installation's next activation fails it as interrupted.
		t.warn("tool run not started", c, err)
		return
	}
	fin := &kitpb.FinishRun{RunId: c.Run.Id}
	body, err := json.Marshal(toolCallBody{
		Type: "tool_call", RunID: c.Run.Id, Tool: c.Run.Tool, Arguments: c.Arguments,
		UserID: c.Run.RequesterUserId, ConversationID: c.Run.ConversationId, InstallationID: c.InstallationID,
	})
	if err != nil {
		fin.ErrorCode = ReasonInvalidAnswer // arguments the handler checked are valid JSON
	} else {
		ans, took, err := t.sender.Call(context.Background(), Call{KitID: c.KitID, InstallationID: c.InstallationID, URL: c.Endpoint, Body: body})
		fin.DurationMs = took.Milliseconds()
		var ce *CallError
		switch {
		case errors.As(err, &ce):
			fin.ErrorCode, fin.HttpStatus = ce.Reason, int32(ce.Status)
		case err != nil:
			fin.ErrorCode = "internal_error"
		default:
			fin.HttpStatus = int32(ans.Status)
			fin.Result, fin.ErrorCode = ToolResult(ans.Body)
			fin.Succeeded = fin.ErrorCode == ""
		}
	}
	if _, err := cluster.Call[*kitpb.RunReply](t.node, actors.KindInstallation, c.InstallationID, fin); err != nil {
		t.warn("tool run outcome not recorded", c, err)
	}
}

func (t *Tools) warn(msg string, c ToolCall, err error) {
	if t.logger != nil {
		t.logger.Warn(msg, "installation", c.InstallationID, "run", c.Run.Id, "err", err)
	}
}

// toolCallBody is what endpoints.tools receives.
type toolCallBody struct {
	Type           string          `json:"type"`
	RunID          string          `json:"runId"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	UserID         string          `json:"userId"`
	ConversationID string          `json:"conversationId"`
	InstallationID string          `json:"installationId"`
}

// ToolResult reads a Kit's 2xx answer to a tool call, {"result": any JSON},
// and returns the result's JSON (compacted), or the reason the answer is
// refused (a result that is not UTF-8 is invalid). Other members of the
// answer are ignored, so Kits may add some.
func ToolResult(answer []byte) (result []byte, reason string) {
	var members map[string]json.RawMessage
	if json.Unmarshal(answer, &members) != nil || members == nil {
		return nil, ReasonInvalidAnswer
	}
	r, ok := members["result"]
	if !ok {
		return nil, ReasonInvalidAnswer
	}
	var buf bytes.Buffer
	// encoding/json takes invalid UTF-8 inside strings; the result is
	// shown as kept, and JSON text must be UTF-8 (RFC 8259 8.1).
	if err := json.Compact(&buf, r); err != nil || !utf8.Valid(buf.Bytes()) {
		return nil, ReasonInvalidAnswer
	}
	if buf.Len() > limits.ToolResultBytes {
		return nil, ReasonResultTooLarge
	}
	return buf.Bytes(), ""
}
