package api

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/kitclient/dev"
	"github.com/kitd/kitd/proto/kitpb"
)

// The developer API of deliveries (docs/deliveries.md, "Replay and
// visibility"): an installation's deliveries and their redelivery, for the
// developers of the installed Kit's workspace; and test events (kit
// trigger) to a sandbox installation.

const maxDeliveriesLimit = 100

func viewDelivery(d *kitpb.DeliveryState) dev.Delivery {
	ev := d.Event
	v := dev.Delivery{
		EventID: ev.Id, Sequence: ev.Sequence, Type: ev.Type, OccurredAt: isoTime(ev.OccurredAt),
		State: d.State, Attempts: int(ev.Attempts), FinishedAt: optTime(ev.FinishedAt), Redelivery: ev.Redelivery, Test: ev.Test,
	}
	if ev.ConversationId != "" && !ev.Test {
		v.ConversationID = &ev.ConversationId
	}
	if ev.LastHttpStatus != 0 {
		v.LastHTTPStatus = optInt(&ev.LastHttpStatus)
	}
	if ev.RetryReason != "" {
		v.LastErrorCode = &ev.RetryReason
	}
	if d.State == actors.DeliveryRetrying {
		v.NextAttemptAt = optTime(ev.NextAttemptAt)
	}
	return v
}

func viewEndpoint(ep *kitpb.DeliveryEndpoint) dev.DeliveryEndpoint {
	v := dev.DeliveryEndpoint{State: "healthy", FailingSince: optTime(ep.GetFailingSince()), PausedAt: optTime(ep.GetPausedAt())}
	switch {
	case ep.GetPausedAt() != 0:
		v.State = "paused"
	case ep.GetFailingSince() != 0:
		v.State = "failing"
	}
	return v
}

// ownInstallation checks that the installation exists and its Kit belongs
// to the caller's workspace, and answers both; anything else is 404, as
// an unknown id.
func (s *Server) ownInstallation(in call) (*kitpb.Installation, *kitpb.Kit, error) {
	instID := in.param("installationId")
	if !ids.Valid(instID) {
		return nil, nil, kiterr.Absent("installation")
	}
	r, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.GetInstallation{})
	if err != nil {
		return nil, nil, err
	}
	if r.Installation == nil {
		return nil, nil, kiterr.Absent("installation")
	}
	kit, err := ask[*kitpb.KitReply](s, actors.KindKit, r.Installation.KitId, &kitpb.GetKit{WorkspaceId: in.p.Caller.WorkspaceId})
	if err != nil {
		return nil, nil, err
	}
	if kit.Kit.WorkspaceId != in.p.Caller.WorkspaceId {
		return nil, nil, kiterr.Absent("installation")
	}
	return r.Installation, kit.Kit, nil
}

// errRedeliverUninstalled: an uninstall ends what a workspace sends the
// Kit. The events queued at that moment still go (installation.uninstalled
// among them), but a redelivery would send again, or for the first time
// (a dead letter), what the workspace no longer shares.
var errRedeliverUninstalled = kiterr.New(kiterr.Conflict, "the installation was uninstalled: its events are not delivered again")

func (s *Server) listDeliveries(in call) (reply, error) {
	list := "deliveries:" + in.param("installationId")
	pg, err := parsePage(in.ctx, list, maxDeliveriesLimit)
	var before uint64
	if err == nil {
		before, err = seqPosition(pg)
	}
	if err != nil {
		return reply{}, err
	}
	inst, kit, err := s.ownInstallation(in)
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.DeliveriesPage](s, actors.KindDelivery, inst.Id, &kitpb.ListDeliveries{BeforeSequence: before, Limit: int32(pg.limit)})
	if err != nil {
		return reply{}, err
	}
	out := make([]dev.Delivery, len(r.Deliveries))
	for i, d := range r.Deliveries {
		out[i] = viewDelivery(d)
	}
	var next *string
	if len(out) > 0 {
		next = cursorFor(list, strconv.FormatUint(out[len(out)-1].Sequence, 10), r.More)
	}
	// The Kit's state says why events wait, neither attempted nor failing,
	// while it is suspended: the endpoint's health alone reads healthy.
	return jsonReply(fasthttp.StatusOK, dev.DeliveryPage{Deliveries: out, NextCursor: next, Endpoint: viewEndpoint(r.Endpoint),
		WaitingInOutbox: r.WaitingInOutbox, KitState: kit.State})
}

func (s *Server) redeliver(in call) (reply, error) {
	var body struct {
		EventID   *string `json:"eventId"`
		DeadSince *string `json:"deadSince"`
	}
	err := in.decode(&body)
	m := &kitpb.Redeliver{}
	switch {
	case err != nil:
	case body.EventID == nil && body.DeadSince == nil:
		err = kiterr.Invalid("eventId", "is required unless deadSince is given")
	case body.EventID != nil && body.DeadSince != nil:
		err = kiterr.Invalid("deadSince", "cannot be given with eventId")
	case body.EventID != nil:
		err = input.RequireUUID("eventId", body.EventID)
		m.EventId = *body.EventID
	default:
		var t time.Time
		if t, err = time.Parse(time.RFC3339Nano, *body.DeadSince); err != nil {
			err = kiterr.Invalid("deadSince", "must be an RFC 3339 date-time")
		}
		m.DeadSince = t.UnixNano()
	}
	if err != nil {
		return reply{}, err
	}
	inst, _, err := s.ownInstallation(in)
	if err == nil && inst.Uninstalled {
		err = errRedeliverUninstalled
	}
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.RedeliverReply](s, actors.KindDelivery, inst.Id, m)
	if err != nil {
		return reply{}, err
	}
	seqs := r.Sequences
	if seqs == nil {
		seqs = []uint64{}
	}
	return jsonReply(fasthttp.StatusAccepted, dev.Redelivered{Redelivered: len(seqs), Sequences: seqs, More: r.More})
}

// triggerEvent queues a test event to the Kit's installation in the
// caller's sandbox workspace: the dev-install (kit trigger).
func (s *Server) triggerEvent(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	// Who may first, then what (as dev-install): a token that may never
	// send a test event learns nothing of the body's rules.
	if err := s.requireSandbox(in, "a test event"); err != nil {
		return reply{}, err
	}
	var body struct {
		Type *string `json:"type"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireString("type", body.Type, 1, 60)
	}
	if err == nil {
		err = input.OneOf("type", *body.Type, actors.EventKinds()...)
	}
	if err != nil {
		return reply{}, err
	}
	// Only the developers of the Kit's own workspace (docs/deliveries.md
	// "Replay and visibility": anyone else 404).
	kit, err := ask[*kitpb.KitReply](s, actors.KindKit, kitID, &kitpb.GetKit{WorkspaceId: in.p.Caller.WorkspaceId})
	if err == nil && kit.Kit.WorkspaceId != in.p.Caller.WorkspaceId {
		err = kiterr.Absent("kit")
	}
	if err != nil {
		return reply{}, err
	}
	instID, err := actors.InstallationHere(s.env, in.p.Caller.WorkspaceId, kitID)
	if err == nil && instID == "" {
		err = kiterr.Absent("kit")
	}
	if err != nil {
		return reply{}, err
	}
	inst, err := ask[*kitpb.InstallationReply](s, actors.KindInstallation, instID, &kitpb.GetInstallation{})
	if err != nil {
		return reply{}, err
	}
	botID := inst.Installation.BotId
	if !actors.HasBot(inst.Installation) {
		botID = "" // the installation keeps an id, but there is no bot
	}
	ev, err := ask[*kitpb.Event](s, actors.KindDelivery, instID, &kitpb.QueueTestEvent{Type: *body.Type, KitId: kitID, BotId: botID})
	if err != nil {
		return reply{}, err
	}
	return jsonReply(fasthttp.StatusAccepted, dev.TestEvent{EventID: ev.Id, Sequence: ev.Sequence, Type: ev.Type, InstallationID: instID})
}
