package soak

import (
	"strings"
	"testing"
)

const metricsText = `# HELP kitd_requests_total Requests.
# TYPE kitd_requests_total counter
kitd_requests_total{route="x"} 12
# HELP kitd_history_cache_bytes Bytes kept.
# TYPE kitd_history_cache_bytes gauge
kitd_history_cache_bytes 8388000
kitd_history_cache_limit_bytes 8388608
kitd_history_cache_windows 731
kitd_history_cache_hits_total 1.2e+06
kitd_history_cache_misses_total 4411
kitd_history_cache_evictions_total 3902
kitd_history_cache_bytes_other 5
`

func TestParseHistoryCache(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       HistoryCache
		ok         bool
	}{
		{"every series is read, others are skipped", metricsText,
			HistoryCache{Bytes: 8388000, Limit: 8388608, Windows: 731, Hits: 1200000, Misses: 4411, Evictions: 3902}, true},
		{"a missing series is an error (a kitd without the cache)",
			strings.ReplaceAll(metricsText, "kitd_history_cache_evictions_total 3902\n", ""), HistoryCache{}, false},
		{"a series twice is an error",
			metricsText + "kitd_history_cache_bytes 1\n", HistoryCache{}, false},
		{"a value that is not a number is an error",
			strings.Replace(metricsText, "8388000", "x", 1), HistoryCache{}, false},
		{"a negative value is an error",
			strings.Replace(metricsText, "8388000", "-1", 1), HistoryCache{}, false},
		{"a series without a value is an error",
			strings.Replace(metricsText, "kitd_history_cache_windows 731", "kitd_history_cache_windows", 1), HistoryCache{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHistoryCache(strings.NewReader(tc.text))
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if tc.ok && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestJudgeCache(t *testing.T) {
	const mib = 1 << 20
	at := func(bytes ...int64) []HistoryCache {
		var cs []HistoryCache
		for _, b := range bytes {
			cs = append(cs, HistoryCache{Bytes: b, Limit: 8 * mib})
		}
		return cs
	}
	for _, tc := range []struct {
		name     string
		cs       []HistoryCache
		over     int
		maxBytes int64
	}{
		{"bytes under the bound hold", at(1*mib, 7*mib, 8*mib), 0, 8 * mib},
		{"bytes within the slack above the bound hold", at(8*mib+mib/2, 8*mib), 0, 8*mib + mib/2},
		{"bytes beyond the bound and the slack fail", at(8*mib, 10*mib, 12*mib), 2, 12 * mib},
		{"no samples judge nothing", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeCache(tc.cs, mib)
			if v.Over != tc.over || v.MaxBytes != tc.maxBytes || v.Why == "" {
				t.Fatalf("verdict %+v, want %d over, max %d", v, tc.over, tc.maxBytes)
			}
		})
	}
}
