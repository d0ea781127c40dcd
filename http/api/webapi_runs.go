package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/kitclient"
	"github.com/kitd/kitd/proto/kitpb"
)

// getRun is GET /runs/{id} (docs/api.md "Users, runs and the installation"): a run of the token's
// installation as the token's member may see it. The route takes user
// tokens only; a run the member may not see is the 404 of one that does
// not exist.
func (s *Server) getRun(in call) (reply, error) {
	id := in.param("id")
	if !ids.Valid(id) {
		return reply{}, kiterr.Absent("run")
	}
	r, err := ask[*kitpb.RunReply](s, actors.KindInstallation, in.p.Caller.InstallationId,
		&kitpb.GetRun{RunId: id, UserId: in.p.Caller.UserId})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusOK, runBody{viewRun(r.Run)})
}

// runView is a Run (docs/deliveries.md "Tool calls and runs"); its result
// is null unless it succeeded.
type runView = kitclient.Run

// runBody is the answer {run}.
type runBody struct {
	Run runView `json:"run"`
}

func viewRun(r *kitpb.Run) runView {
	v := runView{
		ID: r.Id, Status: r.Status, Tool: r.Tool, RequesterUserID: r.RequesterUserId,
		ConversationID: r.ConversationId, CreatedAt: isoTime(r.CreatedAt), FinishedAt: optTime(r.FinishedAt),
		ErrorCode: optString(r.ErrorCode),
	}
	if len(r.Result) > 0 {
		v.Result = r.Result
	}
	return v
}
