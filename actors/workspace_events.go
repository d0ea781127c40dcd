package actors

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

// user.* events (docs/deliveries.md). The workspace emits them in the
// batch of the write to the user record, like a conversation its events.
// It never asks an installation on that path: it keeps an
// InstallationEvents record of each installation that gets user.* events.
// Install writes it before the installation applies the version, as an
// installation tells its channels before it saves; uninstall deletes it
// (ForgetInstallationEvents) before the installation saves. A crash in
// between leaves the workspace ahead of the installation, which the
// retried install or uninstall repairs.

// userEventKinds are the kinds a workspace emits.
const userEventKinds = 1<<eventUserJoined | 1<<eventUserUpdated

// installationEventsOf is what the workspace must know of installation
// inst to emit for the version whose manifest is raw; nil when the
// version gets no user.* event (or no longer parses: the installation
// refuses it too).
func installationEventsOf(inst, raw string) *kitpb.InstallationEvents {
	man, problems := manifest.Parse(raw)
	if len(problems) > 0 {
		return nil
	}
	mask := eventMask(man) & userEventKinds
	if mask == 0 {
		return nil
	}
	return &kitpb.InstallationEvents{
		InstallationId: inst, Events: mask,
		UserEmail: man.Bot != nil && containsString(man.Bot.Scopes, "users:read.email"),
	}
}

// loadInstallationEvents reads the records at activation, and resumes the
// outbox past what it still holds for them.
func (a *workspaceActor) loadInstallationEvents() error {
	err := scanRecords(a.env.Store, installationEventsPrefix(a.id), func() proto.Message { return &kitpb.InstallationEvents{} }, func(m proto.Message) {
		ie := m.(*kitpb.InstallationEvents)
		a.instEvents[ie.InstallationId] = ie
	})
	if err != nil {
		return err
	}
	insts := make([]string, 0, len(a.instEvents))
	for inst := range a.instEvents {
		insts = append(insts, inst)
	}
	return a.outbox.resume(a.env.Store, insts)
}

// putInstallationEvents writes in b the record of inst (nil: none) when it
// changes, and reports whether it did; a.instEvents changes once b commits
// (keepInstallationEvents).
func (a *workspaceActor) putInstallationEvents(b batch, inst string, ie *kitpb.InstallationEvents) bool {
	if proto.Equal(a.instEvents[inst], ie) {
		return false
	}
	if ie == nil {
		b.Delete(installationEventsKey(a.id, inst))
	} else {
		put(b, installationEventsKey(a.id, inst), ie)
	}
	return true
}

func (a *workspaceActor) keepInstallationEvents(inst string, ie *kitpb.InstallationEvents) {
	if ie == nil {
		delete(a.instEvents, inst)
	} else {
		a.instEvents[inst] = ie
	}
}

// forgetInstallationEvents: the installation uninstalls, and gets no more.
func (a *workspaceActor) forgetInstallationEvents(m *kitpb.ForgetInstallationEvents) (proto.Message, error) {
	b := a.env.newBatch()
	if !a.putInstallationEvents(b, m.InstallationId, nil) {
		b.Close()
		return &kitpb.Ok{}, nil
	}
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("forget events of %s: %w", m.InstallationId, err)
	}
	a.keepInstallationEvents(m.InstallationId, nil)
	return &kitpb.Ok{}, nil
}

// emitUser writes the event k about u in b for every installation that
// gets it: u as the Web API shows it to the Kit bot, so with its email
// only for a bot with users:read.email. The password hash never leaves.
func (a *workspaceActor) emitUser(b batch, k eventKind, u *kitpb.User) {
	var recs [2][]byte // without, with the email
	at := nanos(a.env.Clock.Now())
	var ev *kitpb.Event
	for inst, ie := range a.instEvents {
		if ie.Events&k.bit() == 0 {
			continue
		}
		if ev == nil {
			ev = &kitpb.Event{Id: ids.NewAt(a.env.Clock.Now()), Type: k.String(), OccurredAt: at}
		}
		withEmail := 0
		if ie.UserEmail && u.Email != "" {
			withEmail = 1
		}
		if recs[withEmail] == nil {
			ev.User = &kitpb.User{Id: u.Id, WorkspaceId: u.WorkspaceId, DisplayName: u.DisplayName, Role: u.Role}
			if withEmail == 1 {
				ev.User.Email = u.Email
			}
			recs[withEmail] = encodeEvent(ev, nil)
		}
		a.outbox.add(b, inst, recs[withEmail], at)
	}
}

// commitWithEvents commits b, which may hold events, and sends their
// notices once it is durable.
func (a *workspaceActor) commitWithEvents(steps ...batch) error {
	if err := a.env.commitInSteps(steps...); err != nil {
		a.outbox.failed()
		return err
	}
	a.outbox.applied(a.env)
	return nil
}
