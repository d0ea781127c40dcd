package e2e

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// docs/api.md "Incoming webhooks": an unknown webhook, a wrong secret and an unknown
// installation are one 404, and that includes how long it takes: a made-up
// webhook id must not answer measurably slower than a real one (docs/webhooks.md;
// before the stand-in webhook it took about 100 µs more, with no overlap between the p10-p90
// ranges). The three kinds are sent round-robin on one connection, so
// that whatever else loads the machine hits them alike, and their medians
// are compared with a tolerance a busy machine keeps: the larger of 40%
// and 60 µs.
func TestWebhooks_NotFoundTakesTheSameTime(t *testing.T) {
	s := startServerOpts(t, ServerOpts{Limits: "off"})
	_, c, in := webhookEnv(t, s, 5)
	live := in.hook(t, c.ID)
	seg := strings.Split(live.Path, "/") // "", hooks, v1, inst, hook, secret
	kinds := []struct {
		name string
		path func() string
	}{
		{"made-up webhook id", func() string { return "/hooks/v1/" + in.ID + "/" + newUUID() + "/" + seg[5] }},
		{"wrong secret", func() string { return "/hooks/v1/" + in.ID + "/" + live.ID + "/" + randToken() }},
		{"unknown installation", func() string { return "/hooks/v1/" + newUUID() + "/" + live.ID + "/" + seg[5] }},
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	body := []byte(`{"text":"hello"}`)
	post := func(path string) time.Duration {
		t.Helper()
		start := time.Now()
		res, err := hc.Post(s.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		took := time.Since(start)
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("POST %s: %d, want 404", path, res.StatusCode)
		}
		return took
	}
	const warmup, tries = 50, 400
	took := make([][]time.Duration, len(kinds))
	for i := range warmup + tries {
		for k, kind := range kinds {
			d := post(kind.path())
			if i >= warmup {
				took[k] = append(took[k], d)
			}
		}
	}
	medians := make([]time.Duration, len(kinds))
	for k, kind := range kinds {
		slices.Sort(took[k])
		medians[k] = took[k][len(took[k])/2]
		t.Logf("%s: p10 %v, median %v, p90 %v", kind.name, took[k][len(took[k])/10], medians[k], took[k][len(took[k])*9/10])
	}
	lo, hi := slices.Min(medians), slices.Max(medians)
	if tolerance := max(lo*4/10, 60*time.Microsecond); hi-lo > tolerance {
		t.Fatalf("the medians of the three 404s differ by %v, more than %v: %v", hi-lo, tolerance, medians)
	}
}
