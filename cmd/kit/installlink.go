package main

import (
	"context"
	"fmt"
)

// runInstallLinkCreate is `kit install-link create KIT`: it makes the Kit's
// install link, replacing the one it had, and prints its URL (shown once).
func runInstallLinkCreate(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	r, err := c.CreateInstallLink(ctx, kitID)
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, r)
	}
	return formatNewInstallLink(e.stdout, r)
}

// runInstallLinkDelete is `kit install-link delete KIT`.
func runInstallLinkDelete(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	r, err := c.DeleteInstallLink(ctx, kitID)
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, r)
	}
	_, err = fmt.Fprintln(e.stdout, "install link deleted; the URL no longer works")
	return err
}
