package actors

import (
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

// Tool calls and runs (docs/deliveries.md "Tool calls and runs"). A run is
// state of the installation whose tool it calls: the installation checks
// the call, records the run, and takes every status change from the tool
// runner (deliveries.Tools), which alone speaks HTTP. Each change commits
// before it is answered, so a status anyone was shown is on disk.

// Run statuses.
const (
	RunQueued    = "queued"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// RunRetention is how long a finished run is kept after its end
// (installation_runs_sweep.go): the developer log's retention.
const RunRetention = LogRetention

// RunInterrupted is the errorCode of a run whose call was in flight, or not
// yet made, when its installation's process stopped: nobody is left to
// report its outcome, so the next activation fails it.
const RunInterrupted = "interrupted"

// Tool audiences of the manifest.
const (
	AudienceAny     = "any"
	AudiencePrivate = "private"
)

// logEventToolCall is the developer log's event of a run's call.
const logEventToolCall = "tool.call"

// installedTools is what the installed version declares of its tools,
// kept for the version it was read from.
type installedTools struct {
	version  string
	endpoint string            // endpoints.tools
	audience map[string]string // tool name -> audience
}

func (a *installationActor) handleRuns(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.InvokeTool:
		reply, err = a.invokeTool(m)
	case *kitpb.StartRun:
		reply, err = a.startRun(m)
	case *kitpb.FinishRun:
		reply, err = a.finishRun(m)
	case *kitpb.GetRun:
		reply, err = a.getRun(m)
	default:
		return nil, false, nil
	}
	return reply, true, err
}

// invokeTool checks, in order: the member's workspace is the
// installation's, the member's interactions bucket has a token, the
// installed version declares the tool, the Kit bot is in the conversation
// and the member is a member of it; then it records the run, queued. Every
// refusal but the bucket's is not_found, so that a member learns nothing
// of installations, tools or conversations they may not use.
func (a *installationActor) invokeTool(m *kitpb.InvokeTool) (proto.Message, error) {
	if m.WorkspaceId != a.inst.WorkspaceId {
		return nil, kiterr.Absent("installation")
	}
	if err := refuseIfSuspended(a.env, a.inst.KitId); err != nil {
		return nil, err // nothing is sent to a suspended Kit
	}
	var limit *kitpb.Decision
	if d, on := a.buckets.take(limits.Interactions, m.UserId, a.env.Clock.Now()); on {
		if !d.OK {
			return nil, kiterr.OverLimit(d)
		}
		limit = d.Wire()
	}
	reply, err := a.acceptTool(m)
	if err != nil {
		// A refusal after the take spent the token: its answer shows the
		// bucket, as the 202 does (docs/decisions.md "Rate limits").
		return nil, kiterr.Spending(err, limit)
	}
	reply.Limit = limit
	return reply, nil
}

// acceptTool is invokeTool's checks after the bucket, and the run's record.
func (a *installationActor) acceptTool(m *kitpb.InvokeTool) (*kitpb.ToolCallReply, error) {
	tools, err := a.tools()
	if err != nil {
		return nil, err
	}
	audience, declared := tools.audience[m.Tool]
	if !declared {
		return nil, kiterr.Absent("tool")
	}
	if !slices.Contains(a.inst.ChannelIds, m.ConversationId) {
		return nil, kiterr.Absent("conversation")
	}
	conv, err := cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, m.ConversationId,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerUser, WorkspaceId: m.WorkspaceId, UserId: m.UserId}})
	if err != nil {
		return nil, err
	}
	if conv.Conversation.Archived {
		// As commands and interactions: nothing may be posted there.
		return nil, errArchived
	}
	now := a.env.Clock.Now()
	run := &kitpb.Run{
		Id: ids.NewAt(now), Tool: m.Tool, RequesterUserId: m.UserId, ConversationId: m.ConversationId,
		Audience: audience, Status: RunQueued, CreatedAt: nanos(now),
	}
	b := a.env.newBatch()
	sweep, err := a.sweepRuns(b, run.CreatedAt)
	if err != nil {
		b.Close()
		a.buckets.giveBack(limits.Interactions, m.UserId, a.env.Clock.Now())
		return nil, err
	}
	put(b, runKey(a.id, run.Id), run)
	b.Set(openRunKey(a.id, run.Id), nil)
	if err := b.Commit(); err != nil {
		// A run that was not recorded (503, to retry) ran nothing.
		a.buckets.giveBack(limits.Interactions, m.UserId, a.env.Clock.Now())
		return nil, fmt.Errorf("record run of %s: %w", a.id, err)
	}
	a.runSweep = sweep
	if a.inFlight == nil {
		a.inFlight = map[string]time.Time{}
	}
	a.inFlight[run.Id] = now
	return &kitpb.ToolCallReply{Run: run, KitId: a.inst.KitId, Endpoint: tools.endpoint}, nil
}

// tools reads the tools of the installed version from its Kit, once per
// version: the installation record does not copy the manifest.
func (a *installationActor) tools() (*installedTools, error) {
	if a.toolCache != nil && a.toolCache.version == a.inst.KitVersion {
		return a.toolCache, nil
	}
	man, err := a.installedManifest()
	if err != nil {
		return nil, err
	}
	t := &installedTools{version: a.inst.KitVersion, endpoint: man.Endpoints.Tools, audience: map[string]string{}}
	for _, tool := range man.Tools {
		t.audience[tool.Name] = tool.Audience
	}
	a.toolCache = t
	return t, nil
}

// installedManifest reads the manifest of the installed version from the
// installation's Kit.
func (a *installationActor) installedManifest() (*manifest.Manifest, error) {
	kit, err := cluster.Call[*kitpb.KitReply](a.env.Host, KindKit, a.inst.KitId, &kitpb.GetKit{})
	if err != nil {
		return nil, err
	}
	for _, v := range kit.Versions {
		if v.Version != a.inst.KitVersion {
			continue
		}
		man, problems := manifest.Parse(v.Manifest)
		if len(problems) > 0 {
			return nil, fmt.Errorf("installed manifest %s@%s no longer parses: %s", a.inst.KitId, v.Version, problems[0].Message)
		}
		return man, nil
	}
	return nil, fmt.Errorf("installation %s: installed version %s not found", a.id, a.inst.KitVersion)
}

// loadRun reads one of the installation's runs; not_found when absent.
func (a *installationActor) loadRun(id string) (*kitpb.Run, error) {
	if !ids.Valid(id) {
		return nil, kiterr.Absent("run")
	}
	run := &kitpb.Run{}
	if err := loadExisting(a.env.Store, runKey(a.id, id), run, "run"); err != nil {
		return nil, err
	}
	return run, nil
}

// startRun marks a queued run running before the runner calls the Kit. A
// run that is no longer queued (an activation failed it meanwhile) is a
// conflict: its call must not be made.
func (a *installationActor) startRun(m *kitpb.StartRun) (proto.Message, error) {
	run, err := a.loadRun(m.RunId)
	if err != nil {
		return nil, err
	}
	if run.Status != RunQueued {
		delete(a.inFlight, run.Id)
		return nil, kiterr.New(kiterr.Conflict, "run is "+run.Status)
	}
	run.Status = RunRunning
	b := a.env.newBatch()
	put(b, runKey(a.id, run.Id), run)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("start run %s of %s: %w", run.Id, a.id, err)
	}
	return &kitpb.RunReply{Run: run}, nil
}

// finishRun records a running run's outcome and its developer log entry in
// one batch. An outcome for a run that is not running (failed as
// interrupted meanwhile) changes nothing: the first final status stays.
func (a *installationActor) finishRun(m *kitpb.FinishRun) (proto.Message, error) {
	delete(a.inFlight, m.RunId)
	run, err := a.loadRun(m.RunId)
	if err != nil {
		return nil, err
	}
	if run.Status != RunRunning {
		return &kitpb.RunReply{Run: run}, nil
	}
	run.FinishedAt = nanos(a.env.Clock.Now())
	e := newLogEntry(a.env, LogSourceToolCall, LogLevelInfo, logEventToolCall, a.id)
	if m.Succeeded {
		run.Status, run.Result = RunSucceeded, m.Result
	} else {
		run.Status, run.ErrorCode = RunFailed, m.ErrorCode
		e.Level, e.ErrorCode = LogLevelError, m.ErrorCode
	}
	e.Status, e.SubjectId = run.Status, run.Id
	e.DurationMs, e.Attempt = &m.DurationMs, proto.Int32(1)
	if m.HttpStatus != 0 {
		e.HttpStatus = &m.HttpStatus
	}
	b := a.env.newBatch()
	if a.inst.Uninstalled {
		// Nobody reads it again: the purge kept it for this log entry
		// alone, and goes on (installation_purge.go).
		b.Delete(runKey(a.id, run.Id))
		a.purge.runEnded()
	} else {
		put(b, runKey(a.id, run.Id), run)
	}
	b.Delete(openRunKey(a.id, run.Id))
	a.env.putLog(b, partition.Of(a.id), a.inst.KitId, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("finish run %s of %s: %w", run.Id, a.id, err)
	}
	return &kitpb.RunReply{Run: run}, nil
}

// getRun is a run as member m.UserId may see it: their own, or one of
// audience any in a conversation they are a member of. Anything else is
// not_found, the answer for a run that does not exist.
func (a *installationActor) getRun(m *kitpb.GetRun) (proto.Message, error) {
	run, err := a.loadRun(m.RunId)
	if err != nil {
		return nil, err
	}
	// The sweep rides on a later run queued; a run past its retention it
	// has not reached yet is gone all the same.
	if runExpired(run, nanos(a.env.Clock.Now())) {
		return nil, kiterr.Absent("run")
	}
	if run.RequesterUserId == m.UserId {
		return &kitpb.RunReply{Run: run}, nil
	}
	if run.Audience != AudienceAny {
		return nil, kiterr.Absent("run")
	}
	_, err = cluster.Call[*kitpb.ConversationReply](a.env.Host, KindConversation, run.ConversationId,
		&kitpb.GetConversation{Caller: &kitpb.Caller{Kind: CallerUser, WorkspaceId: a.inst.WorkspaceId, UserId: m.UserId}})
	if kiterr.CodeOf(err) == kiterr.NotFound {
		return nil, kiterr.Absent("run")
	}
	if err != nil {
		return nil, err
	}
	return &kitpb.RunReply{Run: run}, nil
}

// runReportWithin bounds how long a runner takes to report a run's
// outcome: deliveries.Timeout and two requests to the installation. A run
// older than this in inFlight lost its runner (a request that failed), and
// keeps the installation active no longer.
const runReportWithin = time.Minute

// keepActive keeps the installation from passivating while runs it queued
// may still report: the next activation would fail them as interrupted.
func (a *installationActor) keepActive() bool {
	now := a.env.Clock.Now()
	for id, at := range a.inFlight {
		if now.Sub(at) >= runReportWithin {
			delete(a.inFlight, id)
		}
	}
	return len(a.inFlight) > 0 || a.purge.queued
}

// interruptRuns fails, as interrupted, every run still queued or running
// when the installation activates. An installation does not passivate
// while runs it queued may still report (keepActive), so an open run found
// here has lost its runner: the process stopped, or the partition moved to
// another node. A late report of such a run changes nothing (finishRun).
func (a *installationActor) interruptRuns() error {
	var open []string
	prefix := openRunsPrefix(a.id)
	err := a.env.Store.Scan(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		open = append(open, string(k[len(prefix):]))
		return true
	})
	if err != nil || len(open) == 0 {
		return err
	}
	now := nanos(a.env.Clock.Now())
	b := a.env.newBatch()
	for _, id := range open {
		run := &kitpb.Run{}
		found, err := load(a.env.Store, runKey(a.id, id), run)
		if err != nil {
			return err
		}
		b.Delete(openRunKey(a.id, id))
		if !found {
			continue
		}
		run.Status, run.ErrorCode, run.FinishedAt = RunFailed, RunInterrupted, now
		if a.inst.Uninstalled {
			b.Delete(runKey(a.id, id)) // as finishRun
		} else {
			put(b, runKey(a.id, id), run)
		}
		e := newLogEntry(a.env, LogSourceToolCall, LogLevelError, logEventToolCall, a.id)
		e.Status, e.ErrorCode, e.SubjectId = RunFailed, RunInterrupted, id
		a.env.putLog(b, partition.Of(a.id), a.inst.KitId, e)
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("interrupt runs of %s: %w", a.id, err)
	}
	return nil
}
