// Package limits owns every rate limit of docs/api.md "Limits" and the token
// buckets that enforce them.
//
// It holds, in one place:
//   - the stable [Name] of each bucket (used in `--limits FILE` overrides and
//     in the RateLimit-Policy / RateLimit response headers);
//   - the [Rate] of each bucket as docs/api.md "Limits" sets it ([Spec]), and the
//     `--limits off|spec|FILE` switch of OPERATIONS.md section 1 ([Load]);
//   - the [Bucket] arithmetic and the [Decision] it yields, including the
//     header values described in docs/decisions.md ("Rate limits").
//
// It does not own who a bucket is counted per (installation, conversation,
// webhook, token, ...), where buckets live, or how a 429 is written: the
// actor that owns the counted thing keeps its Bucket values and asks them.
// Time comes from the caller (see package clock), never from time.Now.
package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Name is the stable name of a rate limit. Names appear in `--limits FILE`
// overrides and in the RateLimit-Policy and RateLimit headers; never rename
// one.
type Name string

// The rate limits of docs/api.md "Rate limits".
const (
	Read          Name = "read"           // Web API reads, per installation
	Write         Name = "write"          // Web API writes, per installation
	PostMessage   Name = "post_message"   // POST /messages additionally, per conversation
	Files         Name = "files"          // POST /files and GET /files/{id}/content, per installation
	Webhook       Name = "webhook"        // incoming webhooks, per webhook
	Developer     Name = "developer"      // Developer API, per token
	ResponseURL   Name = "response_url"   // responseUrl posts, per installation
	Interactions  Name = "interactions"   // block interactions, per member and Kit
	SlashCommands Name = "slash_commands" // slash commands, per member and command

	// Not in docs/api.md "Limits", which gives the unauthenticated routes no
	// bucket: failures there, per source address, counted by the front
	// end node that answered them (docs/decisions.md, "Rate limits").
	WebhookNotFound  Name = "webhook_not_found"  // 404s of the hooks host, per source address
	KitAccessFailure Name = "kit_access_failure" // failed POST /oauth/kit.access, per source address
	SignInFailure    Name = "sign_in_failure"    // failed POST /app/signin (401), per source address
)

// Names lists every Name, in the order of docs/api.md "Rate limits", then kitd's own.
func Names() []Name {
	return []Name{Read, Write, PostMessage, Files, Webhook, Developer, ResponseURL, Interactions, SlashCommands,
		WebhookNotFound, KitAccessFailure, SignInFailure}
}

// Limits of docs/api.md "Limits" that are not token buckets. They are fixed by
// the contract and not overridable by `--limits FILE`.
const (
	// ResponseURLUses is how many times one responseUrl token may be used.
	ResponseURLUses = 5
	// ResponseURLLifetime is how long one responseUrl token is valid.
	ResponseURLLifetime = 30 * time.Minute
	// EventsInFlight is the number of event deliveries to a Kit in flight
	// at once, per installation.
	EventsInFlight = 10
	// EventsPerKit is the "50 per Kit" bound on event deliveries.
	EventsPerKit = 50
	// ToolResultBytes bounds the JSON of a tool run's result, which the
	// run keeps (kitd's own: the contract shows no Run field): the size of a
	// message's blocks and text together, far below the 1 MiB answer
	// a call may read, so that runs stay small records.
	ToolResultBytes = 64 << 10
)

// Rate is a token bucket: it holds at most Capacity tokens and gains Refill
// tokens per Window, continuously (Refill/Window tokens per unit of time, not
// in steps). Each request takes one token; a request that finds no whole
// token is over the limit.
//
//	"100 requests/minute"  = Rate{Capacity: 100, Refill: 100, Window: time.Minute}
//	"1/second, burst 5"    = Rate{Capacity: 5,   Refill: 1,   Window: time.Second}
//
// Name is the policy name the bucket reports in its headers; [Spec] and
// [Load] set it to the table key.
type Rate struct {
	Name     Name
	Capacity int           // tokens when full (the burst)
	Refill   int           // tokens regained per Window
	Window   time.Duration // the period of Refill
}

// Bounds on the fields of a Rate, so the bucket arithmetic cannot overflow.
const (
	MaxCapacity = 1_000_000
	MaxRefill   = 1_000_000_000
	MaxWindow   = 366 * 24 * time.Hour
)

// Validate reports whether r is a usable rate: Capacity and Refill at least
// 1, Window positive, all within the Max bounds, and Capacity*Window (in
// nanoseconds) within half of int64.
func (r Rate) Validate() error {
	switch {
	case r.Capacity < 1:
		return fmt.Errorf("capacity must be at least 1, got %d", r.Capacity)
	case r.Capacity > MaxCapacity:
		return fmt.Errorf("capacity must be at most %d, got %d", MaxCapacity, r.Capacity)
	case r.Refill < 1:
		return fmt.Errorf("refill must be at least 1, got %d", r.Refill)
	case r.Refill > MaxRefill:
		return fmt.Errorf("refill must be at most %d, got %d", MaxRefill, r.Refill)
	case r.Window <= 0:
		return fmt.Errorf("window must be positive, got %v", r.Window)
	case r.Window > MaxWindow:
		return fmt.Errorf("window must be at most %v, got %v", MaxWindow, r.Window)
	case int64(r.Capacity) > math.MaxInt64/2/int64(r.Window):
		return fmt.Errorf("capacity %d times window %v is too large", r.Capacity, r.Window)
	}
	return nil
}

// PolicyWindow is the w of the RateLimit-Policy header: the whole seconds
// (rounded up, at least 1) an empty bucket takes to fill, so that q/w is the
// sustained rate and q the burst. For write (50 per minute) it is 60; for
// post_message (1/second, burst 5) it is 5.
func (r Rate) PolicyWindow() int64 {
	if r.Refill <= 0 || r.Window <= 0 {
		return 0
	}
	ns := int64(r.Capacity) * int64(r.Window)
	ns = ceilDiv(ns, int64(r.Refill))
	return max(1, ceilDiv(ns, int64(time.Second)))
}

// String renders r for logs, e.g. "write: 50 per 1m0s, burst 50".
func (r Rate) String() string {
	return fmt.Sprintf("%s: %d per %v, burst %d", r.Name, r.Refill, r.Window, r.Capacity)
}

// Table is the rate of every limit, by name. A nil Table means limits are
// off.
type Table map[Name]Rate

// Spec returns the rates of docs/api.md "Limits" (a fresh map on each call).
func Spec() Table {
	perMinute := func(n Name, k int) Rate { return Rate{Name: n, Capacity: k, Refill: k, Window: time.Minute} }
	return Table{
		Read:          perMinute(Read, 100),
		Write:         perMinute(Write, 50),
		PostMessage:   {Name: PostMessage, Capacity: 5, Refill: 1, Window: time.Second},
		Files:         perMinute(Files, 20),
		Webhook:       {Name: Webhook, Capacity: 5, Refill: 1, Window: time.Second},
		Developer:     perMinute(Developer, 60),
		ResponseURL:   perMinute(ResponseURL, 50),
		Interactions:  perMinute(Interactions, 30),
		SlashCommands: perMinute(SlashCommands, 10),
		// A sender whose webhook was revoked keeps posting at its usual
		// rate, at most the webhook bucket's 1/second, and never empties
		// this; a scanner of made-up URLs is cut to 2 a second after a
		// burst of 30.
		WebhookNotFound: {Name: WebhookNotFound, Capacity: 30, Refill: 2, Window: time.Second},
		// A backend with a stale secret or a spent code fails a few times
		// before someone looks; guessing client ids or secrets is cut to
		// 1 a second after a burst of 20.
		KitAccessFailure: {Name: KitAccessFailure, Capacity: 20, Refill: 1, Window: time.Second},
		// A member who mistypes a password fails a few times; guessing
		// passwords is cut to 10 a minute after a burst of 10.
		SignInFailure: {Name: SignInFailure, Capacity: 10, Refill: 10, Window: time.Minute},
	}
}

// Load interprets the `--limits` argument (OPERATIONS.md section 1):
//
//	"spec" (or "")  Spec(), enabled
//	"off"           nil, disabled: no rate limits at all
//	anything else   the path of a JSON file overriding single rows of Spec()
//
// The file is an object keyed by limit name; each value may give any of
// "capacity", "refill" (integers) and "windowSeconds" (a positive number,
// fractions allowed); fields it leaves out keep their Spec() value:
//
//	{"write": {"capacity": 5, "refill": 5, "windowSeconds": 10},
//	 "read":  {"capacity": 1000}}
//
// An unknown limit name or field, a value of the wrong type, or a resulting
// rate that fails [Rate.Validate] is an error naming the key (e.g.
// "write.capacity").
func Load(arg string) (Table, bool, error) {
	switch arg {
	case "", "spec":
		return Spec(), true, nil
	case "off":
		return nil, false, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, false, fmt.Errorf("limits: %w", err)
	}
	t, err := parseOverrides(data)
	if err != nil {
		return nil, false, fmt.Errorf("limits: %s: %w", arg, err)
	}
	return t, true, nil
}

func parseOverrides(data []byte) (Table, error) {
	var rows map[string]json.RawMessage
	if err := decodeStrict(data, &rows); err != nil {
		return nil, fmt.Errorf("want a JSON object of limit names: %w", err)
	}
	if rows == nil {
		return nil, errors.New("want a JSON object of limit names, got null")
	}
	t := Spec()
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report the first bad key deterministically
	for _, key := range keys {
		r, ok := t[Name(key)]
		if !ok {
			return nil, fmt.Errorf("%q: unknown limit name (known: %s)", key, knownNames())
		}
		var fields map[string]json.RawMessage
		if err := decodeStrict(rows[key], &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("%q: want an object with capacity, refill, windowSeconds", key)
		}
		for field, raw := range fields {
			path := key + "." + field
			switch field {
			case "capacity":
				if err := decodeInt(raw, &r.Capacity); err != nil {
					return nil, fmt.Errorf("%q: %w", path, err)
				}
			case "refill":
				if err := decodeInt(raw, &r.Refill); err != nil {
					return nil, fmt.Errorf("%q: %w", path, err)
				}
			case "windowSeconds":
				n, ok := decodeNumber(raw)
				s, err := n.Float64()
				if !ok || err != nil {
					return nil, fmt.Errorf("%q: want a number of seconds", path)
				}
				if !(s > 0) || s > MaxWindow.Seconds() {
					return nil, fmt.Errorf("%q: must be positive and at most %v, got %v", path, MaxWindow.Seconds(), s)
				}
				r.Window = time.Duration(math.Round(s * float64(time.Second)))
				if r.Window <= 0 {
					return nil, fmt.Errorf("%q: must be at least one nanosecond, got %v", path, s)
				}
			default:
				return nil, fmt.Errorf("%q: unknown field (known: capacity, refill, windowSeconds)", path)
			}
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%q: %w", key, err)
		}
		t[r.Name] = r
	}
	return t, nil
}

func decodeInt(raw json.RawMessage, dst *int) error {
	n, ok := decodeNumber(raw)
	if !ok {
		return errors.New("want an integer")
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %s", n)
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return fmt.Errorf("out of range: %s", n)
	}
	*dst = int(v)
	return nil
}

// decodeNumber decodes raw as a bare JSON number (not a quoted one).
func decodeNumber(raw json.RawMessage) (json.Number, bool) {
	var v any
	if err := decodeStrict(raw, &v); err != nil {
		return "", false
	}
	n, ok := v.(json.Number)
	return n, ok
}

// decodeStrict decodes exactly one JSON value with nothing after it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func knownNames() string {
	names := Names()
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
