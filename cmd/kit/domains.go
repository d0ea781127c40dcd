package main

import (
	"context"
	"flag"
)

// setupDomainsAdd is `kit domains add KIT DOMAIN [--method dns|well_known]`:
// it prints the proof to publish before `kit domains verify`.
func setupDomainsAdd(fs *flag.FlagSet) runner {
	method := fs.String("method", "", "how the domain is proven: dns (a TXT record, the server's default) or well_known (a file on the domain's web server)")
	return func(ctx context.Context, e *env, pos []string) error {
		if *method != "" && *method != "dns" && *method != "well_known" {
			return usagef("--method must be dns or well_known")
		}
		c, kitID, err := e.kitClient(ctx, pos[0])
		if err != nil {
			return err
		}
		r, added, err := c.AddDomain(ctx, kitID, pos[1], *method)
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, r)
		}
		return formatDomain(e.stdout, pos[0], &r.Domain, added)
	}
}

// runDomainsVerify is `kit domains verify KIT DOMAIN`.
func runDomainsVerify(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	r, err := c.VerifyDomain(ctx, kitID, pos[1])
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, r)
	}
	return formatDomain(e.stdout, pos[0], &r.Domain, false)
}

// runDomainsRemove is `kit domains remove KIT DOMAIN`.
func runDomainsRemove(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	if err := c.RemoveDomain(ctx, kitID, pos[1]); err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, map[string]bool{"ok": true})
	}
	_, err = e.stdout.Write([]byte("removed " + clean(pos[1]) + "\n"))
	return err
}
