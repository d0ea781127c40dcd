// Package ratecheck judges a history of requests against the rate limits
// of docs/api.md "Limits", from the client's side: no bucket granted more
// than its budget, and every 429's Retry-After was right (waiting that long
// is enough, and a whole second less would not have been).
//
// It knows the limits as docs/api.md states them, not as kitd's
// internal/limits encodes them, so that it checks the code against the
// contract and not against itself. It never sends a request: kitbench's
// mixed scenario records the history, the checks read it afterwards.
package ratecheck

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Budget is a token bucket of docs/api.md "Limits": at most Capacity requests
// at once, regaining Refill per Window continuously.
type Budget struct {
	Capacity int
	Refill   int
	Window   time.Duration
}

// allowed is the most requests the bucket can grant between two decisions
// span apart: a full bucket plus what it regains meanwhile.
func (b Budget) allowed(span time.Duration) int {
	if span < 0 {
		span = 0
	}
	return b.Capacity + int(float64(b.Refill)*float64(span)/float64(b.Window))
}

// The buckets of docs/api.md "Limits" that Kit backend traffic spends.
var (
	// Reads: 100 requests/minute per installation.
	Read = Budget{Capacity: 100, Refill: 100, Window: time.Minute}
	// Writes: 50 requests/minute per installation.
	Write = Budget{Capacity: 50, Refill: 50, Window: time.Minute}
	// POST /messages additionally: 1 message/second, burst 5, per conversation.
	PostMessage = Budget{Capacity: 5, Refill: 1, Window: time.Second}
)

// Call is one request of a history.
type Call struct {
	// Client is the sequential client that sent it: a client sends its
	// next request only after the answer to the previous one.
	Client int
	// Buckets are the buckets a success spends, each "family/id" where
	// family is a key of the budgets given to [CheckBudgets], e.g.
	// "write/<installation id>".
	Buckets []string
	// Sent and Received bound the moment the server decided.
	Sent, Received time.Time
	// Status is the answer's status (0: no answer).
	Status int
	// RetryAfter is the Retry-After header as received.
	RetryAfter string
	// Probe marks a request sent, on purpose, a second or more before the
	// Retry-After of the client's last 429 had elapsed, to show it was not
	// longer than needed; the request after the probes is the retry.
	Probe bool
}

func (c Call) ok() bool { return c.Status >= 200 && c.Status < 300 }

// Violation is one broken rule, in a sentence.
type Violation string

// Usage is the busiest minute of one bucket family: the most successes
// any single bucket of the family granted within a minute, against what
// its budget allows in a minute (a full bucket plus a minute's refill).
type Usage struct {
	Family    string `json:"family"`
	Bucket    string `json:"bucket"`
	PeakMin   int    `json:"peakPerMinute"`
	AllowMin  int    `json:"allowedPerMinute"`
	Successes int    `json:"successes"`
}

// CheckBudgets reports every bucket that granted more than its budget, and
// the busiest minute of each family. The server decided each request at
// some moment between its Sent and Received, so the successes sent at or
// after a's Sent and up to b's take place within [a.Sent, latest Received
// among them]: if more than the budget allows over that span, the bucket
// overspent whatever the timing. The check thus never blames a server for
// the client's clock, and catches any excess that lasts longer than a
// round trip. Buckets whose family has no budget are not checked.
func CheckBudgets(calls []Call, budgets map[string]Budget) ([]Violation, []Usage) {
	byBucket := map[string][]Call{}
	for _, c := range calls {
		if !c.ok() {
			continue
		}
		for _, b := range c.Buckets {
			byBucket[b] = append(byBucket[b], c)
		}
	}
	names := make([]string, 0, len(byBucket))
	for b := range byBucket {
		names = append(names, b)
	}
	sort.Strings(names)
	var out []Violation
	peaks := map[string]Usage{}
	for _, bucket := range names {
		family := familyOf(bucket)
		budget, ok := budgets[family]
		if !ok {
			continue
		}
		ok2 := byBucket[bucket]
		sort.Slice(ok2, func(i, j int) bool { return ok2[i].Sent.Before(ok2[j].Sent) })
		if v, bad := overspent(ok2, budget); bad {
			out = append(out, Violation(fmt.Sprintf("bucket %s granted %s", bucket, v)))
		}
		u := Usage{Family: family, Bucket: bucket, PeakMin: peakPerMinute(ok2), AllowMin: budget.allowed(time.Minute), Successes: len(ok2)}
		if p, seen := peaks[family]; !seen || u.PeakMin > p.PeakMin {
			peaks[family] = u
		}
	}
	usage := make([]Usage, 0, len(peaks))
	for _, u := range peaks {
		usage = append(usage, u)
	}
	sort.Slice(usage, func(i, j int) bool { return usage[i].Family < usage[j].Family })
	return out, usage
}

// overspent looks for a run of successes (sorted by Sent) that no bucket
// of budget could have granted, and describes the first it finds.
func overspent(ok []Call, budget Budget) (string, bool) {
	for i := range ok {
		latest := ok[i].Received
		for j := i; j < len(ok); j++ {
			if ok[j].Received.After(latest) {
				latest = ok[j].Received
			}
			span := latest.Sub(ok[i].Sent)
			allowed := budget.allowed(span)
			if n := j - i + 1; n > allowed {
				return fmt.Sprintf("%d successes within %v; its budget (%d, refill %d per %v) allows %d",
					n, span.Round(time.Millisecond), budget.Capacity, budget.Refill, budget.Window, allowed), true
			}
			if allowed >= len(ok)-i {
				break // no longer run from i can exceed it
			}
		}
	}
	return "", false
}

// peakPerMinute is the most successes (sorted by Sent) sent within any
// minute.
func peakPerMinute(ok []Call) int {
	peak, i := 0, 0
	for j := range ok {
		for ok[j].Sent.Sub(ok[i].Sent) >= time.Minute {
			i++
		}
		peak = max(peak, j-i+1)
	}
	return peak
}

func familyOf(bucket string) string {
	for i := 0; i < len(bucket); i++ {
		if bucket[i] == '/' {
			return bucket[:i]
		}
	}
	return bucket
}

// RetryReport counts what [CheckRetryAfter] could judge.
type RetryReport struct {
	Refused int `json:"refused"` // 429 answers
	Retried int `json:"retried"` // 429s followed by a retry after Retry-After
	// Probed counts 429s whose Retry-After was shown not to be a second too
	// long: a probe answered before Retry-After-1 seconds had passed since
	// the 429 was sent was refused too.
	Probed int `json:"probed"`
}

// CheckRetryAfter reports every 429 whose Retry-After was wrong:
//
//   - missing, or not a whole number of seconds of at least 1
//     (docs/decisions.md, "Rate limits");
//   - too short: the client's next request that is not a probe (the retry),
//     sent once Retry-After seconds had passed since the 429 arrived, was
//     refused again;
//   - too long: a probe of that 429 succeeded although it was answered
//     before Retry-After-1 seconds had passed since the 429 was sent.
//     Retry-After is rounded up to whole seconds, so the real wait lies
//     within (Retry-After-1, Retry-After]; only a probe decided before that
//     interval proves it too long, and a probe answered later proves
//     nothing either way.
//
// It relies on each client being sequential and alone on its buckets, so
// that nobody else spends the token a retry waits for.
func CheckRetryAfter(calls []Call) ([]Violation, RetryReport) {
	byClient := map[int][]Call{}
	var clients []int
	for _, c := range calls {
		if _, seen := byClient[c.Client]; !seen {
			clients = append(clients, c.Client)
		}
		byClient[c.Client] = append(byClient[c.Client], c)
	}
	sort.Ints(clients)
	var out []Violation
	var rep RetryReport
	for _, id := range clients {
		cs := byClient[id]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Sent.Before(cs[j].Sent) })
		for i, c := range cs {
			if c.Status != 429 {
				continue
			}
			rep.Refused++
			secs, err := strconv.Atoi(c.RetryAfter)
			if err != nil || secs < 1 {
				out = append(out, Violation(fmt.Sprintf("client %d: a 429 at %s carries Retry-After %q, want whole seconds >= 1",
					id, c.Sent.Format(time.StampMilli), c.RetryAfter)))
				continue
			}
			if c.Probe {
				continue // its retry is that of the 429 it probes
			}
			wait := time.Duration(secs) * time.Second
			probed := false
			for _, p := range cs[i+1:] {
				if !p.Probe {
					if !p.Sent.Before(c.Received.Add(wait)) {
						rep.Retried++
						if p.Status == 429 {
							out = append(out, Violation(fmt.Sprintf("client %d: refused again %v after a 429 with Retry-After %d",
								id, p.Sent.Sub(c.Received).Round(time.Millisecond), secs)))
						}
					}
					break
				}
				if !p.Received.Before(c.Sent.Add(wait - time.Second)) {
					continue // decided too late to tell
				}
				probed = true
				if p.ok() {
					out = append(out, Violation(fmt.Sprintf("client %d: a 429 said Retry-After %d, but the same request succeeded %v after it",
						id, secs, p.Received.Sub(c.Sent).Round(time.Millisecond))))
				}
			}
			if probed {
				rep.Probed++
			}
		}
	}
	return out, rep
}
