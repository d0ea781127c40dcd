package kitclient

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxAnswer bounds what the client reads of one answer: the largest is a
// file's content (5,000,000 bytes, docs/decisions.md), a page of 200
// messages with Blocks stays far below it.
const maxAnswer = 8 << 20

// RetryPolicy bounds the retries of one call (see the package comment for
// which failures are retried).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in all, the first included;
	// 1 turns retries off.
	MaxAttempts int
	// MaxWait is the longest the client waits before one retry. A 429 whose
	// Retry-After is longer is returned at once: the caller knows better
	// than a library whether a minute's wait is worth it.
	MaxWait time.Duration
	// Backoff is the first wait after a failure without Retry-After; it
	// doubles with every attempt, up to MaxWait, and each wait is drawn
	// between half of it and all of it so that clients that failed together
	// do not come back together.
	Backoff time.Duration
}

// DefaultRetryPolicy is what [New] uses: four attempts ride out a node
// restart or an empty write bucket (a write token comes back every 1.2 s)
// without holding a caller for long.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, MaxWait: 30 * time.Second, Backoff: 250 * time.Millisecond}
}

// Client calls the Web API of one kitd with one token. It is safe for
// concurrent use.
type Client struct {
	base   string // {base_url}, without a trailing slash
	token  string
	hc     *http.Client
	retry  RetryPolicy
	sleep  func(context.Context, time.Duration) error
	now    func() time.Time
	newKey func() string
	pace   *pacer
}

// Option configures a [Client].
type Option func(*Client)

// WithHTTPClient sends the requests through hc instead of
// http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetry replaces [DefaultRetryPolicy].
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithClock replaces the wall clock and the timer the client waits on: now
// tells the time, sleep waits d or until ctx is done (returning ctx.Err()).
// Tests pass a fake pair to check waits without spending them.
func WithClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.now, c.sleep = now, sleep }
}

// WithIdempotencyKeys replaces the generator of the Idempotency-Key of
// [Client.PostMessage] (default: 128 random bits, base64url).
func WithIdempotencyKeys(next func() string) Option { return func(c *Client) { c.newKey = next } }

// New returns a client of the Web API at baseURL ({base_url}, e.g.
// https://kit.example.com/api/v1) that sends token as its bearer token.
// token may be empty for a client that only exchanges codes
// ([Client.ExchangeCode]) or posts to webhooks.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		base:   strings.TrimRight(baseURL, "/"),
		token:  token,
		hc:     http.DefaultClient,
		retry:  DefaultRetryPolicy(),
		sleep:  sleepCtx,
		now:    time.Now,
		newKey: randomKey,
		pace:   newPacer(),
	}
	for _, o := range opts {
		o(c)
	}
	c.retry.MaxAttempts = max(1, c.retry.MaxAttempts)
	return c
}

// WithToken returns a client like c that sends token instead. Its rate
// budget is tracked apart from c's: the token may belong to another
// installation.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	cp.pace = newPacer()
	return &cp
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// randomKey is an Idempotency-Key of 128 random bits: 22 base64url
// characters, inside the 1-255 printable ASCII of docs/api.md "Field and size limits".
func randomKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// call is one logical request; do sends it once per attempt.
type call struct {
	method string
	url    string // absolute
	shown  string // in errors: the path under {base_url}, never a webhook's secret
	family family
	body   any    // JSON-encoded when not nil
	key    string // Idempotency-Key; makes a write retryable
	noAuth bool   // kit.access and webhooks: the credential is elsewhere
}

// answer is a 2xx answer, read whole.
type answer struct {
	header http.Header
	body   []byte
}

// get and write build the calls of the Web API, under {base_url}.
func (c *Client) get(path string, q url.Values, f family) call {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return call{method: http.MethodGet, url: u, shown: path, family: f}
}

func (c *Client) write(method, path string, body any) call {
	return call{method: method, url: c.base + path, shown: path, family: familyWrite, body: body}
}

// doJSON sends cl and decodes a 2xx answer's body into out.
func (c *Client) doJSON(ctx context.Context, cl call, out any) error {
	a, err := c.do(ctx, cl)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("kitclient: %s %s: decoding the answer: %w", cl.method, cl.shown, err)
	}
	return nil
}

// do sends cl, retrying as the package comment says, and returns its 2xx
// answer or the last failure.
func (c *Client) do(ctx context.Context, cl call) (*answer, error) {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return nil, fmt.Errorf("kitclient: %s %s: encoding the request: %w", cl.method, cl.shown, err)
		}
	}
	if _, err := url.Parse(cl.url); err != nil {
		// Not a failure that passes: no attempt, no retry. (A URL error
		// may hold a webhook's secret: only the shown path is named.)
		return nil, fmt.Errorf("kitclient: %s %s: the URL does not parse", cl.method, cl.shown)
	}
	// A header value net/http refuses fails every attempt before it is
	// sent: no retry either. Named, never shown (the token is a secret).
	if !cl.noAuth && !validHeaderValue(c.token) {
		return nil, fmt.Errorf("kitclient: %s %s: the token has a character no HTTP header can carry (a newline?)", cl.method, cl.shown)
	}
	if !validHeaderValue(cl.key) {
		return nil, fmt.Errorf("kitclient: %s %s: the Idempotency-Key has a character no HTTP header can carry", cl.method, cl.shown)
	}
	retryable := cl.method == http.MethodGet || cl.key != ""
	backoff := c.retry.Backoff
	for attempt := 1; ; attempt++ {
		if err := c.waitForToken(ctx, cl.family); err != nil {
			return nil, err
		}
		a, err := c.once(ctx, cl, body)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt >= c.retry.MaxAttempts {
			return nil, err
		}
		var wait time.Duration
		var apiErr *Error
		switch {
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
			// Refused before anything was done: safe to repeat, writes too.
			wait = apiErr.RetryAfter
			if wait == 0 {
				wait = apiErr.RateLimit.nextToken()
			}
			if wait == 0 {
				wait = jitter(backoff)
			}
		case !retryable:
			return nil, err
		case apiErr == nil || transient(apiErr.Status):
			// A 503 says when to come back (kitd: Retry-After: 1).
			wait = max(jitter(backoff), apiErr.retryAfter())
		default:
			return nil, err
		}
		if wait > c.retry.MaxWait {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			// The wait cannot end before the deadline: the failure says
			// more than context.DeadlineExceeded would.
			return nil, err
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, c.retry.MaxWait)
	}
}

// validHeaderValue says whether net/http sends v as a header value: no
// control character but a tab (RFC 9110 field-value).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// transient says whether a failure status may pass by itself.
func transient(status int) bool {
	switch status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// jitter is a wait between d/2 and d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// once makes one attempt. A non-2xx answer is an *Error.
func (c *Client) once(ctx context.Context, cl call, body []byte) (*answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, cl.url, rd)
	if err != nil {
		return nil, fmt.Errorf("kitclient: %s %s: %w", cl.method, cl.shown, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if !cl.noAuth && c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, which may be a webhook's secret
		}
		return nil, fmt.Errorf("kitclient: %s %s: %w", cl.method, cl.shown, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	if err == nil && len(data) > maxAnswer {
		err = fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	if err != nil {
		return nil, fmt.Errorf("kitclient: %s %s: reading the answer: %w", cl.method, cl.shown, err)
	}
	rl := parseRateLimit(res.Header)
	c.pace.note(cl.family, rl, c.now())
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, newError(res, data, rl)
	}
	return &answer{header: res.Header, body: data}, nil
}

// pathID escapes one path segment.
func pathID(id string) string { return url.PathEscape(id) }

// pageQuery is the query of one page of a list.
func pageQuery(p PageOptions) url.Values {
	q := url.Values{}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}
