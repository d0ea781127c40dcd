package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// envReader reads the environment variables that are the flags' defaults
// (OPERATIONS.md sections 1, 6, 7 and 8) and keeps the first error, which
// parseFlags reports before the flags themselves.
type envReader struct {
	lookup func(string) (string, bool)
	err    error
}

func (e *envReader) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// str is the variable's value, or def when it is not set.
func (e *envReader) str(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

// bool reads 1, 0, true or false; anything else is refused rather than
// read as false, so that KIT_DEMO=yes does not silently start without it.
func (e *envReader) bool(name string) bool {
	v, ok := e.lookup(name)
	if !ok {
		return false
	}
	switch v {
	case "1", "true":
		return true
	case "0", "false", "":
		return false
	}
	e.fail(fmt.Errorf("%s must be 1, 0, true or false", name))
	return false
}

// list reads a comma-separated variable, for a flag that may be repeated.
func (e *envReader) list(name string) repeated {
	v, _ := e.lookup(name)
	var r repeated
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			r = append(r, s)
		}
	}
	return r
}

// secret reads name, or the file name_FILE names (a mounted secret), with
// one trailing newline trimmed. Setting both is refused: which one wins
// would be a guess. The file's content never appears in an error.
func (e *envReader) secret(name string) string {
	v, set := e.lookup(name)
	path, fromFile := e.lookup(name + "_FILE")
	switch {
	case set && fromFile:
		e.fail(fmt.Errorf("%s and %s_FILE are both set: set one", name, name))
		return ""
	case !fromFile:
		return v
	}
	b, err := os.ReadFile(path)
	if err != nil {
		// The path is the operator's own; the error carries nothing of
		// the file.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		e.fail(fmt.Errorf("%s_FILE: cannot read %s: %w", name, path, err))
		return ""
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		e.fail(fmt.Errorf("%s_FILE: %s is empty", name, path))
	}
	return s
}
