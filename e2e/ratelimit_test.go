package e2e

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	policyRE = regexp.MustCompile(`"([a-z_]+)";q=(\d+);w=(\d+)`)
	limitRE  = regexp.MustCompile(`"([a-z_]+)";r=(\d+);t=(\d+)`)
)

// checkRateHeaders checks the IETF RateLimit-Policy and RateLimit headers of
// docs/decisions.md on an answer subject to a bucket.
func checkRateHeaders(t testing.TB, r *Resp) {
	t.Helper()
	if p := r.Header.Get("RateLimit-Policy"); !policyRE.MatchString(p) {
		t.Errorf(`RateLimit-Policy = %q, want like "write";q=50;w=60%s`, p, r)
	}
	if l := r.Header.Get("RateLimit"); !limitRE.MatchString(l) {
		t.Errorf(`RateLimit = %q, want like "write";r=49;t=2%s`, l, r)
	}
}

// checkRetryAfter checks a 429: rate_limited with Retry-After in whole
// seconds, at least 1.
func checkRetryAfter(t testing.TB, r *Resp, max int) {
	t.Helper()
	wantError(t, r, 429, "rate_limited")
	ra := r.Header.Get("Retry-After")
	n, err := strconv.Atoi(ra)
	if err != nil || n < 1 || n > max {
		t.Errorf("Retry-After = %q, want whole seconds in [1, %d]%s", ra, max, r)
	}
}

// burst sends calls until the first 429 (or max calls) and returns the 2xx
// count, the 429 (nil if none) and the time taken.
func burst(t testing.TB, max int, call func(i int) *Resp) (ok int, limited *Resp, first *Resp, elapsed time.Duration) {
	t.Helper()
	start := time.Now()
	for i := 0; i < max; i++ {
		r := call(i)
		if r.Status == 429 {
			return ok, r, first, time.Since(start)
		}
		if r.Status < 200 || r.Status > 299 {
			t.Fatalf("call %d: want 2xx or 429%s", i, r)
		}
		if first == nil {
			first = r
		}
		checkRateHeaders(t, r)
		ok++
	}
	return ok, nil, first, time.Since(start)
}

// allowed is how many calls a bucket of capacity c refilling rate per second
// may let through in elapsed real time (the test clock also flows).
func allowed(capacity int, perSecond float64, elapsed time.Duration) int {
	return capacity + int(math.Ceil(elapsed.Seconds()*perSecond))
}

// docs/api.md "Limits" with --limits spec. Not parallel: the buckets refill in
// real time too, so these run alone and tolerate the time they take. Each
// burst may send several times a bucket's capacity: on a busy machine the
// calls are slow enough for the refill to keep up with a capacity and a
// bit (64 writes once took 19 s), and the check is that the 429 comes
// within what capacity and refill allow, however long that took.
func TestRateLimits(t *testing.T) {
	s := startServerOpts(t, ServerOpts{Limits: "spec"})

	t.Run("POST /messages: burst of 5 per conversation, then 429 until a second passes", func(t *testing.T) {
		env := newBotEnv(t, s)
		post := func(i int) *Resp {
			return env.In.api(t, "POST", "/messages", postBody(env.Chan.ID, fmt.Sprintf("burst %d", i)))
		}
		ok, limited, _, elapsed := burst(t, 60, post)
		if limited == nil {
			t.Fatalf("60 posts into one conversation in %v: no 429", elapsed)
		}
		if ok < 5 || ok > allowed(5, 1, elapsed) {
			t.Errorf("%d posts succeeded in %v before the 429, want 5 (burst) plus at most 1 per second", ok, elapsed)
		}
		checkRetryAfter(t, limited, 1)

		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 1}), 200)
		r := post(100)
		want(t, r, 201)
		checkRateHeaders(t, r)

		t.Run("another conversation has its own bucket", func(t *testing.T) {
			c2 := env.W.channel(t, "public", env.W.Owner.ID)
			env.In.addChannel(t, c2.ID)
			r := env.In.api(t, "POST", "/messages", postBody(c2.ID, "elsewhere"))
			want(t, r, 201)
		})
	})

	t.Run("writes: 50 per minute per installation", func(t *testing.T) {
		env := newBotEnv(t, s)
		var chans []string
		for i := 0; i < 50; i++ {
			c := env.W.channel(t, "public", env.W.Owner.ID)
			env.In.addChannel(t, c.ID)
			chans = append(chans, c.ID)
		}
		// Four posts per conversation, so the per-conversation bucket (5) never
		// answers; only the installation's write bucket can.
		ok, limited, first, elapsed := burst(t, 200, func(i int) *Resp {
			return env.In.api(t, "POST", "/messages", postBody(chans[i/4], fmt.Sprintf("w %d", i)))
		})
		if limited == nil {
			t.Fatalf("200 writes in %v: no 429", elapsed)
		}
		if ok < 50 || ok > allowed(50, 50.0/60, elapsed) {
			t.Errorf("%d writes succeeded in %v, want 50 plus at most 50/60 per second", ok, elapsed)
		}
		checkRetryAfter(t, limited, 60)
		if p := first.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"write";q=50;w=60`) {
			t.Errorf(`RateLimit-Policy of a write = %q, want it to contain "write";q=50;w=60%s`, p, first)
		}
	})

	t.Run("reads: 100 per minute per installation", func(t *testing.T) {
		env := newBotEnv(t, s)
		paths := []string{"/installation", "/auth/test", "/conversations", "/users/me", "/conversations/" + env.Chan.ID}
		ok, limited, first, elapsed := burst(t, 400, func(i int) *Resp {
			return env.In.api(t, "GET", paths[i%len(paths)], nil)
		})
		if limited == nil {
			t.Fatalf("400 reads in %v: no 429", elapsed)
		}
		if ok < 100 || ok > allowed(100, 100.0/60, elapsed) {
			t.Errorf("%d reads succeeded in %v, want 100 plus at most 100/60 per second", ok, elapsed)
		}
		checkRetryAfter(t, limited, 60)
		if p := first.Header.Get("RateLimit-Policy"); p != `"read";q=100;w=60` {
			t.Errorf(`RateLimit-Policy of a read = %q, want "read";q=100;w=60%s`, p, first)
		}
		if l := first.Header.Get("RateLimit"); !strings.HasPrefix(l, `"read";r=99;t=`) {
			t.Errorf(`RateLimit of the first read = %q, want "read";r=99;t=...%s`, l, first)
		}

		t.Run("another installation has its own bucket", func(t *testing.T) {
			other := env.W.install(t, env.W.kit(t, baseScopes...), env.Chan.ID)
			want(t, other.api(t, "GET", "/installation", nil), 200)
		})

		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 1}), 200)
		r := env.In.api(t, "GET", "/installation", nil)
		want(t, r, 200)
	})
}
