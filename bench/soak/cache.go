package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// HistoryCache is what kitd's GET /metrics says of the history it keeps in
// memory (internal/history, --cache-bytes).
type HistoryCache struct {
	Bytes, Limit, Windows   int64
	Hits, Misses, Evictions int64
}

// cacheSeries maps each series of /metrics the soak reads to its field.
var cacheSeries = map[string]func(*HistoryCache) *int64{
	"kitd_history_cache_bytes":           func(c *HistoryCache) *int64 { return &c.Bytes },
	"kitd_history_cache_limit_bytes":     func(c *HistoryCache) *int64 { return &c.Limit },
	"kitd_history_cache_windows":         func(c *HistoryCache) *int64 { return &c.Windows },
	"kitd_history_cache_hits_total":      func(c *HistoryCache) *int64 { return &c.Hits },
	"kitd_history_cache_misses_total":    func(c *HistoryCache) *int64 { return &c.Misses },
	"kitd_history_cache_evictions_total": func(c *HistoryCache) *int64 { return &c.Evictions },
}

// ReadHistoryCache asks kitd's GET /metrics (with the operator token) for
// its history cache's series.
func ReadHistoryCache(ctx context.Context, c *http.Client, addr, token string) (HistoryCache, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return HistoryCache{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return HistoryCache{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return HistoryCache{}, fmt.Errorf("GET /metrics answered %s", resp.Status)
	}
	return parseHistoryCache(resp.Body)
}

// parseHistoryCache reads the history cache's series from a text in the
// Prometheus exposition format; every one of them must be there, once.
func parseHistoryCache(r io.Reader) (HistoryCache, error) {
	var c HistoryCache
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		field, ok := cacheSeries[fields[0]]
		if !ok {
			continue
		}
		if len(fields) < 2 {
			return c, fmt.Errorf("/metrics: %s has no value", fields[0])
		}
		if seen[fields[0]] {
			return c, fmt.Errorf("/metrics: %s twice", fields[0])
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil || v < 0 || v > 1<<62 {
			return c, fmt.Errorf("/metrics: %s = %q is not a count", fields[0], fields[1])
		}
		*field(&c), seen[fields[0]] = int64(v), true
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	for name := range cacheSeries {
		if !seen[name] {
			return c, fmt.Errorf("/metrics has no %s (a kitd without the history cache?)", name)
		}
	}
	return c, nil
}

// CacheVerdict is the judgement of the history cache's bytes against
// their bound over a soak.
type CacheVerdict struct {
	Samples  int   `json:"samples"`
	MaxBytes int64 `json:"maxBytes"`
	Limit    int64 `json:"limitBytes"`
	// Over is the number of samples whose bytes exceed the limit by more
	// than the slack.
	Over int    `json:"over"`
	Why  string `json:"why"`
}

// JudgeCache checks that no sample keeps more than its limit plus slack.
// The slack is what may be counted between a window's growth and the
// eviction that follows it (kitd counts first, then evicts), so a sample
// can land in between; a bound that does not hold is beyond it.
func JudgeCache(cs []HistoryCache, slack int64) CacheVerdict {
	v := CacheVerdict{Samples: len(cs)}
	if len(cs) == 0 {
		v.Why = "no samples of /metrics"
		return v
	}
	for _, c := range cs {
		v.MaxBytes, v.Limit = max(v.MaxBytes, c.Bytes), max(v.Limit, c.Limit)
		if c.Bytes > c.Limit+slack {
			v.Over++
		}
	}
	if v.Over > 0 {
		v.Why = fmt.Sprintf("%d of %d samples kept more than the bound (%d B) plus %d B; at most %d B", v.Over, len(cs), v.Limit, slack, v.MaxBytes)
	} else {
		v.Why = fmt.Sprintf("within the bound: at most %d B of %d B in %d samples", v.MaxBytes, v.Limit, len(cs))
	}
	return v
}
