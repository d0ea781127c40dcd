// Package input owns the shape checks of request input that every surface of
// the front end shares: decoding a JSON body and checking its fields. Each
// check answers the first problem as a validation error that names the
// field path; it never repeats the value it judged, and it knows no
// business rule.
package input

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/plaintext"
)

// RequireString checks a required string of minLen to maxLen characters.
func RequireString(path string, v *string, minLen, maxLen int) error {
	if v == nil {
		return kiterr.Invalid(path, "is required")
	}
	return StringLen(path, *v, minLen, maxLen)
}

// StringLen checks that v has minLen to maxLen characters.
func StringLen(path, v string, minLen, maxLen int) error {
	n := utf8.RuneCountInString(v)
	if n < minLen {
		if minLen == 1 {
			return kiterr.Invalid(path, "must not be empty")
		}
		return kiterr.Invalid(path, "must be at least "+strconv.Itoa(minLen)+" characters")
	}
	if n > maxLen {
		return kiterr.Invalid(path, "must be at most "+strconv.Itoa(maxLen)+" characters")
	}
	return nil
}

// Plain checks that v, a name or a single line, holds no control
// character and no bidirectional override (plaintext.Forbidden).
func Plain(path, v string) error {
	if strings.IndexFunc(v, func(r rune) bool { return plaintext.Forbidden(r, false) }) >= 0 {
		return kiterr.Invalid(path, "must not contain control characters")
	}
	return nil
}

// NotBlank checks that v is not only white space.
func NotBlank(path, v string) error {
	if strings.TrimSpace(v) == "" {
		return kiterr.Invalid(path, "must not be blank")
	}
	return nil
}

// RequireUUID checks a required UUID.
func RequireUUID(path string, v *string) error {
	if v == nil {
		return kiterr.Invalid(path, "is required")
	}
	return UUID(path, *v)
}

// UUID checks an id: a UUID in the lower-case form ids.Valid takes. A
// UUID spelt otherwise is told apart, since its sender may not know that
// the case matters.
func UUID(path, v string) error {
	switch {
	case ids.Valid(v):
		return nil
	case ids.Valid(strings.ToLower(v)):
		return kiterr.Invalid(path, "must be a UUID in lower case")
	}
	return kiterr.Invalid(path, "must be a UUID")
}

// OneOf checks that v is one of allowed.
func OneOf(path, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return kiterr.Invalid(path, "must be one of "+strings.Join(allowed, ", "))
}

// FirstError is the first of errs that is not nil: checks are listed in
// the order their problems are reported.
func FirstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// DecodeJSON decodes a JSON object body into v. Keys match fields exactly
// (case-sensitive) and other keys are ignored; a key given twice in one
// object is refused at its path (strict.go). A type error names the field
// path and the type it must have; a syntax error gives its offset.
func DecodeJSON(body []byte, v any) error {
	blank, err := checkKeys(body, reflect.TypeOf(v))
	// A malformed body is answered as malformed (by json.Unmarshal below)
	// even after a key problem, as the streamed upload reader answers it.
	// Only a refused body pays for the extra pass.
	if err != nil && json.Valid(body) {
		return err
	}
	if len(blank) > 0 {
		body = blankKeys(body, blank)
	}
	err = json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return kiterr.Invalid("", "request body must be a JSON object")
		}
		if problem := numberProblem(typeErr); problem != "" {
			return kiterr.Invalid(typeErr.Field, problem)
		}
		return kiterr.Invalid(typeErr.Field, "must be of type "+jsonType(typeErr.Type.Kind().String()))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return MalformedJSON(syntaxErr.Offset)
	}
	return kiterr.Invalid("", "malformed JSON")
}

// numberProblem says what is wrong with a number that a numeric field
// cannot hold, or "" when the value is no number: "must be of type
// number" would mislead for 1.5 where an integer belongs, or for 1e700.
// The number itself is never echoed.
func numberProblem(e *json.UnmarshalTypeError) string {
	lit, ok := strings.CutPrefix(e.Value, "number ")
	if !ok {
		return ""
	}
	switch e.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.ContainsAny(lit, ".eE") {
			return "must be an integer, without a fraction or an exponent"
		}
		if strings.HasPrefix(lit, "-") && e.Type.Kind() >= reflect.Uint && e.Type.Kind() <= reflect.Uint64 {
			return "must not be negative"
		}
		return "is out of range"
	case reflect.Float32, reflect.Float64:
		return "is out of range"
	}
	return ""
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64":
		return "number"
	}
	return kind
}

// MalformedJSON is DecodeJSON's answer to a syntax error at offset.
func MalformedJSON(offset int64) error {
	return kiterr.Invalid("", "malformed JSON at byte "+strconv.FormatInt(offset, 10))
}
