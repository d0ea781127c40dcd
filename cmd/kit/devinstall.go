package main

import (
	"context"
	"flag"
)

// setupDevInstall is `kit dev-install FILE --url URL`: the server moves the
// manifest's endpoints onto URL's origin (the developer's tunnel) and
// installs the Kit into the sandbox workspace of the token.
func setupDevInstall(fs *flag.FlagSet) runner {
	tunnel := fs.String("url", "", "https URL of the tunnel to the Kit's backend; its origin replaces the origin of every endpoint URL (required)")
	return func(ctx context.Context, e *env, pos []string) error {
		if *tunnel == "" {
			return usagef("--url is required")
		}
		c, text, err := withManifest(e, pos[0])
		if err != nil {
			return err
		}
		r, err := c.DevInstall(ctx, text, *tunnel)
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, r)
		}
		return formatDevInstall(e.stdout, r)
	}
}
