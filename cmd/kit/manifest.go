package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// maxManifestFile bounds what is read of a manifest file: the server takes
// at most 65536 characters (docs/api.md "Field and size limits"), at most 4 bytes each, and says so
// itself when the text is too long; the bound only stops a wrong FILE (a
// disk image) from being read whole.
const maxManifestFile = 4 * 65536

// withManifest is what a command that sends a manifest needs first: the
// client, and the manifest text of FILE (readManifest).
func withManifest(e *env, file string) (*Client, string, error) {
	c, err := e.client()
	if err != nil {
		return nil, "", err
	}
	text, err := readManifest(e, file)
	return c, text, err
}

// readManifest reads the manifest text of FILE ("-" = standard input). The
// text is sent as is: the server parses it, so its problems name the paths
// of the file the developer wrote.
func readManifest(e *env, file string) (string, error) {
	var r io.Reader
	if file == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("read manifest: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxManifestFile+1))
	if err != nil {
		return "", fmt.Errorf("read manifest %s: %w", file, err)
	}
	if len(b) > maxManifestFile {
		return "", fmt.Errorf("read manifest %s: larger than %d bytes (a manifest is at most 65536 characters)", file, maxManifestFile)
	}
	return string(b), nil
}

// runValidate is `kit manifest validate FILE`: exit status 1 when the
// manifest is not valid, so scripts and CI can gate on it.
func runValidate(ctx context.Context, e *env, pos []string) error {
	c, text, err := withManifest(e, pos[0])
	if err != nil {
		return err
	}
	v, err := c.Validate(ctx, text)
	if err != nil {
		return err // printed as the API's error body: message, code, correlation id
	}
	if e.json {
		err = writeJSON(e.stdout, v)
	} else {
		err = formatValidation(e.stdout, v)
	}
	if err != nil {
		return err
	}
	if !v.Valid {
		return errInvalid
	}
	return nil
}
