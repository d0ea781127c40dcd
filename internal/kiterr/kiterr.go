// Package kiterr defines the domain errors that every layer of kitd shares,
// and owns their conversions: the HTTP status of each code (one table, the
// way nats-server keeps the status beside each error), and the wire form
// (kitpb.Failure) in which an error crosses an actor boundary. Actors
// return them, the cluster carries them, the HTTP layer writes them.
// Messages are for people; they name field paths and never contain a
// submitted value.
package kiterr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Code is a stable error code of docs/api.md "Errors".
type Code string

// The codes of docs/api.md "Errors" that kitd answers.
const (
	Validation          Code = "validation_error"
	InvalidToken        Code = "invalid_token"
	MissingScope        Code = "missing_scope"
	Forbidden           Code = "forbidden"
	NotFound            Code = "not_found"
	IdempotencyConflict Code = "idempotency_conflict"
	Conflict            Code = "conflict"
	Gone                Code = "gone"
	PayloadTooLarge     Code = "payload_too_large"
	RateLimited         Code = "rate_limited"
	Internal            Code = "internal_error"
	UnsupportedMedia    Code = "unsupported_media_type"
	InvalidCredentials  Code = "invalid_credentials"
	CSRFRejected        Code = "csrf_rejected"
	EmailTaken          Code = "email_taken"
	SlugTaken           Code = "slug_taken"
	// KitUnavailable: member routes only; the Kit did not answer an
	// interaction, a slash command or a tool call with a 2xx within 3 s.
	KitUnavailable Code = "kit_unavailable"
	// Unauthenticated: a member route without a live session cookie
	// (OPERATIONS.md section 6).
	Unauthenticated Code = "unauthenticated"
)

// kitd's own codes, for answers docs/api.md "Errors" has no code for
// (docs/decisions.md "Request heads").
const (
	URITooLong     Code = "uri_too_long"
	HeaderTooLarge Code = "header_too_large"
	// Unavailable: the node that owns the request's data could not be
	// reached, or no leader of its partition is known yet (an election);
	// the request did not run there, or its outcome is unknown and a retry
	// is safe only as docs/api.md says for 5xx (docs/decisions.md
	// "Unavailable").
	Unavailable Code = "unavailable"
)

// statuses is the one table from codes to the HTTP statuses of docs/api.md
// "Errors".
var statuses = map[Code]int{
	Validation:          400,
	InvalidToken:        401,
	InvalidCredentials:  401,
	Unauthenticated:     401,
	MissingScope:        403,
	Forbidden:           403,
	CSRFRejected:        403,
	NotFound:            404,
	IdempotencyConflict: 409,
	Conflict:            409,
	EmailTaken:          409,
	SlugTaken:           409,
	Gone:                410,
	PayloadTooLarge:     413,
	URITooLong:          414,
	UnsupportedMedia:    415,
	HeaderTooLarge:      431,
	RateLimited:         429,
	Internal:            500,
	KitUnavailable:      502,
	Unavailable:         503,
}

// retryAfter is the Retry-After (seconds) of the codes that ask for a
// retry without a bucket's decision: an election takes about a second.
var retryAfter = map[Code]int{
	Unavailable: 1,
}

// Status is the HTTP status an answer with code c has: 200 for the empty
// code (no error), 500 for a code docs/api.md does not list.
func (c Code) Status() int {
	if c == "" {
		return 200
	}
	if s, ok := statuses[c]; ok {
		return s
	}
	return 500
}

// RetryAfter is the Retry-After (seconds) an answer with code c carries,
// 0 for none. A rate_limited answer takes its own from its bucket
// (Error.Limit).
func (c Code) RetryAfter() int { return retryAfter[c] }

// Error is a domain error. Path is the JSON path of the offending field for
// validation errors ("blocks[3].fields[0].label"), empty otherwise.
type Error struct {
	Code    Code
	Message string
	Path    string
	// Limit is the refusing bucket's decision of a RateLimited error.
	Limit *limits.Decision
	// Spent is the state of a bucket whose token the request took before
	// it failed otherwise (a 400 on a live webhook's URL): the answer
	// carries its RateLimit headers, but no Retry-After, and is no
	// refusal (docs/decisions.md "Rate limits").
	Spent *limits.Decision
}

// Error reads "<code>: <message>", with the path before the message when
// the message does not start with it already (Invalid's do).
func (e *Error) Error() string {
	if e.Path != "" && !strings.HasPrefix(e.Message, e.Path+": ") {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// RetryAfter is the Retry-After (seconds) an answer of e carries, 0 for
// none: a refusing bucket's own (at least 1), else its code's. The API's
// error bodies and the app host's error pages both take it from here.
func (e *Error) RetryAfter() int {
	if e.Limit != nil {
		return max(e.Limit.RetryAfter, 1)
	}
	return e.Code.RetryAfter()
}

// New returns an error with code and message.
func New(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// Invalid returns a validation error for the field at path. The message
// reads "<path>: <reason>" so that clients see the path without parsing.
func Invalid(path, reason string) *Error {
	msg := reason
	if path != "" {
		msg = path + ": " + reason
	}
	return &Error{Code: Validation, Message: msg, Path: path}
}

// Absent is the one answer for "does not exist or is not visible".
func Absent(what string) *Error { return &Error{Code: NotFound, Message: what + " not found"} }

// OverLimit is the error of a request refused by the bucket that made d.
func OverLimit(d limits.Decision) *Error {
	d.RetryAfter = max(d.RetryAfter, 1)
	return &Error{Code: RateLimited, Message: "rate limit " + string(d.Policy) + " exceeded", Limit: &d}
}

// Spending is err answered after the request took a token of the bucket
// whose state is d (wire form, as actors hold it): a domain error gets d
// as its Spent, on a copy (sentinel errors are shared). A nil d (limits
// off), a refusal over a limit (it carries its own bucket) or an error
// that is not a domain error is err.
func Spending(err error, d *kitpb.Decision) error {
	var e *Error
	if d == nil || !errors.As(err, &e) || e.Limit != nil {
		return err
	}
	c := *e
	s := limits.FromWire(d, nil)
	c.Spent = &s
	return &c
}

// ToFailure is err in the form in which it crosses an actor boundary. An
// error that is not a domain error becomes Internal, with its text for the
// receiver's log (the HTTP layer never shows it).
func ToFailure(err error) *kitpb.Failure {
	var e *Error
	if !errors.As(err, &e) {
		return &kitpb.Failure{Code: string(Internal), Message: err.Error()}
	}
	f := &kitpb.Failure{Code: string(e.Code), Message: e.Message, Path: e.Path}
	if e.Limit != nil {
		f.Limit = e.Limit.Wire()
	}
	if e.Spent != nil {
		f.Spent = e.Spent.Wire()
	}
	return f
}

// FromFailure is the domain error f carries. A refusing bucket's decision
// comes without its rate, which the receiver reads from its limits table.
func FromFailure(f *kitpb.Failure) *Error {
	e := &Error{Code: Code(f.Code), Message: f.Message, Path: f.Path}
	if f.Limit != nil {
		d := limits.FromWire(f.Limit, nil)
		e.Limit = &d
	}
	if f.Spent != nil {
		d := limits.FromWire(f.Spent, nil)
		e.Spent = &d
	}
	return e
}

// CodeOf returns the Code of err, or Internal when err is not a domain error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Unexplained reports whether err is an unavailable answer whose cause
// (the context wrapped around its domain error: which group, leader or
// peer would not take the request) its answer drops, and so only a log
// can show. A bare domain error carries nothing more.
func Unexplained(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == Unavailable && error(e) != err
}
