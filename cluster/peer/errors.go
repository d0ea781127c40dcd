package peer

import (
	"errors"
	"fmt"
)

// Errors of the transport. A handler's own error crosses as a
// *kiterr.Error instead (kiterr.ToFailure on one side, FromFailure on the
// other), so the caller can always tell "the peer answered no" from "the
// peer did not answer".
var (
	// ErrConnLost: the connection broke while a call or stream was in
	// flight. The peer may or may not have run the request: retrying is the
	// caller's decision, with the same request id.
	ErrConnLost = errors.New("peer: connection lost")
	// ErrUnavailable: no connection to the peer could be made (it is down,
	// refused the handshake, or its outgoing queue is full). Nothing was
	// sent.
	ErrUnavailable = errors.New("peer: unavailable")
	// ErrClosed: this transport was closed.
	ErrClosed = errors.New("peer: transport closed")
	// ErrTooLarge: a message, batch or chunk over the configured maximum.
	// Nothing was sent.
	ErrTooLarge = errors.New("peer: too large")
	// ErrRefused: the peer would not run the request (an unknown message
	// name, a message that does not decode). Retrying will not help.
	ErrRefused = errors.New("peer: refused")
	// ErrAborted: a stream was given up by one of its ends.
	ErrAborted = errors.New("peer: stream aborted")
)

// RefusedError is a request the peer would not run, with its reason.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return fmt.Sprintf("%v: %s", ErrRefused, e.Reason) }

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// AbortedError is a stream given up by one of its ends, with the reason
// that end gave.
type AbortedError struct {
	ByPeer bool // the other end gave up, not this one
	Reason string
}

func (e *AbortedError) Error() string {
	by := "locally"
	if e.ByPeer {
		by = "by the peer"
	}
	return fmt.Sprintf("%v %s: %s", ErrAborted, by, e.Reason)
}

// Unwrap makes errors.Is(err, ErrAborted) true.
func (e *AbortedError) Unwrap() error { return ErrAborted }
