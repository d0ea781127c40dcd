// Package kiterr defines the domain errors that every layer of kitd shares.
// Actors return them, the cluster layer carries them across actor boundaries
// as kitpb.Failure, and the HTTP layer maps each Code to a status in one
// table. Messages are for people; they name field paths and never contain a
// submitted value.
package kiterr

import (
	"errors"
	"fmt"
)

// Code is a stable error code of SPEC.md section 7.
type Code string

// The codes of SPEC.md section 7 that kitd answers.
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
)

// Error is a domain error. Path is the JSON path of the offending field for
// validation errors ("blocks[3].fields[0].label"), empty otherwise.
type Error struct {
	Code    Code
	Message string
	Path    string
	// Limit describes the refusing bucket of a RateLimited error.
	Limit *Limit
}

// Limit is what a client needs to know about a refusing rate bucket.
type Limit struct {
	Policy       string // the bucket's limits.Name
	Remaining    int
	RetryAfter   int // whole seconds, at least 1
	ResetSeconds int
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
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

// CodeOf returns the Code of err, or Internal when err is not a domain error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
