package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kitd/kitd/internal/limits"
)

// fakeKitd is an in-memory stand-in for the parts of kitd the bench uses:
// the operator API, kit upload, posting and listing messages. It checks
// credentials and ownership the way the contract describes, so the set-up
// is exercised against the same failure modes.
type fakeKitd struct {
	opToken string

	mu        sync.Mutex
	seq       int
	calls     []string // "METHOD /path" in order
	devTokens map[string]string
	bots      map[string]string   // bot token -> installation
	channels  map[string][]string // installation -> channel ids
	convs     map[string]bool
	msgs      map[string][]map[string]any
	kits      map[string]bool
	manifest  map[string]any
	failPath  string    // answer 500 on the first call to this path prefix
	failGets  bool      // answer 500 to history reads after the set-up
	store     io.Writer // every message posted, as the data directory's growth
	gets      int

	// With --limits spec: each installation's read and write buckets, at
	// the rates of docs/api.md "Limits" unless a test bends them.
	limited bool
	read    limits.Rate
	write   limits.Rate
	buckets map[string]*limits.Bucket // "read/<installation>", "write/<installation>"
	// shortRetry makes every Retry-After a second shorter than the wait
	// (at least 1): a server bug the mixed scenario must catch.
	shortRetry bool
}

// take spends a token of the installation's bucket of family, or answers
// 429 with Retry-After and reports false.
func (f *fakeKitd) take(w http.ResponseWriter, family, inst string) bool {
	if !f.limited {
		return true
	}
	r := f.read
	if family == "write" {
		r = f.write
	}
	b := f.buckets[family+"/"+inst]
	if b == nil {
		nb := limits.NewBucket(r, time.Now())
		b = &nb
		f.buckets[family+"/"+inst] = b
	}
	d := b.Take(r, time.Now())
	if d.OK {
		return true
	}
	ra := d.RetryAfter
	if f.shortRetry {
		ra = max(1, ra-1)
	}
	w.Header().Set("Retry-After", strconv.Itoa(ra))
	fail(w, 429, "rate_limited")
	return false
}

func newFakeKitd(opToken string) *fakeKitd {
	return &fakeKitd{
		opToken:   opToken,
		devTokens: map[string]string{},
		bots:      map[string]string{},
		channels:  map[string][]string{},
		convs:     map[string]bool{},
		msgs:      map[string][]map[string]any{},
		kits:      map[string]bool{},
		buckets:   map[string]*limits.Bucket{},
		read:      limits.Spec()[limits.Read],
		write:     limits.Spec()[limits.Write],
	}
}

func (f *fakeKitd) id() string {
	f.seq++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", f.seq)
}

func writeJSONResp(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code string) {
	writeJSONResp(w, status, map[string]string{"code": code, "message": code, "correlationId": "c"})
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (f *fakeKitd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	if f.failPath != "" && strings.HasPrefix(r.URL.Path, f.failPath) {
		f.failPath = ""
		fail(w, 500, "internal_error")
		return
	}
	var body map[string]any
	if (r.Method == "POST" || r.Method == "PATCH") && r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			fail(w, 400, "validation_error")
			return
		}
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	tok := bearer(r)

	if strings.HasPrefix(r.URL.Path, "/ops/v1/") {
		if tok != f.opToken {
			fail(w, 401, "invalid_token")
			return
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/ops/v1/workspaces":
			writeJSONResp(w, 201, map[string]any{"workspace": map[string]any{"id": f.id(), "name": str("name"), "sandbox": false}})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "workspaces" && seg[4] == "users":
			if str("role") != "owner" || str("displayName") == "" {
				fail(w, 400, "validation_error")
				return
			}
			writeJSONResp(w, 201, map[string]any{"user": map[string]any{"id": f.id(), "displayName": str("displayName")}})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "users" && seg[4] == "developer-tokens":
			t := "kdev_" + f.id()
			f.devTokens[t] = seg[3]
			writeJSONResp(w, 201, map[string]any{"token": t, "id": f.id(), "expiresAt": time.Now().Add(time.Hour)})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "workspaces" && seg[4] == "installations":
			if !f.kits[str("kitId")] {
				fail(w, 404, "not_found")
				return
			}
			writeJSONResp(w, 201, map[string]any{"installation": map[string]any{"id": f.id()}})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "workspaces" && seg[4] == "conversations":
			if str("kind") != "channel" || str("visibility") != "public" {
				fail(w, 400, "validation_error")
				return
			}
			id := f.id()
			f.convs[id] = true
			writeJSONResp(w, 201, map[string]any{"conversation": map[string]any{"id": id, "kind": "channel"}})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "installations" && seg[4] == "channels":
			if !f.convs[str("conversationId")] {
				fail(w, 404, "not_found")
				return
			}
			f.channels[seg[3]] = append(f.channels[seg[3]], str("conversationId"))
			writeJSONResp(w, 200, map[string]any{"installation": map[string]any{"id": seg[3]}})
		case r.Method == "POST" && len(seg) == 5 && seg[2] == "installations" && seg[4] == "bot-tokens":
			t := "kbot_" + f.id()
			f.bots[t] = seg[3]
			writeJSONResp(w, 201, map[string]any{"token": t})
		default:
			fail(w, 404, "not_found")
		}
		return
	}

	switch {
	case r.Method == "POST" && r.URL.Path == "/api/v1/dev/kits/versions":
		if f.devTokens[tok] == "" {
			fail(w, 401, "invalid_token")
			return
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(str("manifest")), &m); err != nil || body["publish"] != true {
			fail(w, 400, "validation_error")
			return
		}
		f.manifest = m
		id := f.id()
		f.kits[id] = true
		writeJSONResp(w, 201, map[string]any{"kitId": id, "created": true, "version": map[string]any{"version": m["version"]}})
	case r.Method == "POST" && r.URL.Path == "/api/v1/messages":
		inst := f.bots[tok]
		if inst == "" {
			fail(w, 401, "invalid_token")
			return
		}
		conv := str("conversationId")
		in := false
		for _, c := range f.channels[inst] {
			in = in || c == conv
		}
		if !in || str("text") == "" {
			fail(w, 404, "not_found")
			return
		}
		if !f.take(w, "write", inst) {
			return
		}
		msg := map[string]any{"id": f.id(), "conversationId": conv, "author": map[string]any{"kind": "bot", "id": inst},
			"text": str("text"), "createdAt": time.Now().UTC()}
		f.msgs[conv] = append(f.msgs[conv], msg)
		if f.store != nil {
			fmt.Fprintf(f.store, "%s %s\n", conv, str("text"))
		}
		writeJSONResp(w, 201, map[string]any{"message": msg})
	case r.Method == "GET" && len(seg) == 5 && seg[2] == "conversations" && seg[4] == "messages":
		if f.bots[tok] == "" {
			fail(w, 401, "invalid_token")
			return
		}
		if !f.take(w, "read", f.bots[tok]) {
			return
		}
		if f.gets++; f.failGets && f.gets > 1 {
			fail(w, 500, "internal_error")
			return
		}
		// The cursor is the number of newest messages skipped.
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		skip, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		all := f.msgs[seg[3]]
		var page []map[string]any
		for i := len(all) - 1 - skip; i >= 0 && len(page) < limit; i-- {
			page = append(page, all[i])
		}
		var next any
		if skip+len(page) < len(all) {
			next = strconv.Itoa(skip + len(page))
		}
		writeJSONResp(w, 200, map[string]any{"messages": page, "nextCursor": next})
	case r.Method == "PATCH" && len(seg) == 4 && seg[2] == "messages":
		inst := f.bots[tok]
		if inst == "" {
			fail(w, 401, "invalid_token")
			return
		}
		if !f.take(w, "write", inst) {
			return
		}
		writeJSONResp(w, 200, map[string]any{"message": map[string]any{"id": seg[3], "text": str("text")}})
	case r.Method == "GET" && r.URL.Path == "/api/v1/conversations":
		inst := f.bots[tok]
		if inst == "" {
			fail(w, 401, "invalid_token")
			return
		}
		if !f.take(w, "read", inst) {
			return
		}
		writeJSONResp(w, 200, map[string]any{"conversations": []any{}, "nextCursor": nil})
	case r.Method == "GET" && r.URL.Path == "/metrics":
		if tok != f.opToken {
			fail(w, 401, "invalid_token")
			return
		}
		// The history cache's series, as kitd writes them: the bytes of
		// the messages posted, under a bound of 1 MiB.
		n := 0
		for _, m := range f.msgs {
			n += len(m)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE kitd_history_cache_bytes gauge\nkitd_history_cache_bytes %d\nkitd_history_cache_limit_bytes %d\n", min(n*300, 1<<20), 1<<20)
		fmt.Fprintf(w, "kitd_history_cache_windows %d\nkitd_history_cache_hits_total %d\nkitd_history_cache_misses_total 1\nkitd_history_cache_evictions_total 0\n", len(f.msgs), f.gets)
	case r.URL.Path == "/healthz":
		writeJSONResp(w, 200, map[string]any{"ok": true})
	default:
		fail(w, 404, "not_found")
	}
}
