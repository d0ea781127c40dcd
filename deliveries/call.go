package deliveries

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/kitverify"
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
// ReasonTLS, or no_signing_secret); Status is the answer's, 0 for none.
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
	sec, err := cluster.Call[*kitpb.SigningSecretsReply](s.cfg.Node, actors.KindKit, c.KitID, &kitpb.GetSigningSecrets{})
	if err != nil {
		return Answer{}, err
	}
	if len(sec.Secrets) == 0 {
		return Answer{}, &CallError{Reason: targetErrorCode(errNoSecret), err: errNoSecret}
	}
	return s.post(ctx, u, c, sec.Secrets)
}

// post makes the request of c, signed with secrets.
func (s *Sender) post(ctx context.Context, u *url.URL, c Call, secrets []string) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(c.Body))
	if err != nil {
		return Answer{}, &CallError{Reason: ReasonConnection, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(kitverify.Header, kitverify.Sign(s.cfg.Clock.Now(), c.Body, secrets...))
	req.Header.Set("Service-Installation-Id", c.InstallationID)
	req.Header.Set("Service-Delivery-Id", ids.New())
	hc := s.public
	if s.allows(u) {
		hc = s.allowed
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{}, &CallError{Reason: classify(err), err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Answer{}, &CallError{Reason: ReasonHTTP, Status: resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	switch {
	case err != nil:
		return Answer{}, &CallError{Reason: classify(err), Status: resp.StatusCode, err: err}
	case len(body) > MaxAnswer:
		return Answer{}, &CallError{Reason: ReasonHTTP, Status: resp.StatusCode, err: errors.New("the answer is larger than MaxAnswer")}
	}
	return Answer{Status: resp.StatusCode, Body: body}, nil
}
