package api

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// maxToolName is the longest tool name a manifest may declare
// (^[a-z][a-z0-9_]{0,63}$); a longer one is refused as input, a shorter
// undeclared one is not_found.
const maxToolName = 64

// invokeTool is POST /app/api/tools/invoke (OPERATIONS.md section 6): the
// installation checks the call and records the run queued, committed
// before the 202; the call to the Kit follows outside the request.
func (s *Server) invokeTool(in call) (reply, error) {
	var body struct {
		InstallationID *string         `json:"installationId"`
		ConversationID *string         `json:"conversationId"`
		Tool           *string         `json:"tool"`
		Arguments      json.RawMessage `json:"arguments"`
	}
	if err := in.decode(&body); err != nil {
		return reply{}, err
	}
	if err := input.FirstError(
		input.RequireUUID("installationId", body.InstallationID),
		input.RequireUUID("conversationId", body.ConversationID),
		input.RequireString("tool", body.Tool, 1, maxToolName),
		requireObject("arguments", body.Arguments),
	); err != nil {
		return reply{}, err
	}
	// The arguments reach the Kit as sent: a key given twice at any depth
	// is refused, as in every other body (docs/decisions.md "Request bodies").
	if err := input.ValueKeys("arguments", body.Arguments); err != nil {
		return reply{}, err
	}
	// encoding/json takes invalid UTF-8 inside strings, but what the Kit
	// gets must be JSON text, which is UTF-8 (RFC 8259 8.1).
	if !utf8.Valid(body.Arguments) {
		return reply{}, kiterr.Invalid("arguments", "must be valid UTF-8")
	}
	r, err := ask[*kitpb.ToolCallReply](s, actors.KindInstallation, *body.InstallationID, &kitpb.InvokeTool{
		WorkspaceId: in.member.WorkspaceID, UserId: in.member.UserID,
		ConversationId: *body.ConversationID, Tool: *body.Tool,
	})
	if err != nil {
		return reply{}, err
	}
	if r.Limit != nil {
		setRateHeaders(in.ctx, limits.FromWire(r.Limit, s.limits))
	}
	if s.tools != nil {
		s.tools.Start(deliveries.ToolCall{
			Run: r.Run, KitID: r.KitId, InstallationID: *body.InstallationID, Endpoint: r.Endpoint,
			// json.RawMessage holds a copy: the request's buffer is
			// reused after the reply.
			Arguments: body.Arguments,
		})
	}
	return jsonReply(fasthttp.StatusAccepted, runBody{viewRun(r.Run)})
}

// requireObject checks a required JSON object.
func requireObject(path string, v json.RawMessage) error {
	t := bytes.TrimLeft(v, " \t\r\n")
	if len(t) == 0 {
		return kiterr.Invalid(path, "is required")
	}
	if t[0] != '{' {
		return kiterr.Invalid(path, "must be an object")
	}
	return nil
}
