package kitclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The error codes of docs/api.md "Errors" a Kit backend meets.
const (
	CodeValidation          = "validation_error"
	CodeInvalidToken        = "invalid_token"
	CodeMissingScope        = "missing_scope"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeConflict            = "conflict"
	CodeGone                = "gone"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal_error"
)

// Error is an answer other than 2xx: the docs/api.md "Errors" error body and
// what its headers said.
type Error struct {
	Status        int    // HTTP status
	Code          string // stable; "" when the body was not a kitd error body (a proxy's page)
	Message       string // for people; may change
	CorrelationID string // names the request in the server's log
	// Path is the JSON path of the offending field of a validation_error
	// ("blocks[3].fields[0].label"), read from the start of the message;
	// "" when the message names none.
	Path string
	// RetryAfter is the Retry-After of a 429 or a 503 (0 when absent).
	RetryAfter time.Duration
	// RequiredScope is the scope a 403 missing_scope names
	// (X-Service-Required-Scope).
	RequiredScope string
	// RateLimit is the bucket state the answer carried; nil when none.
	RateLimit *RateLimit
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("kitclient: HTTP %d %s without an error body", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("kitclient: %s (%s, HTTP %d, correlation id %s)", e.Message, e.Code, e.Status, e.CorrelationID)
}

// retryAfter is e's RetryAfter, 0 for a nil e.
func (e *Error) retryAfter() time.Duration {
	if e == nil {
		return 0
	}
	return e.RetryAfter
}

// maxHeaderInt bounds the numbers the client reads from a header (seconds,
// requests), so that a Duration cannot overflow; a wait that long is past
// every MaxWait.
const maxHeaderInt = 1 << 31

// ErrorBody is the body of every answer other than 2xx, of the Web API and
// the developer API alike (docs/api.md "Errors").
type ErrorBody struct {
	Code          string `json:"code"`
	Message       string `json:"message"`
	CorrelationID string `json:"correlationId"`
}

// newError reads the error body of a non-2xx answer.
func newError(res *http.Response, body []byte, rl *RateLimit) *Error {
	e := &Error{Status: res.StatusCode, RateLimit: rl, RequiredScope: res.Header.Get("X-Service-Required-Scope")}
	var wire ErrorBody
	if json.Unmarshal(body, &wire) == nil && wire.Code != "" {
		e.Code, e.Message, e.CorrelationID = wire.Code, wire.Message, wire.CorrelationID
	}
	if e.Code == CodeValidation {
		e.Path = messagePath(e.Message)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(res.Header.Get("Retry-After"))); err == nil && n > 0 {
		e.RetryAfter = time.Duration(min(n, maxHeaderInt)) * time.Second
	}
	return e
}

// messagePath is the field path a validation message starts with
// ("blocks[0].text: is required"), or "" when it starts with a sentence
// ("malformed JSON at byte 3").
func messagePath(msg string) string {
	path, _, ok := strings.Cut(msg, ": ")
	if !ok || path == "" {
		return ""
	}
	for _, r := range path {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '_', r == '.', r == '[', r == ']', r == '-':
		default:
			return ""
		}
	}
	return path
}
