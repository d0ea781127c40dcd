package main

import "context"

// runMe is `kit me`: which workspace and member KIT_DEV_TOKEN acts as, and
// whether that workspace is a developer sandbox (dev-install needs one).
func runMe(ctx context.Context, e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	m, err := c.Me(ctx)
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, m)
	}
	return formatMe(e.stdout, m)
}
