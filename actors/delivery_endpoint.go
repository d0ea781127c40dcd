package actors

import (
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// PauseAfter: an endpoint whose every attempt failed for this long is
// paused (docs/deliveries.md "Endpoint pause"): no more attempts, its events stay queued, until a
// redelivery succeeds or the installation gets a new version.
const PauseAfter = 24 * time.Hour

// The endpoint's health (docs/deliveries.md, "Endpoint pause") is one
// record, written only when it changes: at the first failure after a
// success, at the success after failures, at a pause and a resume. A
// healthy endpoint's deliveries write nothing more.

func (a *deliveryActor) paused() bool { return a.ep.PausedAt != 0 }

// endpointFailed notes a failed attempt in b; when it ends 24 hours of
// failures it pauses the endpoint and answers the log entry that says so.
func (a *deliveryActor) endpointFailed(b batch, now time.Time) *kitpb.DevLogEntry {
	switch {
	case a.ep.FailingSince == 0:
		a.ep.FailingSince = nanos(now)
	case !a.paused() && nanos(now)-a.ep.FailingSince >= int64(PauseAfter):
		a.ep.PausedAt = nanos(now)
	default:
		return nil
	}
	put(b, deliveryEndpointKey(a.id), a.ep)
	if !a.paused() {
		return nil
	}
	e := newLogEntry(a.env, LogSourceDelivery, LogLevelError, "endpoint.paused", a.id)
	e.Status = "paused"
	return e
}

// sinceKitResumed restarts at the Kit's last resume from a suspension
// (resumedAt; 0: never) the clocks of failures older than it, writing the
// endpoint's in b: the suspension held the events, so its days are no
// event's 24 hours and no endpoint's failing (docs/deliveries.md "A
// suspended Kit"). A pause stays: it is the endpoint's own.
func (a *deliveryActor) sinceKitResumed(b batch, d *delivery, resumedAt int64) {
	if d.firstAt != 0 && d.firstAt < resumedAt {
		d.firstAt = resumedAt
	}
	if a.ep.FailingSince != 0 && a.ep.FailingSince < resumedAt && !a.paused() {
		a.ep.FailingSince = resumedAt
		put(b, deliveryEndpointKey(a.id), a.ep)
	}
}

// endpointSucceeded notes a delivered attempt in b: the endpoint is
// healthy again, and resumed if it was paused (a redelivery went).
func (a *deliveryActor) endpointSucceeded(b batch, now time.Time) *kitpb.DevLogEntry {
	if a.ep.FailingSince == 0 && !a.paused() {
		return nil
	}
	a.ep.FailingSince = 0
	var e *kitpb.DevLogEntry
	if a.paused() {
		e = a.resume(now)
	}
	put(b, deliveryEndpointKey(a.id), a.ep)
	return e
}

// resume ends a pause: every waiting event is due at once and starts a
// new 24 hours before it can be dead-lettered (load does the same from
// ResumedAt after a restart). It answers the log entry.
func (a *deliveryActor) resume(now time.Time) *kitpb.DevLogEntry {
	a.ep.PausedAt, a.ep.FailingSince, a.ep.ResumedAt = 0, 0, nanos(now)
	for _, d := range a.q.state {
		if !d.inFlight {
			d.nextAt, d.firstAt = 0, 0
		}
	}
	e := newLogEntry(a.env, LogSourceDelivery, LogLevelInfo, "endpoint.resumed", a.id)
	e.Status = "resumed"
	return e
}

// resumeForNewVersion resumes a paused endpoint when its installation was
// updated to a new version (which may fix or move the endpoint).
func (a *deliveryActor) resumeForNewVersion(ctx actorContext, m *kitpb.ResumeDeliveries) {
	if !a.paused() {
		return
	}
	if m.KitId != "" {
		a.ep.KitId = m.KitId
	}
	// Pending outcomes wrote the endpoint's older state: they go first.
	if a.settle() != nil {
		return // the actor stops (stopIfBroken)
	}
	b := a.env.newBatch()
	e := a.resume(a.env.Clock.Now())
	put(b, deliveryEndpointKey(a.id), a.ep)
	if a.ep.KitId != "" {
		a.env.putLog(b, partition.Of(a.id), a.ep.KitId, e)
	}
	if err := b.Write(); err != nil {
		if a.env.Logger != nil {
			a.env.Logger.Error("resume deliveries", "installation", a.id, "err", err)
		}
		ctx.Stop(ctx.Self())
		return
	}
	if a.env.Deliveries != nil {
		a.env.Deliveries.EventsQueued(a.id)
	}
}
