package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/kitd/kitd/kitclient/dev"
	"net/http"
	"slices"
	"time"
)

const (
	// maxLogLimit is the largest page the logs route gives (docs/api.md "Developer API"):
	// later polls of --follow ask for it to need the fewest requests.
	maxLogLimit = 100
	// maxFollowPages bounds one poll of --follow: of more new entries than
	// this many pages between two polls only the newest are shown (the log
	// of a busy Kit is read with filters, not followed whole).
	maxFollowPages = 10
)

// setupLogs is `kit logs KIT`: one page of the developer log, or with
// --follow every new entry as it is written, until interrupted.
func setupLogs(fs *flag.FlagSet) runner {
	source := fs.String("source", "", "only entries of this source: tool_call, audit or delivery")
	level := fs.String("level", "", "only entries of this level: info or error")
	limit := fs.Int("limit", 0, "entries of the page, 1-100 (default: the server's, 50); with --follow, how many earlier entries to show first")
	cursor := fs.String("cursor", "", "show the page after this cursor (printed under a page that has older entries)")
	follow := fs.Bool("follow", false, "keep printing new entries as they are written, until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "with --follow, the time between two polls")
	return func(ctx context.Context, e *env, pos []string) error {
		switch {
		case *limit < 0:
			return usagef("--limit must be 1-100")
		case *interval <= 0:
			return usagef("--interval must be positive")
		case *follow && *cursor != "":
			return usagef("--cursor and --follow do not go together")
		}
		c, kitID, err := e.kitClient(ctx, pos[0])
		if err != nil {
			return err
		}
		q := LogQuery{Source: *source, Level: *level, Limit: *limit, Cursor: *cursor}
		if !*follow {
			p, err := c.Logs(ctx, kitID, q)
			if err != nil {
				return err
			}
			if e.json {
				return writeJSON(e.stdout, p)
			}
			return formatLogPage(e.stdout, pos[0], q, p)
		}
		f := &follower{c: c, kitID: kitID, q: q}
		return f.run(ctx, e, *interval)
	}
}

// follower polls a Kit's log and hands out each entry once, oldest first.
type follower struct {
	c     *Client
	kitID string
	q     LogQuery // filters and the size of the first page
	last  string   // id of the newest entry handed out
}

// run prints the newest page, then every new entry, until ctx ends: an
// interrupt is how a follow ends, so it is not an error. Errors that a later
// poll may not see (no answer, 429, 5xx) are reported and polling goes on;
// any other error ends it.
func (f *follower) run(ctx context.Context, e *env, interval time.Duration) error {
	entries, err := f.poll(ctx, false)
	if err != nil {
		return err
	}
	for {
		for _, le := range entries {
			if e.json {
				err = json.NewEncoder(e.stdout).Encode(le) // one entry a line
			} else {
				err = formatLogLine(e.stdout, &le)
			}
			if err != nil {
				return fmt.Errorf("write log entry: %w", err)
			}
		}
		wait := interval
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			entries, err = f.poll(ctx, true)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				break
			}
			if !transient(err) {
				return err
			}
			fmt.Fprintf(e.stderr, "kit: %s (still following)\n", clean(err.Error()))
			var ae *APIError
			if errors.As(err, &ae) && ae.RetryAfter > 0 {
				wait = max(interval, time.Duration(ae.RetryAfter)*time.Second)
			}
		}
	}
}

// transient reports whether err may be gone at the next poll.
func transient(err error) bool {
	var ne *NetworkError
	var ae *APIError
	switch {
	case errors.As(err, &ne):
		return true
	case errors.As(err, &ae):
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return false
}

// poll returns the entries newer than the last one handed out, oldest
// first. The first poll reads one page (the newest entries, as `tail`
// shows); later ones read pages of maxLogLimit, newest first, until they
// reach the last entry handed out. Everything below it is older than what
// was shown (the first page left it out on purpose), so it is never printed.
func (f *follower) poll(ctx context.Context, later bool) ([]dev.LogEntry, error) {
	q := f.q
	if later {
		q.Limit = maxLogLimit
	}
	var fresh []dev.LogEntry
	for page := 0; ; page++ {
		p, err := f.c.Logs(ctx, f.kitID, q)
		if err != nil {
			return nil, err
		}
		reached := false
		for _, le := range p.Entries {
			if f.last != "" && le.ID == f.last {
				reached = true
				break
			}
			fresh = append(fresh, le)
		}
		// The last entry missing from every page means it expired (7 days
		// of retention), and everything older went with it.
		if !later || reached || p.NextCursor == nil || page+1 == maxFollowPages {
			break
		}
		q.Cursor = *p.NextCursor
	}
	if len(fresh) > 0 {
		f.last = fresh[0].ID
	}
	slices.Reverse(fresh)
	return fresh, nil
}
