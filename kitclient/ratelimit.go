package kitclient

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateLimit is a bucket's state as an answer's RateLimit-Policy and
// RateLimit headers give it (docs/api.md "Limits", in the structured-field form
// of draft-ietf-httpapi-ratelimit-headers):
//
//	RateLimit-Policy: "write";q=50;w=60
//	RateLimit: "write";r=49;t=2
type RateLimit struct {
	Policy    string        // the bucket's name: read, write, post_message, files, webhook, ...
	Limit     int           // q: the burst
	Window    time.Duration // w: an empty bucket fills in it, so Limit/Window is the sustained rate
	Remaining int           // r: requests left now
	Reset     time.Duration // t: until the bucket is full again
}

// nextToken is how long an empty bucket takes to get one token back: the
// sustained rate's interval. 0 when unknown.
func (r *RateLimit) nextToken() time.Duration {
	if r == nil || r.Limit <= 0 || r.Window <= 0 {
		return 0
	}
	return (r.Window + time.Duration(r.Limit) - 1) / time.Duration(r.Limit)
}

// parseRateLimit reads the two headers; nil when either is missing or they
// name different buckets.
func parseRateLimit(h http.Header) *RateLimit {
	pname, pparams, ok := parseSFItem(h.Get("RateLimit-Policy"))
	if !ok {
		return nil
	}
	name, params, ok := parseSFItem(h.Get("RateLimit"))
	if !ok || name != pname {
		return nil
	}
	return &RateLimit{
		Policy:    name,
		Limit:     pparams["q"],
		Window:    time.Duration(pparams["w"]) * time.Second,
		Remaining: params["r"],
		Reset:     time.Duration(params["t"]) * time.Second,
	}
}

// parseSFItem parses `"name";k=1;k2=2`: an sf-string with integer
// parameters, all the two headers use.
func parseSFItem(v string) (name string, params map[string]int, ok bool) {
	v = strings.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' {
		return "", nil, false
	}
	end := strings.IndexByte(v[1:], '"')
	if end < 0 {
		return "", nil, false
	}
	name, rest := v[1:1+end], v[2+end:]
	params = make(map[string]int, 2)
	for rest != "" {
		var p string
		if !strings.HasPrefix(rest, ";") {
			return "", nil, false
		}
		p, rest, _ = strings.Cut(rest[1:], ";")
		if rest != "" {
			rest = ";" + rest
		}
		k, val, found := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.Atoi(val)
		if !found || err != nil || n < 0 || n > maxHeaderInt {
			return "", nil, false
		}
		params[k] = n
	}
	return name, params, true
}

// family is the bucket a call spends (docs/api.md "Limits"). Only the buckets
// of the whole installation (or of one webhook) are paced: the client knows
// them to be the same for every call of the family.
type family string

const (
	familyNone    family = ""
	familyRead    family = "read"
	familyWrite   family = "write"
	familyFiles   family = "files"
	familyWebhook family = "webhook"
)

// pacer remembers, per family, when an answer said its bucket was empty,
// so that the next call waits for a token instead of spending a request on
// a certain 429.
type pacer struct {
	mu        sync.Mutex
	notBefore map[family]time.Time
}

func newPacer() *pacer { return &pacer{notBefore: make(map[family]time.Time)} }

// note records the bucket state of an answer to a call of f.
func (p *pacer) note(f family, rl *RateLimit, now time.Time) {
	if f == familyNone || rl == nil || rl.Policy != string(f) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rl.Remaining > 0 {
		delete(p.notBefore, f)
		return
	}
	p.notBefore[f] = now.Add(rl.nextToken())
}

// waitForToken waits until f's bucket has a token again by the last answer
// that spent it (at most the policy's MaxWait: past that, the server's
// answer is better than a guess).
func (c *Client) waitForToken(ctx context.Context, f family) error {
	if f == familyNone {
		return ctx.Err()
	}
	c.pace.mu.Lock()
	at, ok := c.pace.notBefore[f]
	c.pace.mu.Unlock()
	if !ok {
		return ctx.Err()
	}
	wait := at.Sub(c.now())
	if wait <= 0 || wait > c.retry.MaxWait {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
		// A wait that cannot end before the deadline is not begun: the
		// server's answer (a 429 and its Retry-After, or the call done)
		// says more than context.DeadlineExceeded would.
		return ctx.Err()
	}
	return c.sleep(ctx, wait)
}
