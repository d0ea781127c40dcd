package e2e

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// Pages of history from the conversations' memory (--cache-bytes,
// docs/architecture.md "Pages of history from memory"): the same bodies,
// byte for byte, as a node that keeps nothing in memory reads from the
// same data directory; a change shows in the next page at once; /metrics
// counts the pages answered from memory.
func TestMessages_HistoryFromMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off"}
	s := startServerOpts(t, opts)
	env := newBotEnv(t, s)
	conv := env.Chan.ID
	var ids []string
	for i := range 30 {
		ids = append(ids, jstr(env.In.post(t, conv, fmt.Sprintf("message %02d <&>", i)), "id"))
	}
	reply := env.In.api(t, "POST", "/messages", map[string]any{"conversationId": conv, "text": "a reply", "threadParentId": ids[3]})
	want(t, reply, 201)

	t.Run("an edit and a delete show in the next page", func(t *testing.T) {
		env.In.pages(t, conv, 10) // the newest pages are now kept
		want(t, env.In.api(t, "PATCH", "/messages/"+ids[29], map[string]any{"text": "edited", "blocks": dividers(1)}), 200)
		want(t, env.In.api(t, "DELETE", "/messages/"+ids[28], nil), 200)
		r := env.In.api(t, "GET", "/conversations/"+conv+"/messages?limit=3", nil)
		want(t, r, 200)
		ms := toMaps(jarr(r.JSON, "messages"))
		if jstr(ms[0], "id") != reply.Str("message.id") || jstr(ms[1], "text") != "edited" || ms[2]["text"] != nil || ms[2]["deletedAt"] == nil {
			t.Errorf("newest page after an edit and a delete%s", r)
		}
	})

	before := scrapeMetrics(t, s)
	kept := env.In.pages(t, conv, 7)
	again := env.In.pages(t, conv, 7)
	after := scrapeMetrics(t, s)
	t.Run("pages read again are the same bodies, answered from memory", func(t *testing.T) {
		if !equalBodies(kept, again) {
			t.Error("the second walk's pages differ from the first's")
		}
		hits := metricstest.Value(after, "kitd_history_cache_hits_total") - metricstest.Value(before, "kitd_history_cache_hits_total")
		if hits < float64(len(again)) {
			t.Errorf("%v pages answered from memory, want at least the second walk's %d", hits, len(again))
		}
		if metricstest.Value(after, "kitd_history_cache_bytes") <= 0 || metricstest.Value(after, "kitd_history_cache_limit_bytes") != 256<<20 {
			t.Errorf("kept %v bytes of a bound of %v, want some of 256 MiB", metricstest.Value(after, "kitd_history_cache_bytes"), metricstest.Value(after, "kitd_history_cache_limit_bytes"))
		}
	})

	t.Run("a node that keeps nothing in memory reads the same pages", func(t *testing.T) {
		s.stopClean(t)
		opts.Args = []string{"--cache-bytes", "0"}
		cold := startServerOpts(t, opts)
		env.W.S = cold
		if got := env.In.pages(t, conv, 7); !equalBodies(kept, got) {
			t.Error("the pages read from the store differ from the pages read from memory")
		}
		m := scrapeMetrics(t, cold)
		if metricstest.Value(m, "kitd_history_cache_hits_total") != 0 || metricstest.Value(m, "kitd_history_cache_bytes") != 0 {
			t.Errorf("--cache-bytes 0 kept %v bytes and answered %v pages from memory", metricstest.Value(m, "kitd_history_cache_bytes"), metricstest.Value(m, "kitd_history_cache_hits_total"))
		}
	})
}

// pages walks a conversation's history by cursor at limit and returns
// every page's body as sent.
func (in *Install) pages(t testing.TB, conv string, limit int) [][]byte {
	t.Helper()
	var bodies [][]byte
	cursor := ""
	for {
		path := fmt.Sprintf("/conversations/%s/messages?limit=%d", conv, limit)
		if cursor != "" {
			path += "&cursor=" + queryEscape(cursor)
		}
		r := in.api(t, "GET", path, nil)
		want(t, r, 200)
		bodies = append(bodies, r.Body)
		if r.Get("nextCursor") == nil {
			return bodies
		}
		cursor = r.Str("nextCursor")
	}
}

func equalBodies(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// --cache-bytes bounds what the whole node keeps: reading many
// conversations keeps no more than the bound (the least recently read
// are emptied), and their pages stay what they were.
func TestMessages_HistoryMemoryIsBounded(t *testing.T) {
	t.Parallel()
	const bound = 16 << 10
	s := startServerOpts(t, ServerOpts{Limits: "off", Args: []string{"--cache-bytes", "16KiB"}})
	env := newBotEnv(t, s)
	convs := []string{env.Chan.ID}
	for range 11 {
		c := env.W.channel(t, "public", env.W.members()...)
		env.In.addChannel(t, c.ID)
		convs = append(convs, c.ID)
	}
	for _, c := range convs {
		for i := range 12 {
			env.In.post(t, c, fmt.Sprintf("message %d of %s", i, c))
		}
	}
	first := map[string][][]byte{}
	for _, c := range convs {
		first[c] = env.In.pages(t, c, 5)
		if got := env.In.pages(t, c, 5); !equalBodies(first[c], got) { // from memory
			t.Errorf("conversation %s: its pages changed when read again", c)
		}
	}
	for _, c := range convs { // most were emptied since: from the store
		if got := env.In.pages(t, c, 5); !equalBodies(first[c], got) {
			t.Errorf("conversation %s: its pages changed when read once more", c)
		}
	}
	m := scrapeMetrics(t, s)
	if kept := metricstest.Value(m, "kitd_history_cache_bytes"); kept > bound || kept == 0 {
		t.Errorf("%v bytes kept, want some and at most %d", kept, bound)
	}
	if metricstest.Value(m, "kitd_history_cache_evictions_total") == 0 || metricstest.Value(m, "kitd_history_cache_hits_total") == 0 {
		t.Errorf("12 conversations of about 4 KiB each in 16 KiB: %v evictions, %v hits, want some of each",
			metricstest.Value(m, "kitd_history_cache_evictions_total"), metricstest.Value(m, "kitd_history_cache_hits_total"))
	}
}
