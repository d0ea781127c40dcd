package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

// setupDeliveriesList is `kit deliveries list INSTALLATION`: one page of
// the installation's deliveries, highest sequence first, and its
// endpoint's health.
func setupDeliveriesList(fs *flag.FlagSet) runner {
	limit := fs.Int("limit", 0, "deliveries of the page, 1-100 (default: the server's, 50)")
	cursor := fs.String("cursor", "", "show the page after this cursor (printed under a page that has more)")
	return func(ctx context.Context, e *env, pos []string) error {
		if *limit < 0 {
			return usagef("--limit must be 1-100")
		}
		c, err := e.client()
		if err != nil {
			return err
		}
		p, err := c.Deliveries(ctx, pos[0], *cursor, *limit)
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, p)
		}
		return formatDeliveries(e.stdout, pos[0], *limit, p)
	}
}

// setupRedeliver is `kit deliveries redeliver INSTALLATION (EVENT_ID |
// --dead-since TIME)`.
func setupRedeliver(fs *flag.FlagSet) runner {
	deadSince := fs.String("dead-since", "", "redeliver every event dead-lettered since TIME (dead letters are kept 7 days): RFC 3339 (2026-11-23T10:00:00Z), or a duration ago by this machine's clock (24h)")
	return func(ctx context.Context, e *env, pos []string) error {
		eventID := ""
		if len(pos) > 1 {
			eventID = pos[1]
		}
		since, err := sinceTime(*deadSince, time.Now())
		switch {
		case err != nil:
			return err
		case (eventID == "") == (since == ""):
			return usagef("give EVENT_ID or --dead-since, one of them")
		}
		c, err := e.client()
		if err != nil {
			return err
		}
		r, err := c.Redeliver(ctx, pos[0], eventID, since)
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, r)
		}
		_, err = fmt.Fprintf(e.stdout, "%s queued again\n", plural(r.Redelivered, "event"))
		if err == nil && r.More {
			_, err = fmt.Fprintln(e.stdout, "more dead letters remain past what the queue has room for: run it again once these went")
		}
		return err
	}
}

// sinceTime is --dead-since as RFC 3339: given so, or a duration before now.
func sinceTime(arg string, now time.Time) (string, error) {
	if arg == "" {
		return "", nil
	}
	if _, err := time.Parse(time.RFC3339Nano, arg); err == nil {
		return arg, nil
	}
	d, err := time.ParseDuration(arg)
	if err != nil || d < 0 {
		return "", usagef("--dead-since must be an RFC 3339 time or a duration such as 24h")
	}
	return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
}

// setupTrigger is `kit trigger EVENT_TYPE [--kit KIT]`: the server sends
// a signed test event of that kind to the Kit's dev-install.
func setupTrigger(fs *flag.FlagSet) runner {
	kitArg := fs.String("kit", "", "the Kit (default: the workspace's only Kit)")
	return func(ctx context.Context, e *env, pos []string) error {
		c, err := e.client()
		if err != nil {
			return err
		}
		kitID := ""
		if *kitArg != "" {
			if kitID, err = resolveKit(ctx, c, *kitArg); err != nil {
				return err
			}
		} else {
			l, err := c.Kits(ctx)
			if err != nil {
				return err
			}
			if len(l.Kits) != 1 {
				return usagef("--kit is required: the workspace has %s", plural(len(l.Kits), "Kit"))
			}
			kitID = l.Kits[0].KitID
		}
		r, err := c.TriggerEvent(ctx, kitID, pos[0])
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, r)
		}
		_, err = fmt.Fprintf(e.stdout, "test event %s (%s, sequence %d) queued for installation %s\nfollow it: kit logs %s --source delivery\n",
			clean(r.EventID), clean(r.Type), r.Sequence, clean(r.InstallationID), clean(kitID))
		return err
	}
}
