package deliveries

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// MaxAnswer bounds the body of a Kit's answer to a call that kitd reads.
const MaxAnswer = 1 << 20

// Call is one synchronous request to a Kit's endpoint, which a member
// waits for: a slash command, an interaction or a tool call.
type Call struct {
	KitID          string
	InstallationID string
	URL            string // the endpoint of the installed version
	Body           []byte // JSON
}

// Answer is a Kit's 2xx answer to a Call.
type Answer struct {
	Status int
	Body   []byte // at most MaxAnswer bytes
}

// CallError is a Call that got no 2xx within Timeout. Reason is the
// developer log's errorCode (ReasonTimeout, ReasonConnection, ReasonHTTP,
// ReasonTLS, ReasonInFlightLimit, no_signing_secret or kit_suspended);
// Status is the answer's, 0 for none.
type CallError struct {
	Reason string
	Status int
	err    error
}

func (e *CallError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("kit call: %s: %v", e.Reason, e.err)
	}
	return fmt.Sprintf("kit call: %s (status %d)", e.Reason, e.Status)
}

func (e *CallError) Unwrap() error { return e.err }

var errNotHTTPS = errors.New("the endpoint is not https")

// Call posts c.Body to c.URL signed with the Kit's signing secrets, under
// the rules of events (https only, no private address unless allowed, no
// redirect, 2xx within Timeout), and returns the Kit's answer. The caller
// records the attempt in the developer log: it knows its source.
func (s *Sender) Call(ctx context.Context, c Call) (Answer, time.Duration, error) {
	start := time.Now()
	a, err := s.call(ctx, c)
	return a, time.Since(start), err
}

func (s *Sender) call(ctx context.Context, c Call) (Answer, error) {
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" {
		return Answer{}, &CallError{Reason: ReasonConnection, err: errNotHTTPS}
	}
	secrets, err := s.signingSecrets(c.KitID)
	if errors.Is(err, errNoSecret) {
		return Answer{}, &CallError{Reason: targetErrorCode(err), err: err}
	}
	if err != nil {
		return Answer{}, err
	}
	deadline := s.deadlineOf(ctx)
	// A call is a delivery to the Kit (SPEC.md 6): it takes one of its
	// installation's 10 slots and one of the Kit's 50, as an event's
	// attempt does, within its own time.
	giveBack, ok, err := s.installationSlotBy(c.InstallationID, deadline)
	if err != nil {
		return Answer{}, err
	}
	if !ok {
		return Answer{}, &CallError{Reason: ReasonInFlightLimit}
	}
	defer giveBack()
	release, ok := s.kitSlotBy(c.KitID, deadline)
	if !ok {
		return Answer{}, &CallError{Reason: ReasonInFlightLimit}
	}
	defer release()
	if s.suspended(c.KitID) {
		// Suspended while the call waited for its slots (a tool run is
		// queued before): nothing is sent to a suspended Kit.
		return Answer{}, &CallError{Reason: actors.ErrorKitSuspended}
	}
	return s.post(u, c, secrets, deadline)
}

// installationSlotBy takes one of the installation's deliveries in
// flight for a call, from its delivery actor, waiting no later than
// deadline: ok is false when none was free by then. giveBack ends the
// call's hold; should it not arrive, the slot lapses shortly after
// deadline (actors.TakeCallSlot).
func (s *Sender) installationSlotBy(inst string, deadline time.Time) (giveBack func(), ok bool, err error) {
	call := ids.New()
	wait := time.Until(deadline).Milliseconds()
	r, err := cluster.Call[*kitpb.CallSlotReply](s.cfg.Node, actors.KindDelivery, inst, &kitpb.TakeCallSlot{Call: call, WaitMs: wait})
	if errors.Is(err, peer.ErrRefused) {
		// A leader of a build before the calls' slots (a rolling upgrade)
		// refuses a message type it does not know: the call goes without
		// one, as it did on that build (docs/cluster.md "A rolling
		// upgrade across the thirty-sixth session").
		return func() {}, true, nil
	}
	if err != nil || !r.Granted {
		return nil, false, err
	}
	return func() { s.cfg.Node.Send(actors.KindDelivery, inst, &kitpb.GiveCallSlot{Call: call}) }, true, nil
}

// deadlineOf is when a call made now ends: Config.Timeout from now, or
// ctx's deadline if that comes first.
func (s *Sender) deadlineOf(ctx context.Context) time.Time {
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline
}

// post makes the request of c, signed with secrets, by deadline.
func (s *Sender) post(u *url.URL, c Call, secrets []string, deadline time.Time) (Answer, error) {
	status, body, err := s.https.post(s.cfg.Clock.Now(), kitRequest{url: u, body: c.Body, secrets: secrets, installationID: c.InstallationID, deadline: deadline}, true)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: status, Body: body}, nil
}
