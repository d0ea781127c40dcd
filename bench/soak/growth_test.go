package soak

import (
	"math"
	"math/rand/v2"
	"testing"
)

// series samples f every 5 s over 10 minutes, with noise of the given
// amplitude.
func series(f func(t float64) float64, noise float64) []Point {
	rng := rand.New(rand.NewPCG(1, 2))
	var ps []Point
	for t := 0.0; t <= 600; t += 5 {
		ps = append(ps, Point{t, f(t) + noise*(2*rng.Float64()-1)})
	}
	return ps
}

func TestSlope(t *testing.T) {
	for _, tc := range []struct {
		name string
		ps   []Point
		want float64
	}{
		{"a line's slope", []Point{{0, 1}, {1, 3}, {2, 5}, {3, 7}}, 2},
		{"a flat series", []Point{{0, 4}, {1, 4}, {2, 4}}, 0},
		{"one point", []Point{{0, 4}}, 0},
		{"points at one time", []Point{{1, 4}, {1, 5}}, 0},
		{"least squares through noise", []Point{{0, 0}, {1, 2}, {2, 2}, {3, 4}}, 1.2},
	} {
		if got := Slope(tc.ps); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: slope %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRuleJudge(t *testing.T) {
	const mib = 1 << 20
	rss := Rule{Rel: 0.10, Abs: 32 * mib, MinPoints: 6}
	for _, tc := range []struct {
		name  string
		rule  Rule
		ps    []Point
		grows bool
	}{
		{"a flat series is bounded",
			rss, series(func(float64) float64 { return 200 * mib }, 0), false},
		{"a series that warms up, then levels off, is bounded",
			rss, series(func(t float64) float64 { return 100*mib + 200*mib*(1-math.Exp(-t/60)) }, 2*mib), false},
		{"noise around a flat level is bounded",
			rss, series(func(float64) float64 { return 200 * mib }, 30*mib), false},
		{"a sawtooth (memtable fills, then flushes) is bounded",
			rss, series(func(t float64) float64 { return 200*mib + 40*mib*math.Mod(t, 40)/40 }, 0), false},
		{"a steady leak is unbounded",
			rss, series(func(t float64) float64 { return 200*mib + 0.5*mib*t }, 5*mib), true},
		{"a leak that starts halfway is unbounded",
			rss, series(func(t float64) float64 { return 200*mib + math.Max(0, t-300)*0.5*mib }, 0), true},
		{"a rise above Rel but under Abs is bounded (small series)",
			Rule{Rel: 0.10, Abs: 16, MinPoints: 6}, series(func(t float64) float64 { return 20 + t/60 }, 0), false},
		{"a rise above Abs but under Rel is bounded (large series)",
			Rule{Rel: 0.10, Abs: 16, MinPoints: 6}, series(func(t float64) float64 { return 10000 + t/10 }, 0), false},
		{"goroutines that climb by one every 5 s are unbounded",
			Rule{Rel: 0.10, Abs: 20, MinPoints: 6}, series(func(t float64) float64 { return 40 + t/5 }, 0), true},
		{"a decreasing series is bounded",
			rss, series(func(t float64) float64 { return 500*mib - 0.5*mib*t }, 0), false},
		{"too few samples never fail",
			rss, []Point{{0, 1}, {5, 1e12}, {10, 1e15}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.rule.Judge(tc.ps)
			if v.Grows != tc.grows {
				t.Fatalf("grows %v, want %v (%s)", v.Grows, tc.grows, v.Why)
			}
		})
	}
}
