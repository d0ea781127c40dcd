// Package kiterrtest holds the checks that tests of several packages make
// on kiterr values. Only tests import it.
package kiterrtest

import (
	"errors"
	"testing"

	"github.com/kitd/kitd/internal/kiterr"
)

// WantPath fails t unless err is a validation error at path; a path of "-"
// wants no error at all.
func WantPath(t testing.TB, err error, path string) {
	t.Helper()
	if path == "-" {
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		return
	}
	var e *kiterr.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want validation_error at %q", err, path)
	}
	if e.Code != kiterr.Validation || e.Path != path {
		t.Fatalf("got %s at %q (%v), want validation_error at %q", e.Code, e.Path, err, path)
	}
}
