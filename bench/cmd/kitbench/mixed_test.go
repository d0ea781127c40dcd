package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestMixedScenarioJudgesLimits runs the mixed scenario against the fake
// kitd with limits on: one that keeps the budgets of docs/api.md and tells the
// right Retry-After passes; one whose Retry-After is a second short, and
// one that grants 10 writes beyond the budget, fail with the rule they
// broke.
func TestMixedScenarioJudgesLimits(t *testing.T) {
	t.Setenv("KITBENCH_FAKE_KITD", "1")
	for _, tc := range []struct {
		name string
		fake string
		// duration leaves a busy machine time for the burst, a 429, its
		// Retry-After and the retry (2 s for the write bucket): 3 s was
		// too short at a low priority on a loaded machine.
		duration time.Duration
		want     string // in the first violation; "" = the checks pass
	}{
		{"a server that keeps the budgets and tells the right Retry-After passes", "", 4 * time.Second, ""},
		{"a Retry-After a second too short is caught", "short-retry-after", 6 * time.Second, "refused again"},
		{"more writes than the budget is caught", "generous", 6 * time.Second, "bucket write/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.duration *= raceSlowdown
			args := ""
			if tc.fake != "" {
				args = "--fake-limits " + tc.fake
			}
			rep, data, code, err := runReport(t, options{
				kitd: os.Args[0], concurrency: 2, duration: tc.duration, timeout: 5 * time.Second,
				conversations: 2, seed: 1, limit: 50, only: "mixed", trivial: trivialInProcess,
				mixed: 3, mixedChannels: 10, kitdArgs: args,
			})
			if len(rep.Scenarios) != 1 || rep.Scenarios[0].Limits == nil {
				t.Fatalf("report %s", data)
			}
			lr := rep.Scenarios[0].Limits
			if tc.want == "" {
				if code != 0 || err != nil || !lr.ChecksPassed || rep.LimitViolations != 0 {
					t.Fatalf("code %d, %v, violations %q", code, err, lr.Violations)
				}
				// The budget was spent, and a 429 was waited out and retried.
				if lr.RetryAfter.Refused == 0 || lr.RetryAfter.Retried == 0 || rep.Scenarios[0].Kitd.Status["429"] == 0 {
					t.Fatalf("nothing refused and retried: %+v", lr)
				}
				if rep.Scenarios[0].Kitd.Errors != 0 {
					t.Fatalf("429s counted as errors: %+v", rep.Scenarios[0].Kitd)
				}
				return
			}
			if code != 1 || err == nil || !strings.Contains(err.Error(), "violations of the rate limits") {
				t.Fatalf("code %d, %v; want a failure naming the limit violations", code, err)
			}
			if lr.ChecksPassed || len(lr.Violations) == 0 || !strings.Contains(string(lr.Violations[0]), tc.want) {
				t.Fatalf("violations %q, want one saying %q", lr.Violations, tc.want)
			}
		})
	}
}
