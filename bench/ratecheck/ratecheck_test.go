package ratecheck

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// at is a call sent at ms milliseconds and answered 2 ms later.
func at(ms int, status int, buckets ...string) Call {
	sent := t0.Add(time.Duration(ms) * time.Millisecond)
	return Call{Buckets: buckets, Sent: sent, Received: sent.Add(2 * time.Millisecond), Status: status}
}

// evenly returns n successes spending bucket, one every step from start.
func evenly(n int, start, step time.Duration, bucket string) []Call {
	out := make([]Call, n)
	for i := range out {
		out[i] = at(int((start+time.Duration(i)*step)/time.Millisecond), 201, bucket)
	}
	return out
}

func TestCheckBudgets(t *testing.T) {
	budgets := map[string]Budget{"write": Write, "post_message": PostMessage, "read": Read}
	cat := func(parts ...[]Call) []Call {
		var out []Call
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls []Call
		want  string // a substring of the first violation; "" = none
	}{
		{"a full write bucket grants its burst of 50 at once",
			evenly(50, 0, time.Millisecond, "write/i1"), ""},
		{"a 51st write within the burst's second overspends",
			evenly(51, 0, time.Millisecond, "write/i1"), "bucket write/i1 granted 51 successes"},
		{"the burst, then one write every 1.2 s (50 a minute) for two minutes, is within budget",
			cat(evenly(50, 0, time.Millisecond, "write/i1"), evenly(100, 1250*time.Millisecond, 1200*time.Millisecond, "write/i1")), ""},
		{"the burst, then one write a second (60 a minute), overspends",
			cat(evenly(50, 0, time.Millisecond, "write/i1"), evenly(100, time.Second, time.Second, "write/i1")), "bucket write/i1 granted"},
		{"each installation has its own write bucket",
			cat(evenly(50, 0, time.Millisecond, "write/i1"), evenly(50, 0, time.Millisecond, "write/i2")), ""},
		{"refused and failed requests spend nothing",
			cat(evenly(50, 0, time.Millisecond, "write/i1"), []Call{at(60, 429, "write/i1"), at(61, 500, "write/i1")}), ""},
		{"a conversation takes 5 posts at once, then 1 a second",
			cat(evenly(5, 0, time.Millisecond, "post_message/c1"), evenly(10, 1010*time.Millisecond, time.Second, "post_message/c1")), ""},
		{"a 6th post into a conversation within its burst overspends",
			evenly(6, 0, 10*time.Millisecond, "post_message/c1"), "bucket post_message/c1 granted 6 successes"},
		{"a post spends its installation's write bucket and its conversation's",
			func() []Call {
				cs := evenly(6, 0, 10*time.Millisecond, "write/i1")
				for i := range cs {
					cs[i].Buckets = append(cs[i].Buckets, "post_message/c1")
				}
				return cs
			}(), "bucket post_message/c1"},
		{"reads have their own budget of 100",
			cat(evenly(100, 0, time.Millisecond, "read/i1"), evenly(50, 0, time.Millisecond, "write/i1")), ""},
		{"a 101st read at once overspends",
			evenly(101, 0, time.Millisecond, "read/i1"), "bucket read/i1 granted 101"},
		{"a slow answer widens the span the server may have decided in",
			// The 51st was sent at once but answered 2 s later: its server may
			// have decided it after a token came back (one per 1.2 s).
			cat(evenly(50, 0, time.Millisecond, "write/i1"), []Call{{Buckets: []string{"write/i1"}, Sent: t0, Received: t0.Add(2 * time.Second), Status: 201}}), ""},
		{"buckets of a family without a budget are not judged",
			evenly(500, 0, time.Millisecond, "files/i1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := CheckBudgets(tc.calls, budgets)
			switch {
			case tc.want == "" && len(v) > 0:
				t.Fatalf("violations %q, want none", v)
			case tc.want != "" && (len(v) == 0 || !strings.Contains(string(v[0]), tc.want)):
				t.Fatalf("violations %q, want one saying %q", v, tc.want)
			}
		})
	}
}

func TestBudgetUsagePerMinute(t *testing.T) {
	calls := append(evenly(50, 0, time.Millisecond, "write/i1"), evenly(49, 1250*time.Millisecond, 1200*time.Millisecond, "write/i1")...)
	calls = append(calls, evenly(10, 0, time.Second, "write/i2")...)
	_, usage := CheckBudgets(calls, map[string]Budget{"write": Write})
	// i1: the burst and the 49 that follow within its first minute.
	want := Usage{Family: "write", Bucket: "write/i1", PeakMin: 50 + 49, AllowMin: 100, Successes: 99}
	if len(usage) != 1 || usage[0] != want {
		t.Fatalf("usage %+v, want %+v", usage, want)
	}
}

func TestCheckRetryAfter(t *testing.T) {
	const w = "write/i1"
	refused := func(ms int, retryAfter string) Call {
		c := at(ms, 429, w)
		c.RetryAfter = retryAfter
		return c
	}
	probe := func(c Call) Call { c.Probe = true; return c }
	for _, tc := range []struct {
		name  string
		calls []Call
		want  string // a substring of the first violation; "" = none
		rep   RetryReport
	}{
		{"a retry after Retry-After that succeeds is right",
			[]Call{refused(0, "2"), at(2010, 201, w)}, "", RetryReport{Refused: 1, Retried: 1}},
		{"a retry after Retry-After that is refused again: too short",
			[]Call{refused(0, "2"), at(2010, 429, w)}, "refused again", RetryReport{Refused: 2, Retried: 1}},
		{"a 429 without Retry-After",
			[]Call{refused(0, ""), at(2010, 201, w)}, `Retry-After ""`, RetryReport{Refused: 1}},
		{"a Retry-After of 0",
			[]Call{refused(0, "0"), at(10, 201, w)}, `Retry-After "0"`, RetryReport{Refused: 1}},
		{"a Retry-After that is a date, not seconds",
			[]Call{refused(0, "Mon, 23 Nov 2026 12:00:02 GMT"), at(2010, 201, w)}, "want whole seconds", RetryReport{Refused: 1}},
		{"a probe refused before Retry-After-1 s shows it is not too long",
			[]Call{refused(0, "3"), probe(refused(1800, "2")), at(3010, 201, w)}, "", RetryReport{Refused: 2, Retried: 1, Probed: 1}},
		{"a probe that succeeds before Retry-After-1 s: too long",
			[]Call{refused(0, "3"), probe(at(1800, 201, w))}, "succeeded", RetryReport{Refused: 1, Probed: 1}},
		{"a probe answered after Retry-After-1 s proves nothing",
			[]Call{refused(0, "2"), probe(at(999, 201, w))}, "", RetryReport{Refused: 1}},
		{"a request sent before Retry-After elapsed is not a retry",
			[]Call{refused(0, "2"), refused(1500, "1")}, "", RetryReport{Refused: 2}},
		{"each client is judged on its own calls",
			[]Call{refused(0, "2"), func() Call { c := at(2010, 429, w); c.Client = 1; c.RetryAfter = "1"; return c }(), at(2020, 201, w)},
			"", RetryReport{Refused: 2, Retried: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, rep := CheckRetryAfter(tc.calls)
			switch {
			case tc.want == "" && len(v) > 0:
				t.Fatalf("violations %q, want none", v)
			case tc.want != "" && (len(v) == 0 || !strings.Contains(string(v[0]), tc.want)):
				t.Fatalf("violations %q, want one saying %q", v, tc.want)
			}
			if rep != tc.rep {
				t.Errorf("report %+v, want %+v", rep, tc.rep)
			}
		})
	}
}
